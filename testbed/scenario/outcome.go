package scenario

import (
	"errors"

	"felix/client"
	"felix/testbed/history"
)

// SDKOutcome maps the error of an SDK call that the SDK sends at most once (cache Put,
// Delete and CounterAdd, Get and CounterGet on a client dialled WithMaxAttempts(1), and
// every call whose errors are definite in the same way) to a history outcome:
//
//   - nil: history.OK;
//   - ErrIndeterminate (also a broker's "indeterminate" answer, which is not
//     ErrRefused): history.Info — it may have been applied;
//   - a definite refusal (client.ErrRefused: the one attempt was refused),
//     ErrShardUnavailable without a broker answer (the SDK's "request not sent"),
//     ErrInvalidArgument (refused before sending), ErrUnsupported: history.Fail;
//   - anything else (a context ending while waiting for a connection, a transport
//     error): history.Info, since the SDK's errors do not all say whether the request
//     left the client.
//
// Not for idempotent publishes: a re-sent batch can be refused (or not sent) after an
// earlier attempt was stored, so PublishOutcome applies there.
func SDKOutcome(err error) history.Outcome {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, client.ErrIndeterminate):
		return history.Info
	case errors.Is(err, client.ErrRefused), errors.Is(err, client.ErrShardUnavailable),
		errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrUnsupported):
		return history.Fail
	}
	return history.Info
}

// PublishOutcome maps the outcome of one record of an idempotent Publisher
// (Pending.Wait's error) to a history outcome: nil is history.OK, ErrInvalidArgument
// and ErrUnsupported (the batch was never encoded) history.Fail, anything else
// history.Info. An idempotent batch is re-sent with its request id after a lost answer,
// and the SDK reports the last attempt's error, so a refusal or a "not sent" after a
// re-send says nothing of the first attempt, which may be stored. (An error from
// Publisher.Publish itself — nothing was queued — is a Fail: the caller knows that.)
func PublishOutcome(err error) history.Outcome {
	switch {
	case err == nil:
		return history.OK
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrUnsupported):
		return history.Fail
	}
	return history.Info
}

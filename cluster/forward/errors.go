package forward

import "errors"

// Errors of the builders and the machine. Test with errors.Is.
var (
	// ErrShardOutOfRange: a Route whose Shard is not in [0, Shards), or Shards over 2^32-1.
	ErrShardOutOfRange = errors.New("forward: routed shard out of range")
	// ErrNoCredential: an authorized forward kind (22, 23, 28) needs a non-empty credential.
	ErrNoCredential = errors.New("forward: authorized forward without a credential")
	// ErrKind: a kind the message cannot be sent as (AsKind), or a Machine started with a
	// kind that is no forward request or with a cache op outside 1..5.
	ErrKind = errors.New("forward: kind not possible for this forward")
	// ErrOptions: Options.Attempts negative or above MaxAttempts, or a negative backoff.
	ErrOptions = errors.New("forward: invalid retry options")
	// ErrFinished: Machine.Step after the machine gave its terminal action.
	ErrFinished = errors.New("forward: request already finished")
)

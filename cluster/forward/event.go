package forward

import (
	"context"
	"errors"

	"felix/cluster/transport"
	"felix/proto"
)

// Outcome is what became of one attempt of a forward: a transport outcome (the request's
// error from transport.Pool.Request) or the owner's answer.
type Outcome uint8

// Outcomes (seed, "Retrying a forwarded publish", the rows of its table).
const (
	OutShed        Outcome = iota + 1 // transport.ErrShed: in-flight bound reached, nothing sent
	OutBackoff                        // transport.ErrBackoff: peer in its reconnect window, nothing sent
	OutUnreachable                    // transport.ErrUnreachable: dial or handshake failed, nothing sent
	// OutNotSent: refused locally before anything was sent, and a retry would meet the
	// same refusal: transport.ErrWrongPeer, ErrUnauthorized, ErrProtocolVersion,
	// ErrClosed, ErrTooManyPeers, ErrInvalidNodeID, an encoding error.
	OutNotSent
	OutDropped         // transport.ErrConnectionLost: the request was outstanding; outcome unknown
	OutTimedOut        // transport.ErrTimeout, or the caller's context ended; outcome unknown
	OutPublishOk       // ForwardPublishOk
	OutDuplicate       // ForwardPublishDuplicate (answers kind 28)
	OutCacheOk         // ForwardCacheOk
	OutNotLeader       // NotLeader: Owner, OwnerAddr, Generation
	OutPublishError    // ForwardPublishError: Code
	OutCacheError      // ForwardCacheError: Code
	OutUnsupportedKind // UnsupportedKind: RefusedKind
	// OutOther: any other answer (Error, a replication kind, ...) or any other error: a
	// protocol violation whose outcome is unknown.
	OutOther
)

var outcomeNames = [...]string{"invalid", "shed", "backoff", "unreachable", "not-sent", "dropped",
	"timed-out", "publish-ok", "duplicate", "cache-ok", "not-leader", "publish-error", "cache-error",
	"unsupported-kind", "other"}

// String names the outcome ("shed", "not-leader", ...).
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "Outcome(?)"
}

// Event is the outcome of one attempt, as Machine.Step reads it.
type Event struct {
	Outcome     Outcome
	Code        proto.InternalCode // OutPublishError, OutCacheError
	Owner       string             // OutNotLeader: the owner's node id
	OwnerAddr   string             // OutNotLeader: the owner's client address
	Generation  uint64             // OutNotLeader: the owner's generation
	RefusedKind proto.Kind         // OutUnsupportedKind
	FirstOffset uint64             // OutPublishOk, OutDuplicate
	LastOffset  uint64             // OutPublishOk, OutDuplicate
	Present     bool               // OutCacheOk: a value is present
	Value       []byte             // OutCacheOk: the value (aliases the answer)
	Err         error              // the transport error, when there was one
}

// Classify turns the result of transport.Pool.Request (its answer, or its error) into an
// Event, mapping cluster/transport/errors.go: ErrShed, ErrBackoff, ErrUnreachable are the
// nothing-sent rows; ErrConnectionLost is OutDropped; ErrTimeout and a context error are
// OutTimedOut (the request may have been sent); the errors that refuse before sending and
// would refuse again are OutNotSent; any other error, and any answer that is no forward
// answer, is OutOther. Pure.
func Classify(resp proto.InternalMessage, err error) Event {
	if err != nil {
		return Event{Outcome: classifyErr(err), Err: err}
	}
	switch m := resp.(type) {
	case *proto.ForwardPublishOk:
		return Event{Outcome: OutPublishOk, FirstOffset: m.FirstOffset, LastOffset: m.LastOffset}
	case *proto.ForwardPublishDuplicate:
		return Event{Outcome: OutDuplicate, FirstOffset: m.FirstOffset, LastOffset: m.LastOffset}
	case *proto.ForwardCacheOk:
		return Event{Outcome: OutCacheOk, Present: m.Present, Value: m.Value}
	case *proto.InternalNotLeader:
		return Event{Outcome: OutNotLeader, Owner: string(m.OwnerNodeID), OwnerAddr: string(m.OwnerAddress),
			Generation: m.Generation}
	case *proto.ForwardPublishError:
		return Event{Outcome: OutPublishError, Code: m.Code}
	case *proto.ForwardCacheError:
		return Event{Outcome: OutCacheError, Code: m.Code}
	case *proto.UnsupportedKind:
		return Event{Outcome: OutUnsupportedKind, RefusedKind: m.RefusedKind}
	}
	return Event{Outcome: OutOther}
}

func classifyErr(err error) Outcome {
	switch {
	case errors.Is(err, transport.ErrShed):
		return OutShed
	case errors.Is(err, transport.ErrBackoff):
		return OutBackoff
	case errors.Is(err, transport.ErrUnreachable):
		return OutUnreachable
	case errors.Is(err, transport.ErrConnectionLost):
		return OutDropped
	case errors.Is(err, transport.ErrTimeout), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		return OutTimedOut
	}
	for _, s := range notSent {
		if errors.Is(err, s) {
			return OutNotSent
		}
	}
	return OutOther
}

// notSent are the errors transport.Pool.Request returns before sending that a retry to the
// same peer would meet again.
var notSent = []error{transport.ErrWrongPeer, transport.ErrUnauthorized, transport.ErrProtocolVersion,
	transport.ErrClosed, transport.ErrTooManyPeers, transport.ErrInvalidNodeID, proto.ErrFrameTooLarge,
	proto.ErrTooLong, proto.ErrInvalidUTF8, proto.ErrMalformed}

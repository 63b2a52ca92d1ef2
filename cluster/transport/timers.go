package transport

// Per-request objects recycled between requests (docs/bench/transport.md, run E): the timer of
// a request's timeout, the channel its answer arrives on, and the dialler's read buffer.

import (
	"sync"
	"time"

	"felix/proto"
)

// timers recycles request timeout timers. With the Go 1.23+ timer semantics (go.mod ≥ 1.23)
// Stop guarantees that no stale tick is received after it, so a stopped timer is reusable.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// waiters recycles answer channels (capacity 1). A channel goes back only from await after it
// received its answer: the reader deletes the waiter from the map before its one send, so no
// one holds the channel then. A channel that timed out, was abandoned by ctx or closed by the
// connection's end is never reused (a late send could still reach it).
var waiters = sync.Pool{New: func() any { return make(chan proto.InternalMessage, 1) }}

func getWaiter() chan proto.InternalMessage { return waiters.Get().(chan proto.InternalMessage) }

func putWaiter(w chan proto.InternalMessage) { waiters.Put(w) }

// scalarAnswerKinds are the answer kinds whose decoded message holds only scalars, no slice
// of the frame body (TestScalarAnswersHoldNoBytes checks their types), so the dialler's reader
// may read the next frame into the same buffer.
var scalarAnswerKinds = []proto.Kind{
	proto.KindForwardPublishOk, proto.KindForwardPublishDuplicate, proto.KindForwardPublishError,
	proto.KindForwardCacheError, proto.KindReplicateOk, proto.KindReplicateError,
	proto.KindUnsupportedKind, proto.KindFenceOk, proto.KindFencePositionOk, proto.KindError,
}

var scalarAnswers = func() (t [256]bool) {
	for _, k := range scalarAnswerKinds {
		t[k] = true
	}
	return t
}()

func scalarAnswer(k proto.Kind) bool { return int(k) < len(scalarAnswers) && scalarAnswers[k] }

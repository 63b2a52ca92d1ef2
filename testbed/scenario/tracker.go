package scenario

import (
	"context"
	"sync"
)

// Tracker counts a load's client operations (invoked, in flight, completed) and the
// faults applied to it, and lets a fault injector wait for a condition on them without
// polling: every change wakes the waiters. Safe for concurrent use.
//
// Epochs: the fault counter. An operation is stamped with the epoch at invocation and
// at completion, so it was in flight at fault k (epoch k set just before the k-th fault)
// when invoked < k <= completed.
type Tracker struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced at every change
	inflight  int64
	fresh     int64 // in flight and invoked since the last fault
	completed int64
	okSince   int64 // ok completions since the last fault
	epoch     int64
	done      bool
	spans     [][2]int64 // per ok operation: invoke and complete epochs
}

// TrackerState is a snapshot of a Tracker.
type TrackerState struct {
	InFlight  int64 // operations invoked and not completed
	Fresh     int64 // of them, those invoked since the last fault (on the restarted target)
	Completed int64 // operations completed (any outcome)
	OKSince   int64 // operations completed ok since the last fault (or since the start)
	Epoch     int64 // faults so far
	Done      bool  // the load said it will invoke nothing more (Finish)
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{changed: make(chan struct{})} }

// notifyLocked wakes every waiter; t.mu is held.
func (t *Tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// Invoke counts one operation in flight and returns its invocation epoch (for Complete).
func (t *Tracker) Invoke() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight++
	t.fresh++
	t.notifyLocked()
	return t.epoch
}

// Complete counts the completion of an operation invoked at epoch invoked; ok says it
// completed ok (those are the operations OKSince and AckedAtFaults count).
func (t *Tracker) Complete(invoked int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inflight--
	if invoked == t.epoch {
		t.fresh--
	}
	t.completed++
	if ok {
		t.okSince++
		t.spans = append(t.spans, [2]int64{invoked, t.epoch})
	}
	t.notifyLocked()
}

// Fault advances the epoch just before a fault is applied and returns the state at that
// instant (Fresh says whether the fault found operations invoked since the previous one
// in flight).
func (t *Tracker) Fault() TrackerState {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stateLocked()
	t.epoch++
	t.okSince, t.fresh = 0, 0
	t.notifyLocked()
	st.Epoch = t.epoch
	return st
}

// Finish records that the load invokes nothing more.
func (t *Tracker) Finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done = true
	t.notifyLocked()
}

// State returns a snapshot.
func (t *Tracker) State() TrackerState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stateLocked()
}

func (t *Tracker) stateLocked() TrackerState {
	return TrackerState{InFlight: t.inflight, Fresh: t.fresh, Completed: t.completed, OKSince: t.okSince, Epoch: t.epoch, Done: t.done}
}

// Wait blocks until cond holds on the tracker's state (checked now and after every
// change) or ctx ends. Errors: ctx.Err().
func (t *Tracker) Wait(ctx context.Context, cond func(TrackerState) bool) error {
	for {
		t.mu.Lock()
		ok, ch := cond(t.stateLocked()), t.changed
		t.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// AckedAtFaults returns, for each epoch in epochs, how many operations that completed ok
// were in flight at that fault (invoked before it, completed after).
func (t *Tracker) AckedAtFaults(epochs []int64) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]int, len(epochs))
	for _, sp := range t.spans {
		for k, e := range epochs {
			if sp[0] < e && e <= sp[1] {
				out[k]++
			}
		}
	}
	return out
}

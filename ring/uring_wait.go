package ring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Wait submits prepared ops, then reaps; see Ring.Wait. Submission and
// blocking share one io_uring_enter(to_submit, min_complete, GETEVENTS) when
// both are needed; a timeout goes through IORING_ENTER_EXT_ARG; a Wake
// completes the armed eventfd read.
func (r *uringRing) Wait(dst []Completion, min int, timeout time.Duration) (int, error) {
	if r.closed {
		return 0, ErrClosed
	}
	defer func() { r.woke = false }()
	n := r.reap(dst)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	// Under deferred or cooperative task work, a non-blocking Wait that found
	// nothing still asks the kernel once for completions.
	poll := n == 0 && min <= 0 && len(dst) > 0 && r.taskWorkPending()
	expired := false
	for {
		pending := r.publish()
		wait := n < min && n < len(dst) && !r.woke && !expired
		var arg *geteventsArg
		if wait && !deadline.IsZero() {
			if arg = r.timeoutArg(deadline); arg == nil {
				wait = false
			}
		}
		if !wait && !poll && pending == 0 {
			return n, nil
		}
		var flags, want uint32
		if wait {
			flags, want = enterGetEvents, uint32(min-n)
		} else if poll {
			flags = enterGetEvents
		}
		poll = false
		_, errno := r.enter(pending, want, flags, arg)
		n += r.reap(dst[n:])
		switch errno {
		case 0, unix.EINTR:
		case unix.ETIME:
			expired = true
		default:
			return n, fmt.Errorf("ring: io_uring_enter wait: %w", errno)
		}
	}
}

// publish stores the SQ tail (release: the SQE contents are written before
// it) and returns how many SQEs the kernel has not consumed yet.
func (r *uringRing) publish() uint32 {
	atomic.StoreUint32(r.sqTail, r.localTail)
	pending := r.localTail - atomic.LoadUint32(r.sqHead)
	if pending == 0 {
		r.userPrepared = 0
	}
	return pending
}

// timeoutArg fills the EXT_ARG argument with the time left until deadline,
// or returns nil when it has passed.
func (r *uringRing) timeoutArg(deadline time.Time) *geteventsArg {
	left := time.Until(deadline)
	if left <= 0 {
		return nil
	}
	r.mem.ts = kernelTimespec{sec: int64(left / time.Second), nsec: int64(left % time.Second)}
	r.mem.arg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.mem.ts)))}
	return &r.mem.arg
}

// taskWorkPending reports whether completions may be waiting as task work
// that only an io_uring_enter(GETEVENTS) runs: always under DEFER_TASKRUN,
// and when the kernel set IORING_SQ_TASKRUN under COOP_TASKRUN.
func (r *uringRing) taskWorkPending() bool {
	if r.setupFlags&setupDeferTaskrun != 0 {
		return true
	}
	return r.setupFlags&setupTaskrunFlag != 0 && atomic.LoadUint32(r.sqFlags)&sqTaskrun != 0
}

// reap consumes CQEs into dst (up to len(dst)) and returns how many caller
// completions it copied. Internal completions are consumed and handled: the
// wake read sets woke and is re-armed (unless closed); cancels are dropped.
// A nil dst discards caller completions too (Close's drain).
func (r *uringRing) reap(dst []Completion) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for head != tail && (dst == nil || n < len(dst)) {
		c := &r.cqes[head&r.cqMask]
		userData, res := c.userData, c.res
		head++
		switch {
		case userData == tagWake:
			r.woke, r.wakeArmed = true, false
			if !r.closed {
				r.armWake()
			}
		case userData&tagInternal != 0:
		default:
			if dst != nil {
				dst[n] = Completion{UserData: r.slots[userData].userData, Res: res}
				n++
			}
			r.releaseSlot(uint32(userData))
		}
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// Close cancels in-flight ops, drains their completions (bounded by
// closeDrainTimeout), unpins their buffers and releases the ring. Ops whose
// completions never came are left pinned and reachable for the life of the
// process (the kernel may still write their buffers).
func (r *uringRing) Close() error {
	r.wakeMu.Lock()
	if r.closed {
		r.wakeMu.Unlock()
		return ErrClosed
	}
	r.closed = true
	r.wakeMu.Unlock()
	r.dropUnsubmitted()
	err := r.cancelInFlight()
	if err == nil {
		err = r.drain()
	}
	if err != nil {
		leak(r)
		return errors.Join(err, unix.Close(r.fd))
	}
	return r.release()
}

// dropUnsubmitted forgets SQEs filled since the last submission.
func (r *uringRing) dropUnsubmitted() {
	published := atomic.LoadUint32(r.sqTail)
	for i := published; i != r.localTail; i++ {
		switch userData := r.sqes[i&r.sqMask].userData; {
		case userData == tagWake:
			r.wakeArmed = false
		case userData&tagInternal == 0:
			r.releaseSlot(uint32(userData))
		}
	}
	r.localTail, r.userPrepared = published, 0
}

// cancelInFlight queues an IORING_OP_ASYNC_CANCEL for every busy slot and
// for the wake read, submitting whenever the SQ fills.
func (r *uringRing) cancelInFlight() error {
	cancel := func(target uint64) error {
		if r.sqRoom() == 0 {
			if err := r.submitAll(); err != nil {
				return err
			}
		}
		e := r.nextSQE()
		e.opcode = opAsyncCancel
		e.fd = -1
		e.addr = target
		e.userData = tagCancel
		return nil
	}
	for i := range r.slots {
		if r.slots[i].busy {
			if err := cancel(uint64(i)); err != nil {
				return err
			}
		}
	}
	if r.wakeArmed {
		if err := cancel(tagWake); err != nil {
			return err
		}
	}
	return r.submitAll()
}

// drain reaps (discarding) until no op is in flight or the timeout passes.
func (r *uringRing) drain() error {
	deadline := time.Now().Add(closeDrainTimeout)
	for len(r.free) < len(r.slots) || r.wakeArmed {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("ring: close: %d ops still in flight after %v", len(r.slots)-len(r.free), closeDrainTimeout)
		}
		left = min(left, 100*time.Millisecond)
		r.mem.ts = kernelTimespec{nsec: int64(left)}
		r.mem.arg = geteventsArg{ts: uint64(uintptr(unsafe.Pointer(&r.mem.ts)))}
		_, errno := r.enter(0, 1, enterGetEvents, &r.mem.arg)
		if errno != 0 && errno != unix.EINTR && errno != unix.ETIME {
			return fmt.Errorf("ring: close: io_uring_enter: %w", errno)
		}
		r.reap(nil)
	}
	return nil
}

// release frees every resource of a ring whose ops have all completed
// (or that never ran one). Errors are joined.
func (r *uringRing) release() error {
	var errs []error
	if r.slots != nil {
		r.slotsPin.Unpin()
	}
	if r.reg.buffers != nil {
		r.reg.dropBuffers() // the ring fd's close below unregisters them
	}
	errs = append(errs, r.maps.unmap())
	if r.internal != nil {
		errs = append(errs, unix.Munmap(r.internal))
		r.internal, r.mem = nil, nil
	}
	if r.eventFD >= 0 {
		errs = append(errs, unix.Close(r.eventFD))
		r.eventFD = -1
	}
	if r.fd >= 0 {
		errs = append(errs, unix.Close(r.fd))
		r.fd = -1
	}
	return errors.Join(errs...)
}

var (
	leakedMu sync.Mutex
	leaked   []*uringRing
)

// leak keeps r (its slots, Pinners and internal page) reachable forever:
// the kernel may still touch memory of ops whose completions never came.
func leak(r *uringRing) {
	leakedMu.Lock()
	leaked = append(leaked, r)
	leakedMu.Unlock()
}

// Package ringtest holds test doubles for ring.Ring. Faulty wraps a real
// ring and injects failures into chosen ops, so that packages above ring
// (seglog, core) can test their error paths (failed writes, failed
// fdatasync, short writes) with the real I/O underneath (EXAMPLES.md A3).
//
// Fault model: an injected op never reaches the kernel; its completion
// carries the injected result. When the injected result breaks a link chain
// (negative, or short for a read or write) the rest of the chain completes
// with -ECANCELED without running, as io_uring does. Ops before the injected
// one in its chain run for real; their chain is closed by a filler NOP
// (UserData FillerUserData, consumed by Faulty, never returned).
package ringtest

import (
	"syscall"
	"time"

	"felix/ring"
)

// FillerUserData is reserved by Faulty for the NOP that ends a real chain cut
// short by an injection. Callers of a Faulty must not use it.
const FillerUserData = 0xfa17_fa17_fa17_fa17

// Fault decides one op's fate: return (res, true) to complete it with res
// instead of running it (res < 0 is -errno; res >= 0 a short count for a read
// or write), or (0, false) to run it. Called from Prepare, in order.
type Fault func(op *ring.Op) (res int32, inject bool)

// Faulty is a ring.Ring that injects failures decided by a Fault. Like the
// ring it wraps, only the owning goroutine calls it (Wake excepted).
type Faulty struct {
	inner       ring.Ring
	fault       Fault
	synthetic   []ring.Completion // injected or cancelled, not yet reaped
	fillers     int               // filler NOPs in flight in inner
	chainBroken bool              // the current chain had an injected failure
	lastLinked  bool              // the last op sent to inner had Link set
	injected    int
}

// NewFaulty wraps inner; every op prepared on the result is first shown to
// fault. Closing the Faulty closes inner.
func NewFaulty(inner ring.Ring, fault Fault) *Faulty {
	return &Faulty{inner: inner, fault: fault}
}

// Injected returns how many ops had a result injected (cancelled chain
// members not counted).
func (f *Faulty) Injected() int { return f.injected }

// Backend returns the wrapped ring's backend.
func (f *Faulty) Backend() string { return f.inner.Backend() }

// Prepare injects, cancels or forwards op; see ring.Ring.Prepare. Errors
// are the wrapped ring's, or ring.ErrQueueFull when a filler NOP finds the
// queue full (Submit, then retry).
func (f *Faulty) Prepare(op *ring.Op) error {
	if f.chainBroken {
		f.synthetic = append(f.synthetic, ring.Completion{UserData: op.UserData, Res: -int32(syscall.ECANCELED)})
		f.chainBroken = op.Link
		return nil
	}
	res, inject := f.fault(op)
	if !inject {
		if err := f.inner.Prepare(op); err != nil {
			return err
		}
		f.lastLinked = op.Link
		return nil
	}
	if f.lastLinked {
		filler := ring.Op{Code: ring.OpNop, UserData: FillerUserData}
		if err := f.inner.Prepare(&filler); err != nil {
			return err
		}
		f.fillers++
		f.lastLinked = false
	}
	f.injected++
	f.synthetic = append(f.synthetic, ring.Completion{UserData: op.UserData, Res: res})
	f.chainBroken = op.Link && breaks(op, res)
	return nil
}

// breaks applies io_uring's link rule: failure or a short read or write.
func breaks(op *ring.Op, res int32) bool {
	if res < 0 {
		return true
	}
	switch op.Code {
	case ring.OpWrite, ring.OpRead, ring.OpWriteFixed, ring.OpReadFixed:
		return int(res) < len(op.Buf)
	case ring.OpWritev, ring.OpReadv:
		total := 0
		for _, b := range op.Iov {
			total += len(b)
		}
		return int(res) < total
	}
	return false
}

// Submit forwards to the wrapped ring. A chain left open by the last
// prepared op ends here, as on the real backends.
func (f *Faulty) Submit() error {
	f.chainBroken, f.lastLinked = false, false
	return f.inner.Submit()
}

// Wait returns injected completions first, then the wrapped ring's, hiding
// filler NOPs; see ring.Ring.Wait.
func (f *Faulty) Wait(dst []ring.Completion, min int, timeout time.Duration) (int, error) {
	f.chainBroken, f.lastLinked = false, false
	n := copy(dst, f.synthetic)
	f.synthetic = f.synthetic[:copy(f.synthetic, f.synthetic[n:])]
	if n >= min && n > 0 || n == len(dst) {
		return n, f.inner.Submit() // Wait submits, as on the real backends
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	for {
		left := time.Duration(0)
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				return n, nil
			}
		}
		raw, err := f.inner.Wait(dst[n:], min-n, left)
		n += f.dropFillers(dst[n : n+raw])
		if err != nil || n >= min || n == len(dst) || raw == 0 {
			return n, err // raw == 0: a timeout or a Wake
		}
	}
}

// dropFillers removes filler completions from cs in place, returning how
// many caller completions remain.
func (f *Faulty) dropFillers(cs []ring.Completion) int {
	kept := 0
	for _, c := range cs {
		if c.UserData == FillerUserData && f.fillers > 0 {
			f.fillers--
			continue
		}
		cs[kept] = c
		kept++
	}
	return kept
}

// Wake forwards to the wrapped ring (goroutine-safe).
func (f *Faulty) Wake() error { return f.inner.Wake() }

// Close closes the wrapped ring and drops injected completions.
func (f *Faulty) Close() error {
	f.synthetic = nil
	return f.inner.Close()
}

// FailNth injects -errno into the n-th op prepared (0-based, counting every
// op shown to it), for sweeps that fail op 0, then op 1, ... in turn.
func FailNth(n int, errno syscall.Errno) Fault {
	seen := -1
	return func(*ring.Op) (int32, bool) {
		seen++
		return -int32(errno), seen == n
	}
}

// FailCode injects -errno into every op of code (for example every
// ring.OpFdatasync with EIO).
func FailCode(code ring.OpCode, errno syscall.Errno) Fault {
	return func(op *ring.Op) (int32, bool) {
		return -int32(errno), op.Code == code
	}
}

var _ ring.Ring = (*Faulty)(nil)

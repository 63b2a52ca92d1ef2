package ringtest

import (
	"sync"
	"time"

	"felix/ring"
)

// Misreport is a ring.Ring whose chosen ops run for real but complete with a result the
// test picks: a write that reached the file reported as failed (EIO, ENOSPC), an fdatasync
// that ran reported as failed. It is the other fault model beside Faulty (whose injected ops
// never reach the kernel): what a caller does when the kernel says an op failed that in fact
// took effect. Like the ring it wraps, only the owning goroutine calls it (Wake excepted).
type Misreport struct {
	ring.Ring
	mu     sync.Mutex
	pick   Fault
	marked map[uint64]int32
}

// NewMisreport wraps inner; pick sees every op prepared while armed (SetFault) and returns
// the result its completion will carry, or false to leave it alone. pick may be nil (nothing
// is misreported until SetFault). Closing the Misreport closes inner.
func NewMisreport(inner ring.Ring, pick Fault) *Misreport {
	return &Misreport{Ring: inner, pick: pick, marked: map[uint64]int32{}}
}

// SetFault replaces the pick function (nil: misreport nothing from now on; ops already
// marked keep their result).
func (m *Misreport) SetFault(pick Fault) {
	m.mu.Lock()
	m.pick = pick
	m.mu.Unlock()
}

// Prepare runs op on the wrapped ring, marking it first when the pick function chooses it.
func (m *Misreport) Prepare(op *ring.Op) error {
	m.mu.Lock()
	if m.pick != nil {
		if res, ok := m.pick(op); ok {
			m.marked[op.UserData] = res
		}
	}
	m.mu.Unlock()
	return m.Ring.Prepare(op)
}

// Wait reaps from the wrapped ring and replaces the result of each marked op.
func (m *Misreport) Wait(dst []ring.Completion, min int, timeout time.Duration) (int, error) {
	n, err := m.Ring.Wait(dst, min, timeout)
	m.mu.Lock()
	for i := range dst[:n] {
		if res, ok := m.marked[dst[i].UserData]; ok {
			dst[i].Res = res
			delete(m.marked, dst[i].UserData)
		}
	}
	m.mu.Unlock()
	return n, err
}

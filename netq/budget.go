package netq

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrOverBudget: a single request is larger than the whole budget and could never fit.
var ErrOverBudget = errors.New("netq: request larger than the byte budget")

// ByteBudget bounds bytes in flight (e.g. publish frames read but not yet appended by the
// engine, per connection: FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES). Acquire blocks while
// the budget is spent, which stops the reader and lets QUIC flow control pace the sender.
// Safe for concurrent use. Waiters are served in FIFO order so a large frame is not starved.
type ByteBudget struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	waiters  []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

// NewByteBudget returns a budget of capacity bytes (> 0).
func NewByteBudget(capacity int64) *ByteBudget {
	if capacity <= 0 {
		capacity = 1
	}
	return &ByteBudget{capacity: capacity}
}

// Capacity is the budget's size in bytes.
func (b *ByteBudget) Capacity() int64 { return b.capacity }

// Used is the number of bytes currently acquired.
func (b *ByteBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Acquire takes n bytes, waiting until they are free or ctx ends (ctx's error is returned
// and nothing is taken). n > Capacity returns an error wrapping ErrOverBudget at once.
func (b *ByteBudget) Acquire(ctx context.Context, n int64) error {
	if n > b.capacity {
		return fmt.Errorf("%w: %d > %d bytes", ErrOverBudget, n, b.capacity)
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.used += n
		b.mu.Unlock()
		return nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // granted while we were cancelled: give it back
			b.used -= n
			b.grantLocked()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grantLocked()
		}
		return ctx.Err()
	}
}

// TryAcquire takes n bytes only if they are free now, reporting whether it did.
func (b *ByteBudget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) == 0 && b.used+n <= b.capacity {
		b.used += n
		return true
	}
	return false
}

// Release returns n bytes taken by Acquire/TryAcquire. Releasing more than was taken is a
// programming error and panics with the figures involved.
func (b *ByteBudget) Release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.used {
		panic(fmt.Sprintf("netq: ByteBudget.Release(%d) with only %d bytes acquired", n, b.used))
	}
	b.used -= n
	b.grantLocked()
}

func (b *ByteBudget) grantLocked() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.capacity {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

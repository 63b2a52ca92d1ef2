//go:build !race

package faultproxy

import (
	"testing"
	"time"
)

// TestHotPathAllocatesNothing: a datagram's trip through a link (pooled buffer in, decision, delay
// queue, out) allocates nothing once the pools and the queue are warm. Not under -race, whose
// sync.Pool drops items on purpose.
func TestHotPathAllocatesNothing(t *testing.T) {
	for _, f := range []Faults{
		{},
		{LossPct: 10, DuplicatePct: 10, CorruptPct: 10, Jitter: time.Millisecond, Delay: time.Millisecond},
		{ReorderPct: 20, RateBytesPerSec: 1 << 30},
	} {
		l := newLink(ToServer, 1, SystemClock{}, newBufPool())
		l.set(f, t0, false)
		out := make([]packet, 0, 16)
		now := t0
		step := func() {
			now = now.Add(time.Millisecond)
			out = l.handle(packet{buf: l.pool.get(1200), n: 1200}, now, out[:0])
			var next time.Time
			out, next = l.popDue(now.Add(time.Second), out)
			_ = next
			for _, q := range out {
				l.pool.put(q.buf)
			}
		}
		for range 1000 {
			step()
		}
		if a := testing.AllocsPerRun(5000, step); a > 0.01 {
			t.Errorf("faults %v: %.3f allocations per datagram, want 0", f, a)
		}
	}
}

package faultproxy

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"felix/clock/clocktest"
)

var t0 = time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)

// decide runs n datagrams of 100 bytes through a fresh link with faults f (at 1 ms intervals from
// t0) and returns the sequence numbers emitted at once, in order, and the link.
func decide(seed uint64, f Faults, n int) ([]uint64, *link) {
	l := newLink(ToServer, seed, SystemClock{}, newBufPool())
	l.set(f, t0, false)
	var got []uint64
	var out []packet
	for i := range n {
		p := packet{buf: l.pool.get(100), n: 100}
		binary.BigEndian.PutUint64(*p.buf, uint64(i))
		out = l.handle(p, t0.Add(time.Duration(i)*time.Millisecond), out[:0])
		for _, q := range out {
			got = append(got, binary.BigEndian.Uint64(*q.buf))
			l.pool.put(q.buf)
		}
	}
	return got, l
}

func TestSeedReplaysDecisions(t *testing.T) {
	f := Faults{LossPct: 30, DuplicatePct: 10, ReorderPct: 10}
	a, _ := decide(42, f, 2000)
	b, _ := decide(42, f, 2000)
	c, _ := decide(43, f, 2000)
	if !slices.Equal(a, b) {
		t.Fatal("one seed gave two different runs")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 42 and 43 gave the same run")
	}
	// The links of one proxy draw from different streams of the same seed.
	ts := newLink(ToServer, 42, SystemClock{}, newBufPool())
	tc := newLink(ToClient, 42, SystemClock{}, newBufPool())
	if ts.rng.Uint64() == tc.rng.Uint64() {
		t.Fatal("to-server and to-client share a PRNG stream")
	}
}

func TestTokenBucketPacing(t *testing.T) {
	l := newLink(ToServer, 1, SystemClock{}, newBufPool())
	l.set(Faults{RateBytesPerSec: 1000, RateBurstBytes: 300}, t0, false)
	// Three 100-byte datagrams fit the 300-byte burst; then each waits 100 ms more than the last.
	want := []time.Duration{0, 0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
	for i, w := range want {
		got, ok := l.shape(100, t0)
		if !ok || got != w {
			t.Fatalf("datagram %d waits %v (ok %v), want %v", i, got, ok, w)
		}
	}
	// After an idle second the bucket is full again, but no fuller than the burst.
	later := t0.Add(10 * time.Second)
	for i, w := range []time.Duration{0, 0, 0, 100 * time.Millisecond} {
		if got, _ := l.shape(100, later); got != w {
			t.Fatalf("after idle: datagram %d waits %v, want %v", i, got, w)
		}
	}
}

func TestJitterStaysInRange(t *testing.T) {
	l := newLink(ToServer, 7, SystemClock{}, newBufPool())
	l.set(Faults{Delay: 10 * time.Millisecond, Jitter: 20 * time.Millisecond}, t0, false)
	var lo, hi time.Duration = time.Hour, 0
	for range 10000 {
		d := l.delay()
		lo, hi = min(lo, d), max(hi, d)
	}
	// Delay-Jitter is negative: clamped at 0. The top is Delay+Jitter.
	if lo != 0 || hi > 30*time.Millisecond || hi < 29*time.Millisecond {
		t.Fatalf("jitter range [%v, %v], want [0, 30ms]", lo, hi)
	}
}

func TestReorderWindowOrder(t *testing.T) {
	// About half the datagrams are held, and each held one is emitted after the next two.
	got, l := decide(5, Faults{ReorderPct: 50, ReorderWindow: 2}, 400)
	if len(got)+len(l.held)+len(l.queue) != 400 {
		t.Fatalf("emitted %d + held %d + queued %d, want 400", len(got), len(l.held), len(l.queue))
	}
	late := 0
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			late++
		}
	}
	if late == 0 {
		t.Fatal("no datagram was emitted after a later one")
	}
}

// armed reports whether one of c's timers is set to fire at when.
func armed(c *clocktest.Fake, when time.Time) bool {
	for _, d := range c.Deadlines() {
		if d.Equal(when) {
			return true
		}
	}
	return false
}

func TestDelayFollowsTheClock(t *testing.T) {
	clock := clocktest.NewFake(t0)
	b := newBed(t, Config{Clock: clock, ToServer: Faults{Delay: 10 * time.Second}})
	buf := make([]byte, 64)
	if _, err := b.client.Write(b.datagram(buf, 1, 64)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Now().Add(5*time.Second), func() bool {
		s, _ := b.p.Stats(ToServer)
		return s.Queued == 1
	}, func() string { return "the datagram was not queued" })
	waitFor(t, time.Now().Add(5*time.Second), func() bool { return armed(clock, t0.Add(10*time.Second)) },
		func() string { return "the scheduler did not arm a timer for t0+10s" })
	clock.Advance(9 * time.Second)
	b.client.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := b.client.Read(buf); err == nil {
		t.Fatal("a 10 s delay delivered after 9 s of clock")
	}
	clock.Advance(time.Second)
	got := b.roundTripRead()
	if binary.BigEndian.Uint64(got) != 1 {
		t.Fatalf("wrong datagram %x", got)
	}
}

// roundTripRead waits (bounded) for the next reply.
func (b *bed) roundTripRead() []byte {
	b.t.Helper()
	b.client.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer b.client.SetReadDeadline(time.Time{})
	buf := make([]byte, MaxDatagramSize)
	n, err := b.client.Read(buf)
	if err != nil {
		b.t.Fatalf("no reply: %v", err)
	}
	return buf[:n]
}

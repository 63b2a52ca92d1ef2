package faultproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"felix/clock/clocktest"
	"felix/internal/testwait"
)

func TestCleanForwarding(t *testing.T) {
	b := newBed(t, Config{})
	r := b.stream(streamOpts{n: 1000})
	if r.unique != 1000 || r.replies != 1000 {
		t.Fatalf("clean: %d unique of %d replies, want 1000/1000", r.unique, r.replies)
	}
	s, _ := b.p.Stats(ToServer)
	if s.Forwarded != 1000 || s.Dropped() != 0 || s.Delayed != 0 {
		t.Fatalf("clean to-server stats %+v", s)
	}
	if b.p.Sessions() != 1 {
		t.Fatalf("sessions %d, want 1", b.p.Sessions())
	}
}

func TestLoss(t *testing.T) {
	const n, pct = 5000, 20.0
	b := newBed(t, Config{ToServer: Faults{LossPct: pct}})
	r := b.stream(streamOpts{n: n})
	s, _ := b.p.Stats(ToServer)
	if r.unique < 3600 || r.unique > 4400 {
		t.Errorf("loss %v%%: %d of %d delivered, want 3600..4400", pct, r.unique, n)
	}
	within(t, "delivered datagrams at 20% loss", float64(r.unique), n*(1-pct/100), 0.10)
	within(t, "loss %", 100*float64(n-r.unique)/n, pct, 0.10)
	if int(s.DroppedLoss) != n-r.unique || s.Forwarded != uint64(r.unique) {
		t.Errorf("counters %+v disagree with %d delivered", s, r.unique)
	}
}

func TestLossToClient(t *testing.T) {
	const n, pct = 5000, 10.0
	b := newBed(t, Config{ToClient: Faults{LossPct: pct}})
	r := b.stream(streamOpts{n: n})
	if got := b.echoed.Load(); got != n {
		t.Errorf("to-client loss must not touch to-server: echo got %d of %d", got, n)
	}
	within(t, "delivered datagrams at 10% to-client loss", float64(r.unique), n*(1-pct/100), 0.10)
	within(t, "to-client loss %", 100*float64(n-r.unique)/n, pct, 0.10)
}

func TestDuplicate(t *testing.T) {
	const n, pct = 5000, 20.0
	b := newBed(t, Config{ToServer: Faults{DuplicatePct: pct}})
	r := b.stream(streamOpts{n: n})
	s, _ := b.p.Stats(ToServer)
	if r.unique != n {
		t.Fatalf("duplicate: %d unique of %d", r.unique, n)
	}
	within(t, "replies at 20% duplication", float64(r.replies), n*(1+pct/100), 0.10)
	within(t, "duplicate %", 100*float64(r.replies-n)/n, pct, 0.10)
	if int(s.Duplicated) != r.replies-n || int(s.Forwarded) != r.replies {
		t.Errorf("counters %+v disagree with %d replies", s, r.replies)
	}
}

// TestRateCap: 500 datagrams of 1000 bytes sent at once through a 500 000 B/s cap with
// strict pacing leave the proxy on the cap's schedule, on the proxy's clock: with the fake
// clock advanced 100 ms at a time, exactly 50 more reach the upstream per step (datagram i
// is due (i+1)·2 ms after the burst). The schedule is the proxy's own; a measurement of
// wall-clock throughput at the client (this test before) read 0.83x of the cap on a loaded
// machine, the echo loop's scheduling, not the shaper.
func TestRateCap(t *testing.T) {
	const n, size, rate = 500, 1000, 500_000
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	b := newBed(t, Config{Clock: clk, ToServer: Faults{RateBytesPerSec: rate, RateQueueBytes: n * size}})
	buf := make([]byte, size)
	for i := range n {
		if _, err := b.client.Write(b.datagram(buf, uint64(i), size)); err != nil {
			t.Fatal(err)
		}
	}
	waitProxy(t, "every datagram queued by the shaper", func() bool {
		s, _ := b.p.Stats(ToServer)
		return s.Delayed == n
	})
	for k := 1; k <= 10; k++ {
		clk.Advance(100 * time.Millisecond)
		due := uint64(50 * k)
		waitProxy(t, fmt.Sprintf("%d datagrams upstream after %d ms", due, 100*k), func() bool { return b.echoed.Load() >= due })
		if got := b.echoed.Load(); got != due {
			t.Fatalf("after %d ms of the cap's clock %d datagrams reached the upstream, want %d", 100*k, got, due)
		}
	}
	if s, _ := b.p.Stats(ToServer); s.DelayedBytes != n*size || s.Dropped() != 0 {
		t.Errorf("a shaped stream must count delayed bytes and drop none: %+v", s)
	}
}

// waitProxy waits (10 s bound, wall clock) until cond holds: the proxy's goroutines act on
// a fake-clock step asynchronously.
func waitProxy(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, 10*time.Second, what, cond)
}

func TestRateQueueBound(t *testing.T) {
	// 100 B/s with a 2000-byte queue: of a burst of 50 datagrams of 200 bytes only the first few fit.
	b := newBed(t, Config{ToServer: Faults{RateBytesPerSec: 100, RateQueueBytes: 2000}})
	buf := make([]byte, 200)
	for i := range 50 {
		if _, err := b.client.Write(b.datagram(buf, uint64(i), 200)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, time.Now().Add(10*time.Second), func() bool {
		s, _ := b.p.Stats(ToServer)
		return s.PacketsIn == 50
	}, func() string { return "proxy did not read 50 datagrams" })
	s, _ := b.p.Stats(ToServer)
	// Strict pacing (no burst): ten datagrams fill the 2000-byte backlog, the other 40 are dropped.
	if s.DroppedRate != 40 || s.Queued != 10 {
		t.Fatalf("rate queue bound: %+v, want 40 dropped and 10 queued", s)
	}
}

// baseline is the median RTT of a clean stream on b: the loopback and scheduling cost, which the
// delay tests subtract (machine load only ever adds latency, on both measurements alike).
func (b *bed) baseline() time.Duration {
	b.t.Helper()
	r := b.stream(streamOpts{n: 300, window: 8})
	if r.unique != 300 {
		b.t.Fatalf("baseline: %d of 300", r.unique)
	}
	b.t.Logf("baseline median RTT %v", r.median())
	return r.median()
}

func TestDelay(t *testing.T) {
	const toServer, toClient = 100 * time.Millisecond, 50 * time.Millisecond
	b := newBed(t, Config{})
	base := b.baseline()
	if err := b.p.SetFaults(ToServer, Faults{Delay: toServer}); err != nil {
		t.Fatal(err)
	}
	if err := b.p.SetFaults(ToClient, Faults{Delay: toClient}); err != nil {
		t.Fatal(err)
	}
	r := b.stream(streamOpts{n: 500})
	if r.unique != 500 {
		t.Fatalf("delay: %d of 500", r.unique)
	}
	within(t, "delay ms (median RTT - baseline) with 100ms+50ms", ms(r.median()-base), ms(toServer+toClient), 0.10)
	if fastest := r.quantile(0); fastest < toServer+toClient {
		t.Errorf("a reply came back after %v, before the configured %v", fastest, toServer+toClient)
	}
}

func TestDelayJitter(t *testing.T) {
	const delay, jitter = 100 * time.Millisecond, 25 * time.Millisecond
	b := newBed(t, Config{})
	base := b.baseline()
	if err := b.p.SetFaults(ToServer, Faults{Delay: delay, Jitter: jitter}); err != nil {
		t.Fatal(err)
	}
	r := b.stream(streamOpts{n: 1000})
	if r.unique != 1000 {
		t.Fatalf("jitter: %d of 1000", r.unique)
	}
	within(t, "delay ms (median RTT - baseline) with 100ms±25ms", ms(r.median()-base), ms(delay), 0.10)
	lo, p10, p90 := r.quantile(0), r.quantile(0.10), r.quantile(0.90)
	t.Logf("jitter: min %v, p10 %v, p90 %v (uniform over [75ms, 125ms]: 75ms, 80ms, 120ms, plus the baseline)", lo, p10, p90)
	// Load only adds latency, so the low end proves the spread; the floor proves the clamp.
	if lo < delay-jitter || p10 > delay-jitter/2+base || p90 < delay+jitter/2 {
		t.Errorf("jitter spread: min %v p10 %v p90 %v, want min >= %v, p10 <= %v, p90 >= %v",
			lo, p10, p90, delay-jitter, delay-jitter/2+base, delay+jitter/2)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func TestOneWayBlackhole(t *testing.T) {
	const n = 300
	b := newBed(t, Config{ToClient: Faults{Blackhole: true}})
	r := b.stream(streamOpts{n: n})
	tc, _ := b.p.Stats(ToClient)
	if got := b.echoed.Load(); got != n || r.replies != 0 || tc.DroppedBlackhole != n {
		t.Fatalf("to-client blackhole: echo got %d (want %d), client got %d (want 0), %+v", got, n, r.replies, tc)
	}
	// Turn it around: only client→server is cut.
	if err := b.p.SetBlackhole(ToClient, false); err != nil {
		t.Fatal(err)
	}
	if err := b.p.SetBlackhole(ToServer, true); err != nil {
		t.Fatal(err)
	}
	r = b.stream(streamOpts{n: n})
	ts, _ := b.p.Stats(ToServer)
	if got := b.echoed.Load(); got != n || r.replies != 0 || ts.DroppedBlackhole != n {
		t.Fatalf("to-server blackhole: echo got %d more (want 0), client got %d, %+v", got-n, r.replies, ts)
	}
}

func TestMaxDatagram(t *testing.T) {
	const n, limit = 600, 512
	sizes := []int{100, limit, limit + 1, 1400}
	b := newBed(t, Config{ToServer: Faults{MaxDatagram: limit}})
	r := b.stream(streamOpts{n: n, size: func(i int) int { return sizes[i%len(sizes)] }})
	s, _ := b.p.Stats(ToServer)
	if r.sizes[100] != n/4 || r.sizes[limit] != n/4 || r.sizes[limit+1] != 0 || r.sizes[1400] != 0 {
		t.Fatalf("max datagram %d: replies by size %v", limit, r.sizes)
	}
	if s.DroppedOversize != n/2 {
		t.Fatalf("oversize drops %d, want %d", s.DroppedOversize, n/2)
	}
}

// roundTrip sends one datagram and waits (bounded) for its reply.
func (b *bed) roundTrip(req []byte) []byte {
	b.t.Helper()
	if _, err := b.client.Write(req); err != nil {
		b.t.Fatal(err)
	}
	b.client.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer b.client.SetReadDeadline(time.Time{})
	buf := make([]byte, MaxDatagramSize)
	n, err := b.client.Read(buf)
	if err != nil {
		b.t.Fatalf("no reply: %v", err)
	}
	return buf[:n]
}

func TestCorruption(t *testing.T) {
	b := newBed(t, Config{ToServer: Faults{CorruptPct: 100}})
	buf := make([]byte, 300)
	for i := range 200 {
		req := b.datagram(buf, uint64(i), 300)
		want := bytes.Clone(req)
		got := b.roundTrip(req)
		if len(got) != len(want) {
			t.Fatalf("corruption changed the length: %d, want %d", len(got), len(want))
		}
		diff := 0
		for j := range got {
			if got[j] != want[j] {
				diff++
			}
		}
		if diff != 1 {
			t.Fatalf("datagram %d: %d bytes differ, want exactly 1", i, diff)
		}
	}
	if s, _ := b.p.Stats(ToServer); s.Corrupted != 200 {
		t.Fatalf("corrupted counter %d, want 200", s.Corrupted)
	}
	b.p.Reset()
	req := b.datagram(buf, 999, 300)
	if got := b.roundTrip(bytes.Clone(req)); !bytes.Equal(got, req) {
		t.Fatal("after Reset a datagram is still changed")
	}
}

func TestReorder(t *testing.T) {
	const n = 5000
	for _, window := range []int{1, 3} {
		b := newBed(t, Config{ToServer: Faults{ReorderPct: 20, ReorderWindow: window}})
		r := b.stream(streamOpts{n: n})
		s, _ := b.p.Stats(ToServer)
		if r.unique != n || r.replies != n {
			t.Fatalf("window %d: reorder lost or added datagrams: %d unique, %d replies; %+v", window, r.unique, r.replies, b.p.Snapshot())
		}
		if r.outOfOrder == 0 || s.Reordered == 0 {
			t.Fatalf("window %d: no out-of-order arrival (held %d)", window, s.Reordered)
		}
		t.Logf("window %d: %d of %d datagrams held, %d arrived out of order", window, s.Reordered, n, r.outOfOrder)
		within(t, "held datagrams %", 100*float64(s.Reordered)/n, 20, 0.10)
	}
}

func TestReorderTimeoutReleasesLastDatagram(t *testing.T) {
	b := newBed(t, Config{ToServer: Faults{ReorderPct: 100, ReorderTimeout: 20 * time.Millisecond}})
	buf := make([]byte, 64)
	start := time.Now()
	got := b.roundTrip(b.datagram(buf, 7, 64))
	if binary.BigEndian.Uint64(got) != 7 {
		t.Fatalf("wrong reply %x", got[:8])
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("a held datagram came back after %v, before its 20ms timeout", el)
	}
}

func TestResetRestoresCleanForwarding(t *testing.T) {
	b := newBed(t, Config{ToServer: Faults{LossPct: 100}, ToClient: Faults{Delay: 10 * time.Second, CorruptPct: 50}})
	r := b.stream(streamOpts{n: 100})
	if r.replies != 0 {
		t.Fatalf("100%% loss delivered %d", r.replies)
	}
	b.p.Reset()
	r = b.stream(streamOpts{n: 1000})
	if r.unique != 1000 || r.replies != 1000 {
		t.Fatalf("after Reset: %d unique, %d replies of 1000", r.unique, r.replies)
	}
	if m := r.quantile(1); m > time.Second {
		t.Fatalf("after Reset a reply took %v", m)
	}
	var resets int
	for _, c := range b.p.Changes() {
		if c.Source == "go reset" && c.After.IsZero() {
			resets++
		}
	}
	if resets != 2 {
		t.Fatalf("want one reset change per link, got %d in %+v", resets, b.p.Changes())
	}
}

func TestResetReleasesQueuedDatagrams(t *testing.T) {
	b := newBed(t, Config{ToServer: Faults{Delay: time.Minute}})
	buf := make([]byte, 64)
	for i := range 5 {
		b.client.Write(b.datagram(buf, uint64(i), 64))
	}
	waitFor(t, time.Now().Add(5*time.Second), func() bool {
		s, _ := b.p.Stats(ToServer)
		return s.Queued == 5
	}, func() string { return "5 datagrams not queued" })
	b.p.Reset()
	for i := range 5 {
		b.client.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := b.client.Read(buf)
		if err != nil || binary.BigEndian.Uint64(buf[:n]) != uint64(i) {
			t.Fatalf("after Reset datagram %d: %v (seq %d)", i, err, binary.BigEndian.Uint64(buf))
		}
	}
}

func TestDistinctUpstreamAddressPerClient(t *testing.T) {
	b := newBed(t, Config{})
	clients := []*net.UDPConn{b.client, b.dial(), b.dial()}
	buf := make([]byte, 64)
	for round := range 3 {
		for id, c := range clients {
			seq := uint64(100*id + round)
			if _, err := c.Write(b.datagram(buf, seq, 64)); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, err := c.Read(buf)
			if err != nil || binary.BigEndian.Uint64(buf[:n]) != seq {
				t.Fatalf("client %d got %v / seq %d, want its own %d", id, err, binary.BigEndian.Uint64(buf), seq)
			}
		}
	}
	if got := b.p.Sessions(); got != len(clients) {
		t.Fatalf("sessions %d, want %d (one upstream socket per client)", got, len(clients))
	}
}

func TestNewRefusesNonLoopback(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want error
	}{
		{Config{Upstream: "10.1.2.3:5000"}, ErrNotLoopback},
		{Config{Upstream: "[2001:db8::1]:5000"}, ErrNotLoopback},
		{Config{Upstream: "127.0.0.1:5000", Listen: "0.0.0.0:0"}, ErrNotLoopback},
		{Config{Upstream: "127.0.0.1:5000", Listen: ":0"}, ErrNotLoopback},
		{Config{Upstream: ""}, ErrConfig},
		{Config{Upstream: "127.0.0.1:0"}, ErrConfig},
		{Config{Upstream: "127.0.0.1:5000", ToServer: Faults{LossPct: 101}}, ErrInvalidFaults},
	} {
		p, err := New(c.cfg)
		if !errors.Is(err, c.want) {
			if p != nil {
				p.Close()
			}
			t.Errorf("New(%+v) = %v, want %v", c.cfg, err, c.want)
		}
	}
}

func TestSetFaultsValidatesAndLogs(t *testing.T) {
	b := newBed(t, Config{})
	if err := b.p.SetFaults(ToServer, Faults{DuplicatePct: -1}); !errors.Is(err, ErrInvalidFaults) {
		t.Fatalf("negative duplicate: %v", err)
	}
	if err := b.p.SetFaults(Direction(7), Faults{}); !errors.Is(err, ErrUnknownLink) {
		t.Fatalf("unknown link: %v", err)
	}
	if _, err := b.p.Stats(Both); !errors.Is(err, ErrUnknownLink) {
		t.Fatalf("Stats(Both): %v", err)
	}
	f := Faults{Delay: 5 * time.Millisecond, LossPct: 1}
	if err := b.p.SetFaults(Both, f); err != nil {
		t.Fatal(err)
	}
	ch := b.p.Changes()
	// Two "config" changes at New, then one per link.
	if len(ch) != 4 || ch[2].Link != ToServer || ch[3].Link != ToClient || ch[3].After != f || ch[3].Source != "go" || ch[3].Time.IsZero() {
		t.Fatalf("changes %+v", ch)
	}
	if got, _ := b.p.Faults(ToClient); got != f {
		t.Fatalf("Faults(ToClient) = %v", got)
	}
	b.p.Close()
	if err := b.p.SetFaults(ToServer, Faults{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

package faultproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The test bed: an echo server on 127.0.0.1:0, a Proxy in front of it and a client socket
// connected to the proxy. Datagrams carry [seq uint64][sent ns since base uint64][filler], so a
// reply tells which request it answers and when that request left.

const hdrLen = 16

// testSeed is FELIX_TEST_SEED when set, else a fixed seed; every bed logs the seed it uses.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("FELIX_TEST_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FELIX_TEST_SEED=%q: want a uint64", v)
		}
		return s
	}
	return 20260115
}

type bed struct {
	t      *testing.T
	p      *Proxy
	echo   *net.UDPConn
	echoed atomic.Uint64 // datagrams the echo server received (and sent back)
	client *net.UDPConn
	base   time.Time
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

// newBed starts the echo server, the proxy (cfg.Upstream set to the echo server) and one client.
func newBed(t *testing.T, cfg Config) *bed {
	t.Helper()
	echo, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = echo.SetReadBuffer(4 << 20)
	b := &bed{t: t, echo: echo, base: time.Now()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, MaxDatagramSize)
		for {
			n, from, err := echo.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			b.echoed.Add(1)
			_, _ = echo.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() { echo.Close(); <-done })
	cfg.Upstream = echo.LocalAddr().String()
	if cfg.Seed == 0 {
		cfg.Seed = testSeed(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	b.p, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.p.Close() })
	b.client = b.dial()
	return b
}

// dial opens one more client socket to the proxy.
func (b *bed) dial() *net.UDPConn {
	b.t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(b.p.Addr()))
	if err != nil {
		b.t.Fatal(err)
	}
	_ = c.SetReadBuffer(4 << 20)
	b.t.Cleanup(func() { c.Close() })
	return c
}

// datagram builds request seq of size bytes (size >= hdrLen).
func (b *bed) datagram(dst []byte, seq uint64, size int) []byte {
	dst = dst[:size]
	binary.BigEndian.PutUint64(dst, seq)
	binary.BigEndian.PutUint64(dst[8:], uint64(time.Since(b.base)))
	for i := hdrLen; i < size; i++ {
		dst[i] = byte(seq) + byte(i)
	}
	return dst
}

// result is what the client saw of one counted stream.
type result struct {
	sent       int
	replies    int             // datagrams received, duplicates included
	unique     int             // distinct sequence numbers received
	outOfOrder int             // arrivals with a seq below one already received
	rtts       []time.Duration // per reply: arrival - the send time carried in it
	sizes      map[int]int     // reply count by size
	first      time.Time       // first arrival
	last       time.Time       // last arrival
	bytes      int             // reply bytes
}

// median returns the median RTT.
func (r *result) median() time.Duration { return r.quantile(0.5) }

func (r *result) quantile(q float64) time.Duration {
	if len(r.rtts) == 0 {
		return 0
	}
	s := slices.Clone(r.rtts)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

// streamOpts shapes a counted stream.
type streamOpts struct {
	n       int           // datagrams to send
	size    func(int) int // size of datagram i (default 200 bytes)
	window  int           // at most this many unanswered and undropped datagrams at once (default 64)
	timeout time.Duration // bound of the whole run (default 20 s)
}

// mark is the counters at the start of a stream: a stream's checks use the growth since then.
type mark struct {
	ts, tc LinkStats
	echoed uint64
}

func (b *bed) mark() mark {
	s := b.p.Snapshot()
	return mark{ts: s.Links[ToServer].Stats, tc: s.Links[ToClient].Stats, echoed: b.echoed.Load()}
}

// stream sends a counted stream through the proxy and collects the replies until every datagram is
// accounted for (settled) or the deadline passes, which fails the test.
func (b *bed) stream(o streamOpts) *result {
	b.t.Helper()
	if o.size == nil {
		o.size = func(int) int { return 200 }
	}
	if o.window == 0 {
		o.window = 64
	}
	if o.timeout == 0 {
		o.timeout = 20 * time.Second
	}
	deadline := time.Now().Add(o.timeout)
	m := b.mark()
	rec := newRecorder(o.n)
	b.client.SetReadDeadline(deadline)
	go rec.read(b)
	buf := make([]byte, MaxDatagramSize)
	for i := 0; i < o.n; i++ {
		b.waitWindow(m, rec, i, o.window, deadline)
		if _, err := b.client.Write(b.datagram(buf, uint64(i), o.size(i))); err != nil {
			b.t.Fatalf("send %d: %v", i, err)
		}
	}
	b.waitSettled(m, o.n, rec, deadline)
	b.client.SetReadDeadline(time.Now()) // stop the reader
	<-rec.done
	b.client.SetReadDeadline(time.Time{})
	r := rec.result()
	r.sent = o.n
	return r
}

// dropped is the number of datagrams both links dropped since m.
func (b *bed) dropped(m mark) int {
	s := b.p.Snapshot()
	return int(s.Links[ToServer].Stats.Dropped() - m.ts.Dropped() + s.Links[ToClient].Stats.Dropped() - m.tc.Dropped())
}

// waitWindow blocks until fewer than window of the first sent datagrams are neither answered nor
// dropped, re-checking on every reply and every millisecond (drops send no signal).
func (b *bed) waitWindow(m mark, rec *recorder, sent, window int, deadline time.Time) {
	b.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for sent-rec.uniqueCount()-b.dropped(m) >= window {
		if time.Now().After(deadline) {
			b.t.Fatalf("window: %d sent, %d answered, %d dropped at the deadline; %+v", sent, rec.uniqueCount(), b.dropped(m), b.p.Snapshot())
		}
		select {
		case <-rec.signal:
		case <-tick.C:
		}
	}
}

// settled reports whether every datagram of a stream of n is accounted for since m: the proxy read
// all n, nothing is queued, the echo server got what ToServer forwarded and answered each, and the
// client got what ToClient forwarded.
func (b *bed) settled(m mark, n int, got int) bool {
	s := b.p.Snapshot()
	ts, tc := s.Links[ToServer].Stats, s.Links[ToClient].Stats
	echoed := b.echoed.Load() - m.echoed
	return ts.PacketsIn-m.ts.PacketsIn == uint64(n) && ts.Queued == 0 && tc.Queued == 0 &&
		echoed == ts.Forwarded-m.ts.Forwarded && tc.PacketsIn-m.tc.PacketsIn == echoed &&
		uint64(got) == tc.Forwarded-m.tc.Forwarded
}

func (b *bed) waitSettled(m mark, n int, rec *recorder, deadline time.Time) {
	b.t.Helper()
	waitFor(b.t, deadline, func() bool { return b.settled(m, n, rec.replyCount()) },
		func() string {
			return fmt.Sprintf("stream of %d not settled: client got %d, echo got %d; %+v", n, rec.replyCount(), b.echoed.Load()-m.echoed, b.p.Snapshot())
		})
}

// waitFor re-checks cond every millisecond until it holds; past deadline it fails with what().
func waitFor(t *testing.T, deadline time.Time, cond func() bool, what func() string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
		<-tick.C
	}
}

// recorder collects replies on the client socket.
type recorder struct {
	mu     sync.Mutex
	seen   []bool
	r      result
	maxSeq int64
	signal chan struct{}
	done   chan struct{}
}

func newRecorder(n int) *recorder {
	return &recorder{seen: make([]bool, n), maxSeq: -1, signal: make(chan struct{}, 1), done: make(chan struct{}),
		r: result{sizes: map[int]int{}}}
}

// read records replies until the client's read deadline passes.
func (rec *recorder) read(b *bed) {
	defer close(rec.done)
	buf := make([]byte, MaxDatagramSize)
	for {
		n, err := b.client.Read(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		rec.add(buf[:n], time.Now(), time.Since(b.base))
		select {
		case rec.signal <- struct{}{}:
		default:
		}
	}
}

func (rec *recorder) add(d []byte, at time.Time, sinceBase time.Duration) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := &rec.r
	if r.replies == 0 {
		r.first = at
	}
	r.last = at
	r.replies++
	r.bytes += len(d)
	r.sizes[len(d)]++
	if len(d) < hdrLen {
		return
	}
	seq := binary.BigEndian.Uint64(d)
	r.rtts = append(r.rtts, sinceBase-time.Duration(binary.BigEndian.Uint64(d[8:])))
	if seq >= uint64(len(rec.seen)) {
		return
	}
	if int64(seq) < rec.maxSeq {
		r.outOfOrder++
	}
	rec.maxSeq = max(rec.maxSeq, int64(seq))
	if !rec.seen[seq] {
		rec.seen[seq] = true
		r.unique++
	}
}

func (rec *recorder) uniqueCount() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.r.unique
}

func (rec *recorder) replyCount() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.r.replies
}

func (rec *recorder) result() *result {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	r := rec.r
	return &r
}

// within fails unless got is within frac (e.g. 0.10) of want.
func within(t *testing.T, what string, got, want, frac float64) {
	t.Helper()
	if got < want*(1-frac) || got > want*(1+frac) {
		t.Errorf("%s: measured %.4g, configured %.4g: outside ±%.0f%%", what, got, want, frac*100)
	} else {
		t.Logf("%s: measured %.4g, configured %.4g (within ±%.0f%%)", what, got, want, frac*100)
	}
}

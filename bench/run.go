package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"felix/client"
)

// Runner runs shapes against felix-broker processes it starts: one broker per fsync mode,
// started on first use and kept for the Runner's life (Close stops them).
type Runner struct {
	// Binary is the felix-broker executable (BuildBroker).
	Binary string
	// WorkDir holds the brokers' data directories.
	WorkDir string
	// Cores is FELIX_CORE_SHARDS for the brokers (0 = one per CPU).
	Cores int
	// BrokerLog receives the brokers' output (nil = discarded unless a start fails).
	BrokerLog io.Writer
	// Progress, when set, is called with the fraction (0..1) of the current run done.
	Progress func(frac float64)

	mu      sync.Mutex
	brokers map[string]*Broker
	seq     atomic.Int64
}

// Close stops every broker the Runner started and removes their data directories.
func (r *Runner) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, b := range r.brokers {
		b.Stop()
		_ = os.RemoveAll(filepath.Join(r.WorkDir, "broker-"+k))
		delete(r.brokers, k)
	}
}

// Broker returns the broker for fsync mode, starting it on first use.
func (r *Runner) Broker(ctx context.Context, mode string) (*Broker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.brokers[mode]; ok {
		return b, nil
	}
	if r.brokers == nil {
		r.brokers = map[string]*Broker{}
	}
	b, err := StartBroker(ctx, BrokerOptions{Binary: r.Binary, DataDir: filepath.Join(r.WorkDir, "broker-"+mode),
		FsyncMode: mode, Cores: r.Cores, Log: r.BrokerLog})
	if err != nil {
		return nil, err
	}
	r.brokers[mode] = b
	return b, nil
}

// Run runs one shape with settings and returns its Result. Errors: ErrBroker,
// ErrUnaccounted (*AccountingError), ErrTooSmall, or the SDK's error that stopped the run.
func (r *Runner) Run(ctx context.Context, shape Shape, s Settings) (Result, error) {
	s.defaults()
	b, err := r.Broker(ctx, shape.FsyncMode)
	if err != nil {
		return Result{}, err
	}
	res := Result{System: "felix", Shape: shape, Settings: s, Loop: "closed", OfferedRate: s.Rate}
	if s.Rate > 0 {
		res.Loop = "open"
	}
	w := &run{r: r, b: b, res: &res, s: s, name: fmt.Sprintf("bench-%s-%d-%d", shape.Name, os.Getpid(), r.seq.Add(1))}
	switch shape.Kind {
	case KindPubSub:
		err = w.pubsub(ctx)
	case KindDurable:
		err = w.durable(ctx)
	case KindCache, KindCounter:
		err = w.cache(ctx)
	case KindGroup:
		err = w.group(ctx)
	case KindReplay:
		err = w.replay(ctx)
	default:
		err = fmt.Errorf("%w: kind %q", ErrUnknownShape, shape.Kind)
	}
	w.dropObjects()
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", shape.Name, err)
	}
	return res, nil
}

// run is the state of one Runner.Run.
type run struct {
	r    *Runner
	b    *Broker
	res  *Result
	s    Settings
	name string

	stream, cacheName string // created by this run, deleted at its end (disk space)

	mStart, mEnd time.Time     // the measured phase
	cpu0, self0  ProcUsage     // the broker's and this process's usage at mStart
	sampled      chan struct{} // closed once cpu0 is read
}

// window fixes the phases: warm-up from now, then the measured phase.
func (w *run) window() {
	w.mStart = time.Now().Add(w.s.Warmup)
	w.mEnd = w.mStart.Add(w.s.Duration)
	w.sampled = make(chan struct{})
}

func (w *run) measured(t time.Time) bool { return !t.Before(w.mStart) && t.Before(w.mEnd) }

// sampleAtStart and sampleAtEnd read the broker's CPU and RSS around the measured phase.
func (w *run) sampleAtStart(ctx context.Context) {
	defer close(w.sampled)
	sleepUntil(ctx, w.mStart)
	w.cpu0, _ = w.b.Usage()
	w.self0, _ = ReadProcUsage(os.Getpid())
}

func (w *run) sampleAtEnd(ctx context.Context) {
	sleepUntil(ctx, w.mEnd)
	<-w.sampled
	if u, err := w.b.Usage(); err == nil {
		w.res.BrokerCPUCores = (u.CPU - w.cpu0.CPU).Seconds() / w.s.Duration.Seconds()
		w.res.BrokerRSS = u.RSS
	}
	if u, err := ReadProcUsage(os.Getpid()); err == nil {
		w.res.ClientCPUCores = (u.CPU - w.self0.CPU).Seconds() / w.s.Duration.Seconds()
	}
}

// progress reports the elapsed share of warm-up + measured phase until done closes.
func (w *run) progress(done <-chan struct{}) {
	if w.r.Progress == nil {
		return
	}
	start := time.Now()
	total := w.mEnd.Sub(start)
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-done:
			w.r.Progress(1)
			return
		case now := <-t.C:
			f := now.Sub(start).Seconds() / total.Seconds()
			if f > 1 {
				f = 1
			}
			w.r.Progress(f)
		}
	}
}

// sleepUntil waits for t: not at all below 20 µs (the timer's own slack), with
// time.Sleep (no allocation) below 1 ms, else on a timer that ctx can interrupt.
func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	switch {
	case d < 20*time.Microsecond:
		return
	case d < time.Millisecond:
		time.Sleep(d)
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// Pacer hands out intended send times for an open loop: ticket i is due at
// start + i/rate. Workers take tickets in order, wait for the due time if it is ahead,
// and measure latency from it, so a stall delays the tickets behind it and shows in their
// latency (no coordinated omission). Goroutine-safe.
type Pacer struct {
	start    time.Time
	interval float64 // ns per ticket
	next     atomic.Int64
}

// NewPacer returns a pacer at rate tickets/s (rate > 0) from start.
func NewPacer(start time.Time, rate float64) *Pacer {
	return &Pacer{start: start, interval: float64(time.Second) / rate}
}

// Ticket returns the next ticket's index and due time.
func (p *Pacer) Ticket() (int64, time.Time) {
	i := p.next.Add(1) - 1
	return i, p.start.Add(time.Duration(float64(i) * p.interval))
}

// due waits for the next open-loop ticket (or returns now in closed loop) and returns the
// time latency is measured from.
func due(ctx context.Context, p *Pacer) time.Time {
	if p == nil {
		return time.Now()
	}
	_, t := p.Ticket()
	sleepUntil(ctx, t)
	return t
}

func (w *run) pacer(share int) *Pacer {
	if w.s.Rate <= 0 {
		return nil
	}
	return NewPacer(time.Now(), w.s.Rate/float64(share))
}

// dialN dials n clients of one connection each.
func (w *run) dialN(ctx context.Context, n int) ([]*client.Client, func(), error) {
	var cs []*client.Client
	closeAll := func() {
		for _, c := range cs {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		c, err := w.b.Dial(ctx, 1)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cs = append(cs, c)
	}
	return cs, closeAll, nil
}

// createStream creates the run's durable one-shard stream. Pub/sub streams keep at most
// 256 MiB (live subscribers never read behind it); streams read back from the earliest
// offset are unbounded.
func (w *run) createStream(ctx context.Context) error {
	a, err := w.b.Admin()
	if err != nil {
		return err
	}
	info := client.StreamInfo{Tenant: "default", Namespace: "default", Name: w.name, Shards: 1, Durable: true}
	if w.res.Shape.Kind == KindPubSub {
		max := int64(256 << 20)
		info.Retention.MaxSizeBytes = &max
	}
	_, err = a.CreateStream(ctx, info)
	if err == nil {
		w.stream = w.name
	}
	return err
}

// dropObjects deletes the stream or cache the run created, so a long comparison does not
// fill the disk with logs nobody reads again.
func (w *run) dropObjects() {
	if w.stream == "" && w.cacheName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := w.b.Admin()
	if err != nil {
		return
	}
	if w.stream != "" {
		_ = a.DeleteStream(ctx, w.stream)
	}
	if w.cacheName != "" {
		_ = a.DeleteCache(ctx, w.cacheName)
	}
}

// batchDone is one sealed publish batch handed to the checker.
type batchDone struct {
	p     client.Pending
	n     int64
	start time.Time
}

// checker waits for batches in order, counting acknowledged and refused records and
// recording ack latency when ack is set.
type checker struct {
	ch      chan batchDone
	acked   atomic.Int64
	refused atomic.Int64
	lat     *Latency
	w       *run
	ack     bool
	err     error
	done    chan struct{}
}

func newChecker(w *run, ack bool) *checker {
	c := &checker{ch: make(chan batchDone, 32), lat: NewLatency(), w: w, ack: ack, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for bd := range c.ch {
			_, err := bd.p.Batch()
			now := time.Now()
			switch {
			case err == nil:
				c.acked.Add(bd.n)
				if c.ack && w.measured(bd.start) {
					c.lat.Record(now.Sub(bd.start))
				}
			case errors.Is(err, client.ErrRefused):
				c.refused.Add(bd.n)
			default:
				c.refused.Add(bd.n)
				if c.err == nil {
					c.err = err
				}
			}
		}
	}()
	return c
}

// publisher drives one client.Publisher, handing each sealed batch to the checker.
type publisher struct {
	p     *client.Publisher
	ck    *checker
	buf   []byte
	last  client.Pending
	lastC <-chan struct{}
	n     int64
	start time.Time
}

func (p *publisher) publish(ctx context.Context, intended time.Time) error {
	if len(p.buf) >= 8 {
		binary.LittleEndian.PutUint64(p.buf, uint64(intended.UnixNano()))
	}
	pd, err := p.p.Publish(ctx, p.buf)
	if err != nil {
		return err
	}
	if c := pd.Done(); c != p.lastC {
		p.flushBatch()
		p.lastC, p.start = c, intended
	}
	p.last = pd
	p.n++
	return nil
}

func (p *publisher) flushBatch() {
	if p.n > 0 {
		p.ck.ch <- batchDone{p: p.last, n: p.n, start: p.start}
	}
	p.n = 0
}

// subscriber counts one subscription's deliveries.
type subscriber struct {
	delivered, dropped, inWindow atomic.Int64
	lat                          *Latency
	err                          error
}

func (sb *subscriber) read(ctx context.Context, w *run, sub *client.Subscription, stamped bool) {
	for {
		rec, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				sb.err = err
			}
			return
		}
		now := time.Now()
		if rec.Gap > 0 {
			sb.dropped.Add(int64(rec.Gap))
		}
		sb.delivered.Add(1)
		if w.measured(now) {
			sb.inWindow.Add(1)
		}
		if stamped && len(rec.Payload) >= 8 {
			t := time.Unix(0, int64(binary.LittleEndian.Uint64(rec.Payload)))
			if w.measured(t) {
				sb.lat.Record(now.Sub(t))
			}
		}
	}
}

// readBack subscribes from the earliest offset and counts records until want arrived
// (or limit passed); it returns the records and the gaps seen.
func readBack(ctx context.Context, c *client.Client, stream string, want int64, limit time.Duration) (int64, int64, error) {
	if want == 0 {
		return 0, 0, nil
	}
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	sub, err := c.Subscribe(rctx, stream, client.Earliest, client.SubscribeOptions{})
	if err != nil {
		return 0, 0, err
	}
	defer sub.Close()
	var got, gaps int64
	for got+gaps < want {
		rec, err := sub.Next(rctx)
		if err != nil {
			if rctx.Err() != nil {
				return got, gaps, nil // counted as short; Account reports it
			}
			return got, gaps, err
		}
		got++
		gaps += int64(rec.Gap)
	}
	return got, gaps, nil
}

// forEachParallel runs fn(worker, i) for i in [0, n) on `workers` goroutines.
func forEachParallel(ctx context.Context, workers, n int, fn func(worker, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for k := 0; k < workers; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(k, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}(k)
	}
	wg.Wait()
	return first
}

// preload publishes n records of size bytes in batches of 64 and returns once all are acked.
func (w *run) preload(ctx context.Context, c *client.Client, n, size int) error {
	p, err := c.NewPublisher(w.name, client.PublisherOptions{MaxRecords: 64, MaxInflightBytes: 16 << 20})
	if err != nil {
		return err
	}
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if _, err := p.Publish(ctx, buf); err != nil {
			return err
		}
	}
	return p.Close(ctx)
}

func (w *run) preloadCount() int {
	n := w.res.Shape.Preload / w.s.Scale
	if n < 64 {
		n = 64
	}
	return n
}

// replay: preload, then one subscriber reads everything from the earliest offset.
func (w *run) replay(ctx context.Context) error {
	sh := w.res.Shape
	if err := w.createStream(ctx); err != nil {
		return err
	}
	cs, closeAll, err := w.dialN(ctx, 1)
	if err != nil {
		return err
	}
	defer closeAll()
	n := w.preloadCount()
	if err := w.preload(ctx, cs[0], n, sh.Payload); err != nil {
		return err
	}
	cpu0, _ := w.b.Usage()
	self0, _ := ReadProcUsage(os.Getpid())
	start := time.Now()
	got, gaps, err := readBack(ctx, cs[0], w.name, int64(n), w.s.Duration*4+w.s.Drain)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	w.usageSince(cpu0, self0, elapsed)
	w.res.Sent, w.res.Delivered, w.res.Dropped = int64(n), got, gaps
	if err := Account(sh.Name, "replay subscriber", int64(n), got, gaps); err != nil {
		return err
	}
	w.res.LatencyFrom = "not measured (throughput of a catch-up read)"
	w.res.Elapsed = elapsed
	return w.res.finish(got, got*int64(sh.Payload))
}

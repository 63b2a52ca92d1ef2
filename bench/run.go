package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
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

	mStart, mEnd time.Time // the measured phase
	cpu0         ProcUsage
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
}

func (w *run) sampleAtEnd(ctx context.Context) {
	sleepUntil(ctx, w.mEnd)
	<-w.sampled
	if u, err := w.b.Usage(); err == nil {
		w.res.BrokerCPUCores = (u.CPU - w.cpu0.CPU).Seconds() / w.s.Duration.Seconds()
		w.res.BrokerRSS = u.RSS
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

// pubsub: Publishers publishers in batches of Batch, Fanout subscribers, durable stream.
func (w *run) pubsub(ctx context.Context) error {
	sh := w.res.Shape
	if err := w.createStream(ctx); err != nil {
		return err
	}
	subClients, closeSubs, err := w.dialN(ctx, sh.Fanout)
	if err != nil {
		return err
	}
	defer closeSubs()
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	subs := make([]*subscriber, sh.Fanout)
	windowSet := make(chan struct{})
	var subWG sync.WaitGroup
	for i, c := range subClients {
		sub, err := c.Subscribe(ctx, w.name, client.Latest, client.SubscribeOptions{})
		if err != nil {
			return err
		}
		defer sub.Close()
		subs[i] = &subscriber{lat: NewLatency()}
		subWG.Add(1)
		go func(sb *subscriber) {
			defer subWG.Done()
			select { // the phases are fixed before the first record is published
			case <-windowSet:
			case <-subCtx.Done():
				return
			}
			sb.read(subCtx, w, sub, true)
		}(subs[i])
	}
	pubClients, closePubs, err := w.dialN(ctx, sh.Publishers)
	if err != nil {
		return err
	}
	defer closePubs()
	stamped := sh.Payload >= 8
	ck := newChecker(w, !stamped)
	opts := client.PublisherOptions{MaxRecords: sh.Batch, Linger: time.Millisecond} // SDK default in-flight budget (4 MiB)
	// Batch 1 is the latency shape: a synchronous publisher (each record acked before the
	// next is sent), as the peers' synchronous publish it is compared with.
	syncPub := sh.Batch <= 1
	if syncPub {
		opts.Linger, opts.Ack, opts.MaxRecords = -1, client.AckPerMessage, 1
	}
	w.window()
	close(windowSet)
	pace := w.pacer(1)
	done := make(chan struct{})
	go w.progress(done)
	go w.sampleAtStart(ctx)
	var pubWG sync.WaitGroup
	pubs := make([]*publisher, sh.Publishers)
	errs := make([]error, sh.Publishers)
	for i, c := range pubClients {
		p, err := c.NewPublisher(w.name, opts)
		if err != nil {
			return err
		}
		pubs[i] = &publisher{p: p, ck: ck, buf: make([]byte, sh.Payload)}
		pubWG.Add(1)
		go func(i int, pb *publisher) {
			defer pubWG.Done()
			for {
				t := due(ctx, pace)
				if !t.Before(w.mEnd) || ctx.Err() != nil {
					return
				}
				if err := pb.publish(ctx, t); err != nil {
					errs[i] = err
					return
				}
				if syncPub { // one record in flight: wait for its ack before the next
					select {
					case <-pb.last.Done():
					case <-ctx.Done():
						return
					}
				}
			}
		}(i, pubs[i])
	}
	w.sampleAtEnd(ctx)
	pubWG.Wait()
	for _, p := range pubs {
		p.flushBatch()
		if err := p.p.Flush(ctx); err != nil && !errors.Is(err, client.ErrRefused) {
			return err
		}
	}
	// Every batch has its outcome before the books are compared.
	close(ck.ch)
	<-ck.done
	sent := ck.acked.Load()
	// Tail probes: a drop is only visible as a gap before a later record, so once
	// deliveries have had a second to arrive, keep publishing single records (counted as
	// sent) until every subscriber has accounted for every acknowledged record.
	deadline := time.Now().Add(w.s.Drain)
	probe := make([]byte, sh.Payload)
	for {
		all := true
		for _, sb := range subs {
			if sb.delivered.Load()+sb.dropped.Load() < sent {
				all = false
			}
		}
		if all || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if sent > 0 && time.Since(w.mEnd) > time.Second {
			if _, err := pubs[0].p.PublishSync(ctx, probe); err == nil {
				sent++
			} else if !errors.Is(err, client.ErrRefused) {
				return err
			}
		}
	}
	close(done)
	for _, p := range pubs {
		_ = p.p.Close(ctx)
	}
	stopSubs()
	subWG.Wait()
	for _, e := range errs {
		if e != nil && ctx.Err() == nil {
			return e
		}
	}
	if ck.err != nil {
		return ck.err
	}
	w.res.Sent, w.res.Refused = sent, ck.refused.Load()
	lat := NewLatency()
	var inWindow int64
	for i, sb := range subs {
		if sb.err != nil {
			return fmt.Errorf("subscriber %d: %w", i, sb.err)
		}
		if err := Account(sh.Name, "subscriber "+strconv.Itoa(i), sent, sb.delivered.Load(), sb.dropped.Load()); err != nil {
			return err
		}
		w.res.Delivered += sb.delivered.Load()
		w.res.Dropped += sb.dropped.Load()
		inWindow += sb.inWindow.Load()
		lat.Merge(sb.lat)
	}
	if stamped {
		w.res.LatencyFrom = "intended send time → delivery at the subscriber"
	} else {
		lat = ck.lat
		w.res.LatencyFrom = "send of the batch's first record → batch ack"
	}
	w.res.Latency = lat.Summary()
	w.res.Elapsed = w.s.Duration
	return w.res.finish(inWindow, inWindow*int64(sh.Payload))
}

// durable: Publishers synchronous publishers, per-message ack; afterwards every
// acknowledged record is read back from the earliest offset.
func (w *run) durable(ctx context.Context) error {
	sh := w.res.Shape
	if err := w.createStream(ctx); err != nil {
		return err
	}
	cs, closeAll, err := w.dialN(ctx, (sh.Publishers+3)/4)
	if err != nil {
		return err
	}
	defer closeAll()
	w.window()
	pace := w.pacer(1)
	done := make(chan struct{})
	go w.progress(done)
	go w.sampleAtStart(ctx)
	var wg sync.WaitGroup
	var acked, refused, inWindow atomic.Int64
	lats := make([]*Latency, sh.Publishers)
	errs := make([]error, sh.Publishers)
	for i := 0; i < sh.Publishers; i++ {
		p, err := cs[i%len(cs)].NewPublisher(w.name, client.PublisherOptions{Linger: -1, MaxRecords: 1, Ack: client.AckPerMessage})
		if err != nil {
			return err
		}
		defer p.Close(ctx)
		lats[i] = NewLatency()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			buf := make([]byte, sh.Payload)
			for {
				t := due(ctx, pace)
				if !t.Before(w.mEnd) || ctx.Err() != nil {
					return
				}
				_, err := p.PublishSync(ctx, buf)
				now := time.Now()
				switch {
				case err == nil:
					acked.Add(1)
					if w.measured(t) {
						lats[i].Record(now.Sub(t))
					}
					if w.measured(now) {
						inWindow.Add(1)
					}
				case errors.Is(err, client.ErrRefused):
					refused.Add(1)
				default:
					errs[i] = err
					return
				}
			}
		}(i)
	}
	w.sampleAtEnd(ctx)
	wg.Wait()
	close(done)
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	sent := acked.Load()
	w.res.Sent, w.res.Refused = sent, refused.Load()
	got, gaps, err := readBack(ctx, cs[0], w.name, sent, w.s.Drain)
	if err != nil {
		return err
	}
	if err := Account(sh.Name, "read-back from earliest", sent, got, gaps); err != nil {
		return err
	}
	w.res.Delivered = got
	lat := NewLatency()
	for _, l := range lats {
		lat.Merge(l)
	}
	w.res.Latency = lat.Summary()
	w.res.LatencyFrom = "intended send time → ack (fsync " + sh.FsyncMode + ")"
	w.res.Elapsed = w.s.Duration
	n := inWindow.Load()
	return w.res.finish(n, n*int64(sh.Payload))
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

// cache: Clients connections × InFlight workers of gets and puts (or counter adds).
func (w *run) cache(ctx context.Context) error {
	sh := w.res.Shape
	a, err := w.b.Admin()
	if err != nil {
		return err
	}
	if _, err := a.CreateCache(ctx, client.CacheInfo{Tenant: "default", Namespace: "default", Name: w.name, Shards: 2}); err != nil {
		return err
	}
	w.cacheName = w.name
	cs, closeAll, err := w.dialN(ctx, sh.Clients)
	if err != nil {
		return err
	}
	defer closeAll()
	nkeys := sh.Keys / w.s.Scale
	if nkeys < 1 {
		nkeys = 1
	}
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	value := make([]byte, sh.Payload)
	counter := sh.Kind == KindCounter
	if !counter { // every key exists before the first get
		if err := forEachParallel(ctx, len(cs), len(keys), func(wk, i int) error {
			return cs[wk].Put(ctx, w.name, keys[i], value, 0)
		}); err != nil {
			return err
		}
	}
	workers := sh.Clients * sh.InFlight
	w.window()
	pace := w.pacer(1)
	done := make(chan struct{})
	go w.progress(done)
	go w.sampleAtStart(ctx)
	var wg sync.WaitGroup
	var ops, refused, inWindow atomic.Int64
	lats := make([]*Latency, workers)
	errs := make([]error, workers)
	for i := 0; i < workers; i++ {
		lats[i] = NewLatency()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := cs[i%len(cs)]
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				t := due(ctx, pace)
				if !t.Before(w.mEnd) || ctx.Err() != nil {
					return
				}
				key := keys[rng.IntN(len(keys))]
				var err error
				switch {
				case counter:
					_, err = c.CounterAdd(ctx, w.name, key, 1)
				case rng.Float64() < sh.GetRatio:
					_, _, err = c.Get(ctx, w.name, key)
				default:
					err = c.Put(ctx, w.name, key, value, 0)
				}
				now := time.Now()
				switch {
				case err == nil:
					ops.Add(1)
					if w.measured(t) {
						lats[i].Record(now.Sub(t))
					}
					if w.measured(now) {
						inWindow.Add(1)
					}
				case errors.Is(err, client.ErrRefused):
					refused.Add(1)
				default:
					errs[i] = err
					return
				}
			}
		}(i)
	}
	w.sampleAtEnd(ctx)
	wg.Wait()
	close(done)
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	w.res.Sent, w.res.Refused = ops.Load(), refused.Load()
	w.res.Delivered = w.res.Sent
	if counter { // every acknowledged add is in the sums
		var sum atomic.Int64
		if err := forEachParallel(ctx, len(cs), len(keys), func(wk, i int) error {
			v, err := cs[wk].CounterGet(ctx, w.name, keys[i])
			sum.Add(v)
			return err
		}); err != nil {
			return err
		}
		if err := Account(sh.Name, "counter sums", w.res.Sent, sum.Load(), 0); err != nil {
			return err
		}
		w.res.Delivered = sum.Load()
	}
	lat := NewLatency()
	for _, l := range lats {
		lat.Merge(l)
	}
	w.res.Latency = lat.Summary()
	w.res.LatencyFrom = "intended send time → answer"
	w.res.Elapsed = w.s.Duration
	n := inWindow.Load()
	return w.res.finish(n, n*int64(sh.Payload))
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

// group: preload, then Clients consumers poll up to Batch records and ack them until
// every record was acked once.
func (w *run) group(ctx context.Context) error {
	sh := w.res.Shape
	if err := w.createStream(ctx); err != nil {
		return err
	}
	cs, closeAll, err := w.dialN(ctx, sh.Clients)
	if err != nil {
		return err
	}
	defer closeAll()
	n := w.preloadCount()
	if err := w.preload(ctx, cs[0], n, sh.Payload); err != nil {
		return err
	}
	cpu0, _ := w.b.Usage()
	var mu sync.Mutex
	seen := make([]bool, n)
	var unique, deliveries atomic.Int64
	lats := make([]*Latency, len(cs))
	errs := make([]error, len(cs))
	gctx, cancel := context.WithTimeout(ctx, w.s.Duration*4+w.s.Drain)
	defer cancel()
	start := time.Now()
	w.mStart, w.mEnd = start, start.Add(24*time.Hour)
	var wg sync.WaitGroup
	for i, c := range cs {
		lats[i] = NewLatency()
		wg.Add(1)
		go func(i int, c *client.Client) {
			defer wg.Done()
			offs := make([]uint64, 0, sh.Batch)
			for unique.Load() < int64(n) {
				t := time.Now()
				recs, err := c.Poll(gctx, w.name, 0, "bench", sh.Batch, 50*time.Millisecond)
				if err != nil {
					if gctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				if len(recs) == 0 {
					continue
				}
				offs = offs[:0]
				for _, r := range recs {
					offs = append(offs, r.Offset)
				}
				if err := c.Ack(gctx, w.name, 0, "bench", offs...); err != nil {
					if gctx.Err() == nil {
						errs[i] = err
					}
					return
				}
				lats[i].Record(time.Since(t))
				deliveries.Add(int64(len(recs)))
				mu.Lock()
				for _, o := range offs {
					if o < uint64(n) && !seen[o] {
						seen[o] = true
						unique.Add(1)
					}
				}
				mu.Unlock()
			}
		}(i, c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	if u, err := w.b.Usage(); err == nil {
		w.res.BrokerCPUCores = (u.CPU - cpu0.CPU).Seconds() / elapsed.Seconds()
		w.res.BrokerRSS = u.RSS
	}
	w.res.Sent, w.res.Delivered = int64(n), unique.Load()
	if err := Account(sh.Name, "group acks", int64(n), unique.Load(), 0); err != nil {
		return err
	}
	if d := deliveries.Load() - unique.Load(); d > 0 {
		w.res.Warnings = append(w.res.Warnings, fmt.Sprintf("%d redeliveries (lease expiry)", d))
	}
	lat := NewLatency()
	for _, l := range lats {
		lat.Merge(l)
	}
	w.res.Latency = lat.Summary()
	w.res.LatencyFrom = "poll + ack round trip (no warm-up: the preload is consumed once)"
	w.res.Elapsed = elapsed
	return w.res.finish(int64(n), int64(n)*int64(sh.Payload))
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
	start := time.Now()
	got, gaps, err := readBack(ctx, cs[0], w.name, int64(n), w.s.Duration*4+w.s.Drain)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if u, err := w.b.Usage(); err == nil {
		w.res.BrokerCPUCores = (u.CPU - cpu0.CPU).Seconds() / elapsed.Seconds()
		w.res.BrokerRSS = u.RSS
	}
	w.res.Sent, w.res.Delivered, w.res.Dropped = int64(n), got, gaps
	if err := Account(sh.Name, "replay subscriber", int64(n), got, gaps); err != nil {
		return err
	}
	w.res.LatencyFrom = "not measured (throughput of a catch-up read)"
	w.res.Elapsed = elapsed
	return w.res.finish(got, got*int64(sh.Payload))
}

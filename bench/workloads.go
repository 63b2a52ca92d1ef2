package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"felix/client"
)

// opStats counts the outcomes of a worker loop's operations.
type opStats struct{ ok, refused, inWindow atomic.Int64 }

// opLoop runs op at each due time (open loop) or back to back (closed loop) until the
// measured phase ends. Successes are counted, their latency from the intended time
// recorded when it falls in the measured phase; refusals (overloaded) are counted; any
// other error ends the loop and is returned.
func (w *run) opLoop(ctx context.Context, pace *Pacer, lat *Latency, st *opStats, op func() error) error {
	for {
		t := due(ctx, pace)
		if !t.Before(w.mEnd) || ctx.Err() != nil {
			return nil
		}
		err := op()
		now := time.Now()
		switch {
		case err == nil:
			st.ok.Add(1)
			if w.measured(t) {
				lat.Record(now.Sub(t))
			}
			if w.measured(now) {
				st.inWindow.Add(1)
			}
		case errors.Is(err, client.ErrRefused):
			st.refused.Add(1)
		default:
			return err
		}
	}
}

// runWorkers runs fn(i) for i in [0, n) concurrently and returns the first error.
func runWorkers(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); errs[i] = fn(i) }(i)
	}
	wg.Wait()
	return errors.Join(errs...)
}

// measuredPhase fixes the phases, starts the progress reporter and the CPU samples, runs
// the workers, and returns their first error; the broker's CPU and RSS are in w.res.
func (w *run) measuredPhase(ctx context.Context, workers int, fn func(i int, pace *Pacer) error) error {
	w.window()
	pace := w.pacer(1)
	done := make(chan struct{})
	defer close(done)
	go w.progress(done)
	go w.sampleAtStart(ctx)
	errc := make(chan error, 1)
	go func() { errc <- runWorkers(workers, func(i int) error { return fn(i, pace) }) }()
	w.sampleAtEnd(ctx)
	return <-errc
}

func mergeAll(ls []*Latency) *Latency {
	out := NewLatency()
	for _, l := range ls {
		out.Merge(l)
	}
	return out
}

func newLatencies(n int) []*Latency {
	ls := make([]*Latency, n)
	for i := range ls {
		ls[i] = NewLatency()
	}
	return ls
}

// pubsub: Publishers publishers in batches of Batch, Fanout subscribers, durable stream.
func (w *run) pubsub(ctx context.Context) error {
	sh := w.res.Shape
	if err := w.createStream(ctx); err != nil {
		return err
	}
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	windowSet := make(chan struct{})
	subs, subWG, closeSubs, err := w.startSubscribers(ctx, subCtx, windowSet)
	if err != nil {
		return err
	}
	defer closeSubs()
	pubClients, closePubs, err := w.dialN(ctx, sh.Publishers)
	if err != nil {
		return err
	}
	defer closePubs()
	ck := newChecker(w, sh.Payload < 8)
	pubs, err := w.newPublishers(pubClients, ck)
	if err != nil {
		return err
	}
	syncPub := sh.Batch <= 1
	err = w.measuredPhase(ctx, len(pubs), func(i int, pace *Pacer) error {
		if i == 0 {
			close(windowSet) // the phases are fixed: subscribers may read them
		}
		return pubs[i].loop(ctx, w, pace, syncPub)
	})
	for _, p := range pubs {
		p.flushBatch()
		if ferr := p.p.Flush(ctx); ferr != nil && !errors.Is(ferr, client.ErrRefused) && err == nil {
			err = ferr
		}
	}
	close(ck.ch) // every batch has its outcome before the books are compared
	<-ck.done
	if err == nil {
		err = ck.err
	}
	if err != nil {
		return err
	}
	sent, err := w.drainTail(ctx, subs, pubs[0], ck.acked.Load())
	for _, p := range pubs {
		_ = p.p.Close(ctx)
	}
	stopSubs()
	subWG.Wait()
	if err != nil {
		return err
	}
	return w.accountPubSub(subs, ck, sent)
}

// startSubscribers subscribes Fanout clients from the live tail; their readers wait for
// windowSet before reading (the phases are fixed before the first record is published).
func (w *run) startSubscribers(ctx, subCtx context.Context, windowSet <-chan struct{}) ([]*subscriber, *sync.WaitGroup, func(), error) {
	cs, closeAll, err := w.dialN(ctx, w.res.Shape.Fanout)
	if err != nil {
		return nil, nil, nil, err
	}
	subs := make([]*subscriber, len(cs))
	var wg sync.WaitGroup
	var opened []*client.Subscription
	cleanup := func() {
		for _, s := range opened {
			s.Close()
		}
		closeAll()
	}
	for i, c := range cs {
		sub, err := c.Subscribe(ctx, w.name, client.Latest, client.SubscribeOptions{})
		if err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		opened = append(opened, sub)
		subs[i] = &subscriber{lat: NewLatency()}
		wg.Add(1)
		go func(sb *subscriber) {
			defer wg.Done()
			select {
			case <-windowSet:
			case <-subCtx.Done():
				return
			}
			sb.read(subCtx, w, sub, true)
		}(subs[i])
	}
	return subs, &wg, cleanup, nil
}

// newPublishers makes one SDK Publisher per client. Batch 1 is the latency shape: a
// synchronous publisher (each record acked before the next is sent), as the peers'
// synchronous publish it is compared with; otherwise batches of Batch with 1 ms linger
// and the SDK's default in-flight budget (4 MiB).
func (w *run) newPublishers(cs []*client.Client, ck *checker) ([]*publisher, error) {
	sh := w.res.Shape
	opts := client.PublisherOptions{MaxRecords: sh.Batch, Linger: time.Millisecond}
	if sh.Batch <= 1 {
		opts.Linger, opts.Ack, opts.MaxRecords = -1, client.AckPerMessage, 1
	}
	pubs := make([]*publisher, len(cs))
	for i, c := range cs {
		p, err := c.NewPublisher(w.name, opts)
		if err != nil {
			return nil, err
		}
		pubs[i] = &publisher{p: p, ck: ck, buf: make([]byte, sh.Payload)}
	}
	return pubs, nil
}

// loop publishes until the measured phase ends.
func (p *publisher) loop(ctx context.Context, w *run, pace *Pacer, syncPub bool) error {
	for {
		t := due(ctx, pace)
		if !t.Before(w.mEnd) || ctx.Err() != nil {
			return nil
		}
		if err := p.publish(ctx, t); err != nil {
			return err
		}
		if syncPub { // one record in flight: wait for its ack before the next
			select {
			case <-p.last.Done():
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// drainTail waits until every subscriber has accounted for every acknowledged record. A
// drop is only visible as a gap before a later record, so once deliveries have had a
// second to arrive it keeps publishing single probe records (counted as sent). It returns
// the final sent count.
func (w *run) drainTail(ctx context.Context, subs []*subscriber, p *publisher, sent int64) (int64, error) {
	deadline := time.Now().Add(w.s.Drain)
	probe := make([]byte, w.res.Shape.Payload)
	for {
		all := true
		for _, sb := range subs {
			if sb.delivered.Load()+sb.dropped.Load() < sent {
				all = false
			}
		}
		if all || time.Now().After(deadline) {
			return sent, nil
		}
		time.Sleep(50 * time.Millisecond)
		if sent > 0 && time.Since(w.mEnd) > time.Second {
			if _, err := p.p.PublishSync(ctx, probe); err == nil {
				sent++
			} else if !errors.Is(err, client.ErrRefused) {
				return sent, err
			}
		}
	}
}

// accountPubSub checks every subscriber's books and fills the result.
func (w *run) accountPubSub(subs []*subscriber, ck *checker, sent int64) error {
	sh := w.res.Shape
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
	w.res.LatencyFrom = "intended send time → delivery at the subscriber"
	if sh.Payload < 8 {
		lat = ck.lat
		w.res.LatencyFrom = "send of the batch's first record → batch ack"
	}
	w.res.Latency = lat.Summary()
	w.res.Elapsed = w.s.Duration
	return w.res.finish(inWindow, inWindow*int64(sh.Payload))
}

// durable: Publishers synchronous publishers, per-message ack (or, with InFlight > 1,
// InFlight workers per batching publisher, each waiting for its record's batch ack);
// afterwards every acknowledged record is read back from the earliest offset.
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
	opts := client.PublisherOptions{Linger: -1, MaxRecords: 1, Ack: client.AckPerMessage}
	inFlight := max(sh.InFlight, 1)
	if inFlight > 1 { // batching publishers: InFlight records outstanding, batches of Batch
		opts = client.PublisherOptions{Linger: time.Millisecond, MaxRecords: sh.Batch}
	}
	pubs := make([]*client.Publisher, sh.Publishers)
	for i := range pubs {
		if pubs[i], err = cs[i%len(cs)].NewPublisher(w.name, opts); err != nil {
			return err
		}
		defer pubs[i].Close(ctx)
	}
	var st opStats
	workers := sh.Publishers * inFlight
	lats := newLatencies(workers)
	if err := w.measuredPhase(ctx, workers, func(i int, pace *Pacer) error {
		buf, p := make([]byte, sh.Payload), pubs[i/inFlight]
		return w.opLoop(ctx, pace, lats[i], &st, func() error {
			if inFlight == 1 {
				_, err := p.PublishSync(ctx, buf)
				return err
			}
			return publishAwait(ctx, p, buf)
		})
	}); err != nil {
		return err
	}
	sent := st.ok.Load()
	w.res.Sent, w.res.Refused = sent, st.refused.Load()
	got, gaps, err := readBack(ctx, cs[0], w.name, sent, w.s.Drain)
	if err != nil {
		return err
	}
	if err := Account(sh.Name, "read-back from earliest", sent, got, gaps); err != nil {
		return err
	}
	w.res.Delivered = got
	w.res.Latency = mergeAll(lats).Summary()
	w.res.LatencyFrom = "intended send time → ack (fsync " + sh.FsyncMode + ")"
	w.res.Elapsed = w.s.Duration
	n := st.inWindow.Load()
	return w.res.finish(n, n*int64(sh.Payload))
}

// publishAwait publishes buf on a batching publisher and waits for its batch's outcome.
func publishAwait(ctx context.Context, p *client.Publisher, buf []byte) error {
	pd, err := p.Publish(ctx, buf)
	if err != nil {
		return err
	}
	select {
	case <-pd.Done():
		_, err = pd.Batch()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
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
	keys := w.cacheKeys()
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
	var st opStats
	lats := newLatencies(workers)
	if err := w.measuredPhase(ctx, workers, func(i int, pace *Pacer) error {
		c := cs[i%len(cs)]
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		return w.opLoop(ctx, pace, lats[i], &st, func() error {
			key := keys[rng.IntN(len(keys))]
			switch {
			case counter:
				_, err := c.CounterAdd(ctx, w.name, key, 1)
				return err
			case rng.Float64() < sh.GetRatio:
				_, _, err := c.Get(ctx, w.name, key)
				return err
			default:
				return c.Put(ctx, w.name, key, value, 0)
			}
		})
	}); err != nil {
		return err
	}
	w.res.Sent, w.res.Refused = st.ok.Load(), st.refused.Load()
	w.res.Delivered = w.res.Sent
	if counter {
		if err := w.checkCounters(ctx, cs, keys); err != nil {
			return err
		}
	}
	w.res.Latency = mergeAll(lats).Summary()
	w.res.LatencyFrom = "intended send time → answer"
	w.res.Elapsed = w.s.Duration
	n := st.inWindow.Load()
	return w.res.finish(n, n*int64(sh.Payload))
}

// cacheKeys returns the key space (Keys ÷ Scale keys, at least 1).
func (w *run) cacheKeys() []string {
	n := w.res.Shape.Keys / w.s.Scale
	if n < 1 {
		n = 1
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	return keys
}

// checkCounters verifies that the counters' sums equal the acknowledged adds.
func (w *run) checkCounters(ctx context.Context, cs []*client.Client, keys []string) error {
	var sum atomic.Int64
	if err := forEachParallel(ctx, len(cs), len(keys), func(wk, i int) error {
		v, _, err := cs[wk].CounterGet(ctx, w.name, keys[i]) // an absent counter adds 0
		sum.Add(v)
		return err
	}); err != nil {
		return err
	}
	w.res.Delivered = sum.Load()
	return Account(w.res.Shape.Name, "counter sums", w.res.Sent, sum.Load(), 0)
}

// groupState is what the consumers of a group run share.
type groupState struct {
	mu                 sync.Mutex
	seen               []bool
	unique, deliveries atomic.Int64
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
	self0, _ := ReadProcUsage(os.Getpid())
	gs := &groupState{seen: make([]bool, n)}
	lats := newLatencies(len(cs))
	gctx, cancel := context.WithTimeout(ctx, w.s.Duration*4+w.s.Drain)
	defer cancel()
	start := time.Now()
	if err := runWorkers(len(cs), func(i int) error { return w.consume(gctx, cs[i], gs, n, lats[i]) }); err != nil {
		return err
	}
	elapsed := time.Since(start)
	w.usageSince(cpu0, self0, elapsed)
	w.res.Sent, w.res.Delivered = int64(n), gs.unique.Load()
	if err := Account(sh.Name, "group acks", int64(n), gs.unique.Load(), 0); err != nil {
		return err
	}
	if d := gs.deliveries.Load() - gs.unique.Load(); d > 0 {
		w.res.Warnings = append(w.res.Warnings, fmt.Sprintf("%d redeliveries (lease expiry)", d))
	}
	w.res.Latency = mergeAll(lats).Summary()
	w.res.LatencyFrom = "poll + ack round trip (no warm-up: the preload is consumed once)"
	w.res.Elapsed = elapsed
	return w.res.finish(int64(n), int64(n)*int64(sh.Payload))
}

// consume is one group consumer: poll, ack, until every one of n records was acked.
func (w *run) consume(ctx context.Context, c *client.Client, gs *groupState, n int, lat *Latency) error {
	offs := make([]uint64, 0, w.res.Shape.Batch)
	for gs.unique.Load() < int64(n) {
		t := time.Now()
		recs, err := c.Poll(ctx, w.name, 0, "bench", w.res.Shape.Batch, 50*time.Millisecond)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			continue
		}
		offs = offs[:0]
		for _, r := range recs {
			offs = append(offs, r.Offset)
		}
		if err := c.Ack(ctx, w.name, 0, "bench", offs...); err != nil {
			return err
		}
		lat.Record(time.Since(t))
		gs.deliveries.Add(int64(len(recs)))
		gs.mu.Lock()
		for _, o := range offs {
			if o < uint64(n) && !gs.seen[o] {
				gs.seen[o] = true
				gs.unique.Add(1)
			}
		}
		gs.mu.Unlock()
	}
	return nil
}

// usageSince fills the broker's CPU (cores) and RSS over elapsed since cpu0, and this
// process's CPU since self0.
func (w *run) usageSince(cpu0, self0 ProcUsage, elapsed time.Duration) {
	if elapsed <= 0 {
		return
	}
	if u, err := w.b.Usage(); err == nil {
		w.res.BrokerCPUCores = (u.CPU - cpu0.CPU).Seconds() / elapsed.Seconds()
		w.res.BrokerRSS = u.RSS
	}
	if u, err := ReadProcUsage(os.Getpid()); err == nil {
		w.res.ClientCPUCores = (u.CPU - self0.CPU).Seconds() / elapsed.Seconds()
	}
}

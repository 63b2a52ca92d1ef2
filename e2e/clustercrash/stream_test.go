package clustercrash

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"felix/client"
	"felix/testbed/clusterbed"
	"felix/testbed/corpus"
)

// outcome is what a publisher learned of one file's record.
type outcome uint8

const (
	outPending       outcome = iota
	outAcked                 // acknowledged: must be in the log exactly once
	outIndeterminate         // no answer after the SDK's idempotent re-sends: at most once
	outRefused               // every attempt refused: never stored
	outSkipped               // changed or vanished before it was read: never published
)

// pubResult is one file's publish: its outcome and, when acked, where it was stored.
type pubResult struct {
	outcome    outcome
	shard      uint32
	lastOffset uint64
	hasShard   bool
	history    []string // each earlier attempt's error, for a failure's message
}

// progress counts files answered, for the fault schedule.
type progress struct{ done atomic.Int64 }

// publishAll publishes every file through three idempotent Publishers, file i through
// broker i%3 (a client that fails over to the other two), keyed by path, offsets and the
// shard asked for. A refused record (nothing stored) is published again as a new record, up
// to 5 times; an indeterminate one is only ever re-sent by the SDK with its original id.
func publishAll(ctx context.Context, bed *clusterbed.Bed, c *corpus.Corpus, pr *progress) ([]pubResult, error) {
	results := make([]pubResult, len(c.Files))
	var wg sync.WaitGroup
	errs := make([]error, len(bed.Brokers))
	for w := range bed.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = publishShare(ctx, bed, c, w, results, pr)
		}()
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

// dialFailover dials broker w with the other brokers as its failover list.
func dialFailover(ctx context.Context, bed *clusterbed.Bed, w int) (*client.Client, error) {
	var rest []string
	for i, br := range bed.Brokers {
		if i != w {
			rest = append(rest, br.Addr)
		}
	}
	return bed.Dial(ctx, bed.Brokers[w], tenant, namespace, client.WithFailover(rest...),
		client.WithReconnectBackoff(20*time.Millisecond, 300*time.Millisecond))
}

// publishShare publishes files w, w+n, w+2n, ... through broker w.
func publishShare(ctx context.Context, bed *clusterbed.Bed, c *corpus.Corpus, w int, results []pubResult, pr *progress) error {
	cl, err := dialFailover(ctx, bed, w)
	if err != nil {
		return err
	}
	defer cl.Close()
	var mine []int
	for i := w; i < len(c.Files); i += len(bed.Brokers) {
		mine = append(mine, i)
	}
	for round := 0; round < 6 && len(mine) > 0 && ctx.Err() == nil; round++ {
		if err := publishRound(ctx, cl, c, mine, results, pr, round == 0); err != nil {
			return err
		}
		var again []int
		for _, i := range mine {
			if results[i].outcome == outRefused {
				again = append(again, i)
			}
		}
		mine = again
	}
	return nil
}

// publishRound publishes files through one new idempotent Publisher, pipelined: one
// goroutine sends, one waits for the answers in order.
func publishRound(ctx context.Context, cl *client.Client, c *corpus.Corpus, files []int, results []pubResult, pr *progress, first bool) error {
	pub, err := cl.NewPublisher(streamName, client.PublisherOptions{Idempotent: true, Offsets: true,
		Linger: 2 * time.Millisecond, MaxBytes: 1 << 20, MaxInflightBytes: 8 << 20})
	if err != nil {
		return err
	}
	type wait struct {
		i int
		p client.Pending
	}
	waits := make(chan wait, 1024)
	var sendErr error
	go func() {
		defer close(waits)
		for _, i := range files {
			payload, err := corpus.ReadRecord(&c.Files[i])
			if err != nil {
				results[i].outcome = outSkipped
				pr.done.Add(1)
				continue
			}
			p, err := pub.PublishKeyed(ctx, []byte(c.Files[i].Path), payload)
			if err != nil {
				sendErr = fmt.Errorf("publish %s: %w", c.Files[i].Path, err)
				return
			}
			waits <- wait{i, p}
		}
		_ = pub.Flush(ctx)
	}()
	for wt := range waits {
		res, err := wt.p.Wait(ctx)
		r := &results[wt.i]
		switch {
		case err == nil:
			*r = pubResult{outcome: outAcked, shard: res.Shard, hasShard: res.HasShard, lastOffset: res.LastOffset, history: r.history}
		case errors.Is(err, client.ErrRefused):
			r.outcome = outRefused
			r.history = append(r.history, time.Now().UTC().Format("15:04:05.000")+" refused: "+err.Error())
		default:
			r.outcome = outIndeterminate
			r.history = append(r.history, time.Now().UTC().Format("15:04:05.000")+" indeterminate: "+err.Error())
		}
		if first {
			pr.done.Add(1)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = pub.Close(cctx)
	return sendErr
}

// seen is one record a reader was delivered: its offset and the file it carries.
type seen struct {
	offset uint64
	path   string
	sum    [32]byte
	bad    string // not an FXE1 record: why
}

// decodeSeen reads a delivered payload into a seen.
func decodeSeen(offset uint64, payload []byte) seen {
	key, content, err := corpus.DecodeRecord(payload)
	if err != nil {
		return seen{offset: offset, bad: err.Error()}
	}
	return seen{offset: offset, path: string(key), sum: sha256.Sum256(content)}
}

// subscriber follows one shard from its first offset through a redirecting client until
// stopped, keeping every delivered record in order.
type subscriber struct {
	shard uint32
	mu    sync.Mutex
	got   []seen
	gaps  uint64
	err   error
}

// follow subscribes to shard s through broker w and records deliveries until ctx ends.
func (s *subscriber) follow(ctx context.Context, bed *clusterbed.Bed, w int) {
	cl, err := dialFailover(ctx, bed, w)
	if err != nil {
		s.setErr(err)
		return
	}
	defer cl.Close()
	sub, err := cl.Subscribe(ctx, streamName, client.Offset(0), client.SubscribeOptions{Shards: []uint32{s.shard}})
	if err != nil {
		s.setErr(err)
		return
	}
	defer sub.Close()
	for {
		r, err := sub.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.setErr(err)
			}
			return
		}
		s.mu.Lock()
		s.gaps += r.Gap
		s.got = append(s.got, decodeSeen(r.Offset, r.Payload))
		s.mu.Unlock()
	}
}

func (s *subscriber) setErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// group is the two consumers of one consumer group, polling every shard in turn and
// acknowledging what they were given; delivered counts each (shard, offset) delivery.
type group struct {
	mu        sync.Mutex
	delivered map[[2]uint64]seen
	polls     atomic.Int64
	errs      atomic.Int64
}

// consume polls every shard through broker w until ctx ends.
func (g *group) consume(ctx context.Context, bed *clusterbed.Bed, w int) {
	cl, err := dialFailover(ctx, bed, w)
	if err != nil {
		g.errs.Add(1)
		return
	}
	defer cl.Close()
	for ctx.Err() == nil {
		for shard := range uint32(shards) {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			recs, err := cl.Poll(pctx, streamName, shard, "crash-group", 64, 50*time.Millisecond)
			g.polls.Add(1)
			if err != nil {
				cancel()
				g.errs.Add(1)
				continue
			}
			var offsets []uint64
			g.mu.Lock()
			for _, r := range recs {
				g.delivered[[2]uint64{uint64(shard), r.Offset}] = decodeSeen(r.Offset, r.Payload)
				offsets = append(offsets, r.Offset)
			}
			g.mu.Unlock()
			if len(offsets) > 0 && cl.Ack(pctx, streamName, shard, "crash-group", offsets...) != nil {
				g.errs.Add(1)
			}
			cancel()
		}
	}
}

package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"felix/internal/testseed"
)

// observed is what one subscriber saw.
type observed struct {
	sub        *Subscription
	policy     SlowPolicy
	shard      int
	deliveries []Delivery
	records    [][]string
}

// TestPropertyPublishersSubscribers runs N publishers × M subscribers with
// random batch sizes on real core goroutines and checks: under Block every
// subscriber sees every committed record exactly once, in offset order, with
// the committed payloads; under DropNew every gap between deliveries is
// exactly the Dropped count of the frame after it, and the counted drops are
// all the records it did not see.
func TestPropertyPublishersSubscribers(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			seed := testseed.Seed(t, uint64(time.Now().UnixNano()))
			runProperty(t, durable, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		})
	}
}

func runProperty(t *testing.T, durable bool, rng *rand.Rand) {
	cfg := Config{Cores: 2, NoPinning: true, InboxCapacity: 64, HeldPublishes: 16, BlockTimeout: time.Hour,
		MemoryReplayRecords: 1 << 20, HistoryFrameBytes: 2048}
	if durable {
		cfg.DataDir, cfg.Fsync = t.TempDir(), FsyncNone
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	const shards, publishers, subsPerShard = 2, 4, 4
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: shards, Durable: durable}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var subs []*observed
	var subsMu sync.Mutex
	var readers sync.WaitGroup
	subscribe := func(count int, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 3))
		for shard := range shards {
			for i := range count {
				o := &observed{policy: SlowPolicy(i % 2), shard: shard}
				var err error
				o.sub, err = e.Subscribe(SubscribeRequest{Stream: testStream, Shard: shard, Start: StartEarliest,
					WithOffsets: i < 2, Policy: o.policy, QueueCapacity: 1 + r.IntN(3)})
				if err != nil {
					t.Error(err)
					return
				}
				subsMu.Lock()
				subs = append(subs, o)
				subsMu.Unlock()
				readers.Add(1)
				go consume(t, ctx, o, r.Uint64(), &readers)
			}
		}
	}
	subscribe(subsPerShard, rng.Uint64())
	// Late subscribers join while publishes are in flight: their history
	// (log or replay ring) must meet live delivery with no gap or duplicate.
	lateSeed := rng.Uint64()
	committed := publishRandom(t, e, publishers, rng, func() { subscribe(2, lateSeed) })
	cancel()
	readers.Wait()
	dropped := uint64(0)
	for _, o := range subs {
		checkObserved(t, o, committed[o.shard])
		dropped += o.sub.Dropped()
	}
	t.Logf("records committed: %d + %d; dropped by DropNew subscribers: %d", len(committed[0]), len(committed[1]), dropped)
}

// consume reads until ctx ends, then takes what is still queued.
func consume(t *testing.T, ctx context.Context, o *observed, seed uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 1))
	for {
		d, err := o.sub.Next(ctx)
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			t.Errorf("Next: %v", err)
			return
		}
		o.deliveries = append(o.deliveries, d)
		o.records = append(o.records, records(t, d))
		for range rng.IntN(4) { // a subscriber of varying speed
			runtime.Gosched()
		}
	}
}

// publishRandom runs the publishers and returns, per shard, the committed
// payload at every offset.
// midway runs once, on publisher 0's goroutine, halfway through.
func publishRandom(t *testing.T, e *Engine, publishers int, rng *rand.Rand, midway func()) [][]string {
	var mu sync.Mutex
	committed := make([]map[uint64]string, 2)
	for i := range committed {
		committed[i] = map[uint64]string{}
	}
	var wg sync.WaitGroup
	for p := range publishers {
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 2))
			for b := range 60 {
				if p == 0 && b == 30 {
					midway()
				}
				req := routed(t, e, &PublishRequest{Stream: testStream, Payloads: payloads(fmt.Sprintf("p%d.%d", p, b), 1+r.IntN(64))}, nil)
				res, err := publishSync(t, e, req)
				if errors.Is(err, ErrOverloaded) {
					continue // shed behind a Block subscriber: not committed
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for i, pl := range req.Payloads {
					committed[res.Shard][res.FirstOffset+uint64(i)] = string(pl)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := make([][]string, len(committed))
	for s, m := range committed {
		out[s] = make([]string, len(m))
		for off, pl := range m {
			if off >= uint64(len(m)) {
				t.Fatalf("shard %d: offset %d beyond %d committed records", s, off, len(m))
			}
			out[s][off] = pl
		}
	}
	return out
}

func checkObserved(t *testing.T, o *observed, committed []string) {
	t.Helper()
	next, gaps := uint64(0), uint64(0)
	for i, d := range o.deliveries {
		if d.BaseOffset != next+d.Dropped {
			t.Fatalf("shard %d %v: delivery at %d after %d with Dropped %d", o.shard, o.policy, d.BaseOffset, next, d.Dropped)
		}
		gaps += d.Dropped
		for k, r := range o.records[i] {
			if want := committed[d.BaseOffset+uint64(k)]; r != want {
				t.Fatalf("shard %d: offset %d holds %q, committed %q", o.shard, d.BaseOffset+uint64(k), r, want)
			}
		}
		next = d.BaseOffset + uint64(d.Count)
	}
	trailing := uint64(len(committed)) - next
	switch o.policy {
	case Block:
		if gaps != 0 || trailing != 0 || o.sub.Dropped() != 0 {
			t.Fatalf("Block subscriber of shard %d: gaps %d, missing tail %d, dropped %d", o.shard, gaps, trailing, o.sub.Dropped())
		}
	case DropNew:
		if gaps+trailing != o.sub.Dropped() {
			t.Fatalf("DropNew subscriber of shard %d: gaps %d + tail %d != counted drops %d", o.shard, gaps, trailing, o.sub.Dropped())
		}
	}
}

package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"felix/internal/testseed"
)

// TestSimulation drives a manual engine from one seed: random publishes,
// core steps, held and released disk completions, clock ticks and partial
// subscriber drains, interleaved in an order the seed fixes (so a failure
// replays exactly with FELIX_TEST_SEED=<its seed>; an even seed runs a durable
// stream). At the end every Block subscriber has seen every committed record
// once, in order, and every DropNew subscriber's gaps are exactly its counted
// drops.
func TestSimulation(t *testing.T) {
	testseed.Run(t, uint64(time.Now().UnixNano()), 8, func(t *testing.T, seed uint64) {
		durable := seed%2 == 0
		t.Logf("durable=%v", durable)
		simulate(t, rand.New(rand.NewPCG(seed, 7)), durable)
	})
}

type simSub struct {
	obs *observed
}

func simulate(t *testing.T, rng *rand.Rand, durable bool) {
	h := newHarness(t, 1+rng.IntN(2), newFakeStore(), func(c *Config) {
		c.HeldPublishes = 1 + rng.IntN(8)
		c.BlockTimeout = time.Hour
	})
	const shards = 2
	h.create(StreamSpec{Name: testStream, Shards: shards, Durable: durable})
	var subs []*simSub
	for i := range 6 {
		o := &observed{policy: SlowPolicy(i % 2), shard: i % shards}
		var err error
		o.sub, err = h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: o.shard, Start: StartEarliest,
			Policy: o.policy, QueueCapacity: 1 + rng.IntN(3), WithOffsets: rng.IntN(2) == 0})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, &simSub{obs: o})
	}
	committed := make([]map[uint64]string, shards)
	for i := range committed {
		committed[i] = map[uint64]string{}
	}
	for step := range 400 {
		switch op := rng.IntN(10); {
		case op < 4:
			simPublish(t, h, rng, committed, step)
		case op < 6:
			h.step(1)
		case op == 6:
			h.hold(rng.IntN(3) == 0)
		case op == 7:
			h.clock.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
		default:
			simDrain(t, subs[rng.IntN(len(subs))], rng.IntN(4))
		}
	}
	h.hold(false)
	for range 50 { // settle: drain everything, let held publishes through
		h.step(1)
		for _, s := range subs {
			simDrain(t, s, 1<<20)
		}
	}
	dropped := uint64(0)
	for _, s := range subs {
		checkObserved(t, s.obs, simCommitted(t, committed[s.obs.shard]))
		dropped += s.obs.sub.Dropped()
	}
	t.Logf("committed %d + %d records; dropped %d", len(committed[0]), len(committed[1]), dropped)
}

func simPublish(t *testing.T, h *harness, rng *rand.Rand, committed []map[uint64]string, step int) {
	req := &PublishRequest{Stream: testStream, Shard: rng.IntN(len(committed)),
		Payloads: payloads(fmt.Sprint(step), 1+rng.IntN(5)), Ack: AckOnCommit}
	err := h.e.Publish(req, func(res PublishResult, err error) {
		if errors.Is(err, ErrOverloaded) {
			return // shed behind a Block subscriber
		}
		if err != nil {
			t.Errorf("publish: %v", err)
			return
		}
		for i, p := range req.Payloads {
			committed[res.Shard][res.FirstOffset+uint64(i)] = string(p)
		}
	})
	if err != nil && !errors.Is(err, ErrOverloaded) {
		t.Fatal(err)
	}
}

func simDrain(t *testing.T, s *simSub, n int) {
	for range n {
		d, err := nextNow(t, s.obs.sub)
		if err != nil {
			return
		}
		s.obs.deliveries = append(s.obs.deliveries, d)
		s.obs.records = append(s.obs.records, records(t, d))
	}
}

func simCommitted(t *testing.T, m map[uint64]string) []string {
	out := make([]string, len(m))
	for off, p := range m {
		if off >= uint64(len(out)) {
			t.Fatalf("committed offset %d beyond %d records", off, len(out))
		}
		out[off] = p
	}
	return out
}

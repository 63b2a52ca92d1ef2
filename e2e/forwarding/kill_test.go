package forwarding

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/testbed/history"
)

// killPhase runs a producer, a cache client and a subscriber dialled to the one broker
// that leads no shard of a 2-shard stream and a 2-shard cache (WithFailover naming the
// other two), plus a cache client on the same keys through a leader, and SIGKILLs that
// broker once a third of the producer's operations were acked. The clients fail over;
// after the run the producer and the failed-over cache client must have completed
// operations invoked after the kill, and the subscriber's final reads reach every acked
// record (the checkers then find none lost).
func (r *run) killPhase(ctx context.Context, t *testing.T, c *cluster, rng *rand.Rand) {
	const stream, shards, ops = "k-orders", 2, 60
	leaders := c.leaders(stream, shards)
	victim := 3 - leaders[0] - leaders[1] // the one broker leading neither shard
	kv := ""
	for i := 0; kv == "" && i < 100; i++ {
		if name := fmt.Sprintf("k-kv-%d", i); slices.Equal(c.leaders(name, shards), leaders) {
			kv = name
		}
	}
	c.create(ctx, []client.StreamInfo{{Name: stream, Shards: shards, Durable: true}}, []client.CacheInfo{{Name: kv, Shards: shards}})
	failover := client.WithFailover(c.nodes[leaders[0]].addr, c.nodes[leaders[1]].addr)
	sub := c.dial(ctx, victim, 3, failover)
	waitOpen(ctx, t, c.dial(ctx, leaders[0], 3), stream, shards)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	pcl, vcl, lcl := c.dial(ctx, victim, 5, failover), c.dial(ctx, victim, 1, failover), c.dial(ctx, leaders[0], 1)
	waitCache(ctx, t, lcl, kv, keys)
	p, err := pcl.NewPublisher(stream, client.PublisherOptions{Idempotent: true, Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	var work sync.WaitGroup
	var pub, vc, lc tally
	for g := range 2 {
		prng := rand.New(rand.NewPCG(rng.Uint64(), uint64(g)))
		work.Go(func() { r.produce(ctx, p, fmt.Sprintf("kp-%d", g), stream, ops, 8, prng, &pub) })
	}
	vrng, lrng := rand.New(rand.NewPCG(rng.Uint64(), 7)), rand.New(rand.NewPCG(rng.Uint64(), 8))
	work.Go(func() { r.cacheOps(ctx, vcl, "kcache-victim", kv, keys, ops, vrng, &vc) })
	work.Go(func() { r.cacheOps(ctx, lcl, "kcache-leader", kv, keys, ops, lrng, &lc) })
	subs := r.startSubscribers(ctx, sub, stream, shards)
	r.killWhen(ctx, t, c, victim, func() bool { return pub.ok.Load() >= 2*ops/3 }, &pub, &vc, &lc)
	subs.finish(t, &work)
	t.Logf("kill phase (broker %d killed): producer %v; cache through it %v; cache through a leader %v", victim, &pub, &vc, &lc)
	if pub.okAfter.Load() == 0 || vc.okAfter.Load() == 0 {
		t.Fatalf("no operation invoked after the kill completed: producer %v, cache %v", &pub, &vc)
	}
}

// killWhen waits (bounded by ctx) until ready holds, marks the kill time in the tallies
// and SIGKILLs broker i.
func (r *run) killWhen(ctx context.Context, t *testing.T, c *cluster, i int, ready func() bool, tallies ...*tally) {
	t.Helper()
	for !ready() {
		if ctx.Err() != nil {
			t.Fatalf("the workload never got far enough to kill broker %d", i)
		}
		time.Sleep(5 * time.Millisecond)
	}
	now := time.Now()
	for _, tl := range tallies {
		tl.after.Store(&now)
	}
	if _, err := c.nodes[i].proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
}

// plantLost removes the payload of one acked publish whose offset some read passed from
// every read (a lost write). It reports whether it found one.
func plantLost(ops []history.Op) bool {
	for _, op := range ops {
		if op.Kind != history.KindPublish || op.Outcome != history.OK || op.Out.Offsets[0] == 0 {
			continue
		}
		payload, removed := string(op.In.Payloads[0]), false
		for i := range ops {
			recs := ops[i].Out.Records
			ops[i].Out.Records = slices.DeleteFunc(recs, func(rc history.Record) bool { return string(rc.Payload) == payload })
			removed = removed || len(ops[i].Out.Records) != len(recs)
		}
		return removed
	}
	return false
}

// plantDuplicate makes one read record's payload appear again at the subscription's next
// offset: the last record read of one subscription is repeated one offset further.
func plantDuplicate(ops []history.Op) bool {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Kind == history.KindSubscribeRead && len(ops[i].Out.Records) == 1 {
			rc := ops[i].Out.Records[0]
			rc.Offset++
			ops[i].Out.Records = append(ops[i].Out.Records, rc)
			return true
		}
	}
	return false
}

// plantForeignValue makes one ok cache get that found a value answer one nobody wrote.
func plantForeignValue(ops []history.Op) bool {
	for i := range ops {
		if ops[i].Kind == history.KindCacheGet && ops[i].Outcome == history.OK && ops[i].Out.Found {
			ops[i].Out.Value = history.Bytes("never-written")
			return true
		}
	}
	return false
}

package forwarding

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/core/cache"
	"felix/internal/testseed"
	"felix/testbed/checker"
	"felix/testbed/history"
)

// Issue 19's acceptance on three real brokers of a static cluster: a forwarding phase
// (idempotent producers through every broker onto an 8-shard stream, one of them
// direct-to-owner; a subscriber of every shard through one broker, redirected; cache and
// counter clients on keys led by another broker than the one they dialled) and a kill
// phase (a broker leading nothing of a 2-shard stream and cache is SIGKILLed while its
// producer, cache client and subscriber run; they fail over to the other brokers). The
// whole history must pass every checker (no lost, duplicate or reordered record;
// linearizable cache keys and counters), the same history with an anomaly planted must
// not, no forward spent its attempt budget, and the failed-over clients completed
// operations after the kill.
func TestThreeBrokerForwarding(t *testing.T) {
	seed := testseed.Seed(t, 19)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startCluster(ctx, t, 3)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	rec, err := history.CreateRecorder(path, history.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (FELIX_TEST_SEED=%d replays the workload's choices); history %s", seed, seed, path)
		}
	})
	r := newRun(rec)
	r.forwardPhase(ctx, t, c, rand.New(rand.NewPCG(seed, 1)))
	for i := range c.nodes {
		if n := c.metricSum(i, "felix_broker_forwards_total", `reason="budget"`); n != 0 {
			t.Errorf("broker %d: %v forwards spent their attempt budget", i, n)
		}
	}
	if n := c.metricSum(0, "felix_broker_forwards_total", `outcome="ack"`) + c.metricSum(1, "felix_broker_forwards_total", `outcome="ack"`); n == 0 {
		t.Error("brokers 0 and 1 acked no forward: the phase did not go through non-owners")
	}
	r.killPhase(ctx, t, c, rand.New(rand.NewPCG(seed, 2)))
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := checker.CheckAll(h, checker.Options{Linear: checker.LinearOptions{Timeout: 30 * time.Second,
		VisualizationPath: filepath.Join(filepath.Dir(path), "history.lin.html")}})
	if err != nil || len(rep.Findings()) > 0 || len(rep.Unknown) > 0 {
		var b strings.Builder
		rep.Print(&b)
		t.Fatalf("checkers on %d operations (%v):\n%s", len(h.Ops), err, b.String())
	}
	plantedFound(t, h)
}

// forwardPhase runs the forwarding workload and waits for it (the subscribers' final
// reads reach every acked record).
func (r *run) forwardPhase(ctx context.Context, t *testing.T, c *cluster, rng *rand.Rand) {
	const stream, kv, shards, cacheShards = "orders", "kv", 8, 4
	c.create(ctx, []client.StreamInfo{{Name: stream, Shards: shards, Durable: true}}, []client.CacheInfo{{Name: kv, Shards: cacheShards}})
	sub := c.dial(ctx, 0, 3)
	waitOpen(ctx, t, sub, stream, shards)
	var work sync.WaitGroup
	var pub, cch tally
	subs := r.startSubscribers(ctx, sub, stream, shards)
	for i := range c.nodes {
		cl := c.dial(ctx, i, 5)
		p, err := cl.NewPublisher(stream, client.PublisherOptions{Idempotent: true, Offsets: true, Direct: i == 2})
		if err != nil {
			t.Fatal(err)
		}
		for g := range 2 {
			prng := rand.New(rand.NewPCG(rng.Uint64(), uint64(g)))
			work.Go(func() { r.produce(ctx, p, fmt.Sprintf("p%d-%d", i, g), stream, 40, 16, prng, &pub) })
		}
		keys := keysLedElsewhere(c.leaders(kv, cacheShards), i, cacheShards)
		ccl, crng := c.dial(ctx, i, 1), rand.New(rand.NewPCG(rng.Uint64(), 9))
		waitCache(ctx, t, ccl, kv, keys)
		work.Go(func() { r.cacheOps(ctx, ccl, fmt.Sprintf("cache-%d", i), kv, keys, 60, crng, &cch) })
	}
	subs.finish(t, &work)
	t.Logf("forwarding phase: publishes %v; cache operations %v", &pub, &cch)
	if pub.ok.Load() != 3*2*40 || cch.ok.Load() == 0 {
		t.Fatalf("forwarding phase without faults: publishes %v, cache %v", &pub, &cch)
	}
}

// keysLedElsewhere returns the keys k-0.. (up to 12) whose cache shard (cache.ShardOf) is
// led by another broker than self, per leaders.
func keysLedElsewhere(leaders []int, self, shards int) []string {
	var out []string
	for i := 0; len(out) < 12 && i < 1000; i++ {
		k := fmt.Sprintf("k-%d", i)
		if leaders[cache.ShardOf([]byte(k), uint32(shards))] != self {
			out = append(out, k)
		}
	}
	return out
}

// waitOpen waits until every shard of stream can be subscribed through cl (a broker of a
// static cluster opens its led shards shortly after the create).
func waitOpen(ctx context.Context, t *testing.T, cl *client.Client, stream string, shards int) {
	t.Helper()
	all := make([]uint32, shards)
	for i := range all {
		all[i] = uint32(i)
	}
	for {
		sub, err := cl.Subscribe(ctx, stream, client.Latest, client.SubscribeOptions{Shards: all})
		if err == nil {
			sub.Close()
			return
		}
		if !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrShardUnavailable) || ctx.Err() != nil {
			t.Fatalf("subscribe to %s: %v", stream, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitCache waits until every key's cache shard answers a Get through cl.
func waitCache(ctx context.Context, t *testing.T, cl *client.Client, name string, keys []string) {
	t.Helper()
	for _, k := range keys {
		for {
			_, _, err := cl.Get(ctx, name, k)
			if err == nil {
				break
			}
			if !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrShardUnavailable) || ctx.Err() != nil {
				t.Fatalf("get %s/%s: %v", name, k, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// plantedFound plants anomalies into the recorded history and checks the checkers find
// them (the check has teeth on this very history): one acked record removed from every
// read (lost-write), one read record repeated at a new offset of its subscription
// (duplicate), and one ok cache get answering a value nobody wrote (linearizability).
func plantedFound(t *testing.T, h *history.History) {
	t.Helper()
	for _, p := range []struct {
		want  checker.Anomaly
		plant func(ops []history.Op) bool
	}{{checker.LostWrite, plantLost}, {checker.Duplicate, plantDuplicate}, {checker.NonLinearCache, plantForeignValue}} {
		ops := slices.Clone(h.Ops)
		for i := range ops {
			ops[i].Out.Records = slices.Clone(ops[i].Out.Records)
		}
		if !p.plant(ops) {
			t.Fatalf("%s: nothing in the history to plant it in", p.want)
		}
		rep, err := checker.CheckAll(&history.History{Ops: ops}, checker.Options{Linear: checker.LinearOptions{Timeout: 30 * time.Second}})
		if err != nil || !rep.Has(p.want) {
			t.Fatalf("planted %s not found (%v): %v", p.want, err, rep.Findings())
		}
	}
}

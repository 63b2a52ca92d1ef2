package main

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/redis/go-redis/v9"
)

// redisFlags are the redis subcommand's settings.
type redisFlags struct {
	clients, inflight, nkeys int
	getRatio                 float64
}

// redisBench: --clients connections, each with --inflight commands per round trip
// (1 = unpipelined, k = a pipeline of k), --get-ratio GETs and SETs of --size bytes.
// Latency is one round trip (every command of a pipeline shares it).
func redisBench(args []string) error {
	fs := flag.NewFlagSet("redis", flag.ExitOnError)
	var c common
	c.register(fs)
	var rf redisFlags
	addr := fs.String("addr", "127.0.0.1:6379", "redis address")
	fs.IntVar(&rf.clients, "clients", 50, "connections")
	fs.IntVar(&rf.inflight, "inflight", 1, "commands per round trip (pipeline depth)")
	fs.Float64Var(&rf.getRatio, "get-ratio", 0.5, "share of GETs")
	fs.IntVar(&rf.nkeys, "keys", 10000, "key space")
	_ = fs.Parse(args)
	ctx := context.Background()
	keys := make([]string, rf.nkeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	value := make([]byte, c.size)
	rcs := make([]*redis.Client, rf.clients)
	for i := range rcs {
		rcs[i] = redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1, MinIdleConns: 1, Protocol: 2, DisableIdentity: true})
		defer rcs[i].Close()
	}
	if err := preloadRedis(ctx, rcs[0], keys, value); err != nil {
		return err
	}
	w := newWindow(c)
	var ops, inWin atomic.Int64
	hists := make([]*hdrhistogram.Histogram, rf.clients)
	errs := make([]error, rf.clients)
	var wg sync.WaitGroup
	for i, rc := range rcs {
		hists[i] = newHist()
		wg.Add(1)
		go func(i int, rc *redis.Client) {
			defer wg.Done()
			errs[i] = redisWorker(ctx, rc, rand.New(rand.NewPCG(uint64(i), 11)), keys, value, rf, w, hists[i], &ops, &inWin)
		}(i, rc)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	r := result{System: "redis", Shape: shape{Name: c.name, Kind: "cache", Payload: c.size, Clients: rf.clients, InFlight: rf.inflight},
		Sent: ops.Load(), Delivered: ops.Load(), Latency: summarize(h), LatencyFrom: "send → answer (per round trip)",
		Settings: map[string]any{"clients": rf.clients, "inflight": rf.inflight, "get_ratio": rf.getRatio, "keys": rf.nkeys}}
	n := inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

// preloadRedis empties the server and sets every key, 500 per pipeline.
func preloadRedis(ctx context.Context, rc *redis.Client, keys []string, value []byte) error {
	if err := rc.FlushAll(ctx).Err(); err != nil {
		return err
	}
	for i := 0; i < len(keys); i += 500 {
		p := rc.Pipeline()
		for j := i; j < i+500 && j < len(keys); j++ {
			p.Set(ctx, keys[j], value, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

// redisWorker is one connection's loop until the window ends.
func redisWorker(ctx context.Context, rc *redis.Client, rng *rand.Rand, keys []string, value []byte, rf redisFlags, w window,
	h *hdrhistogram.Histogram, ops, inWin *atomic.Int64) error {
	for {
		t := time.Now()
		if !t.Before(w.end) {
			return nil
		}
		var err error
		if rf.inflight <= 1 {
			key := keys[rng.IntN(len(keys))]
			if rng.Float64() < rf.getRatio {
				err = rc.Get(ctx, key).Err()
			} else {
				err = rc.Set(ctx, key, value, 0).Err()
			}
		} else {
			p := rc.Pipeline()
			for k := 0; k < rf.inflight; k++ {
				key := keys[rng.IntN(len(keys))]
				if rng.Float64() < rf.getRatio {
					p.Get(ctx, key)
				} else {
					p.Set(ctx, key, value, 0)
				}
			}
			_, err = p.Exec(ctx)
		}
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		now := time.Now()
		n := int64(rf.inflight)
		ops.Add(n)
		if w.in(t) {
			for k := int64(0); k < n; k++ {
				record(h, now.Sub(t))
			}
		}
		if w.in(now) {
			inWin.Add(n)
		}
	}
}

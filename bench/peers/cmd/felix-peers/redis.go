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

// redisBench: --clients connections, each with --inflight commands per round trip
// (1 = unpipelined, k = a pipeline of k), --get-ratio GETs and SETs of --size bytes.
// Latency is one round trip (every command of a pipeline shares it).
func redisBench(args []string) error {
	fs := flag.NewFlagSet("redis", flag.ExitOnError)
	var c common
	c.register(fs)
	addr := fs.String("addr", "127.0.0.1:6379", "redis address")
	clients := fs.Int("clients", 50, "connections")
	inflight := fs.Int("inflight", 1, "commands per round trip (pipeline depth)")
	getRatio := fs.Float64("get-ratio", 0.5, "share of GETs")
	nkeys := fs.Int("keys", 10000, "key space")
	_ = fs.Parse(args)
	ctx := context.Background()
	keys := make([]string, *nkeys)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	value := make([]byte, c.size)
	rcs := make([]*redis.Client, *clients)
	for i := range rcs {
		rcs[i] = redis.NewClient(&redis.Options{Addr: *addr, PoolSize: 1, MinIdleConns: 1, Protocol: 2, DisableIdentity: true})
		defer rcs[i].Close()
	}
	if err := rcs[0].FlushAll(ctx).Err(); err != nil {
		return err
	}
	for i := 0; i < len(keys); i += 500 {
		p := rcs[0].Pipeline()
		for j := i; j < i+500 && j < len(keys); j++ {
			p.Set(ctx, keys[j], value, 0)
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	w := newWindow(c)
	var ops, inWin atomic.Int64
	hists := make([]*hdrhistogram.Histogram, *clients)
	errs := make([]error, *clients)
	var wg sync.WaitGroup
	for i, rc := range rcs {
		hists[i] = newHist()
		wg.Add(1)
		go func(i int, rc *redis.Client) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			for {
				t := time.Now()
				if !t.Before(w.end) {
					return
				}
				var err error
				if *inflight <= 1 {
					key := keys[rng.IntN(len(keys))]
					if rng.Float64() < *getRatio {
						err = rc.Get(ctx, key).Err()
					} else {
						err = rc.Set(ctx, key, value, 0).Err()
					}
				} else {
					p := rc.Pipeline()
					for k := 0; k < *inflight; k++ {
						key := keys[rng.IntN(len(keys))]
						if rng.Float64() < *getRatio {
							p.Get(ctx, key)
						} else {
							p.Set(ctx, key, value, 0)
						}
					}
					_, err = p.Exec(ctx)
				}
				if err != nil && !errors.Is(err, redis.Nil) {
					errs[i] = err
					return
				}
				now := time.Now()
				n := int64(*inflight)
				ops.Add(n)
				if w.in(t) {
					for k := int64(0); k < n; k++ {
						record(hists[i], now.Sub(t))
					}
				}
				if w.in(now) {
					inWin.Add(n)
				}
			}
		}(i, rc)
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	r := result{System: "redis", Shape: shape{Name: c.name, Kind: "cache", Payload: c.size, Clients: *clients, InFlight: *inflight},
		Sent: ops.Load(), Delivered: ops.Load(), Latency: summarize(h), LatencyFrom: "send → answer (per round trip)",
		Settings: map[string]any{"clients": *clients, "inflight": *inflight, "get_ratio": *getRatio, "keys": *nkeys}}
	n := inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

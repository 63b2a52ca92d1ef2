package client

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestForwardingFigures measures, side by side in one run on a two-broker static cluster,
// a keyed publish (PublishKeyedSync, one 100-byte record) and a cache Put: straight to the
// shard's owner, through the other broker (forwarded), and, for publishes, through the
// other broker with PublisherOptions.Direct. It prints p50/p99 latency of sequential
// operations (interleaved in rounds of 100, so load drift hits every mode alike) and the
// throughput of 20 000 pipelined records per publish mode (default linger: batched), with
// each mode's ratio to the owner's. A measurement for docs/bench/forwarding.md, run only with
// FELIX_BENCH_FORWARDING=1 on a quiet machine:
//
//	FELIX_BENCH_FORWARDING=1 go test -count=1 -run TestForwardingFigures -v ./client
func TestForwardingFigures(t *testing.T) {
	if os.Getenv("FELIX_BENCH_FORWARDING") != "1" {
		t.Skip("a measurement: FELIX_BENCH_FORWARDING=1 runs it (docs/bench/forwarding.md)")
	}
	bs := startStaticCluster(t, 2)
	for _, b := range bs {
		if _, err := b.admin().CreateStream(testCtx(t), StreamInfo{Name: "fw", Shards: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.admin().CreateCache(testCtx(t), CacheInfo{Name: "fwc", Shards: 1}); err != nil {
			t.Fatal(err)
		}
	}
	routes, err := bs[0].dial().RouteLookup(testCtx(t), "fw")
	if err != nil {
		t.Fatal(err)
	}
	owner, other := bs[0], bs[1]
	if routes[0].Address != owner.info.QUICAddr {
		owner, other = other, owner
	}
	modes := []struct {
		name string
		c    *Client
		opts PublisherOptions
	}{{"owner", owner.dial(), PublisherOptions{Linger: -1}}, {"forwarded", other.dial(), PublisherOptions{Linger: -1}},
		{"direct", other.dial(), PublisherOptions{Linger: -1, Direct: true}}}
	subscribeWhenOpen(testCtx(t), t, modes[0].c, "fw", SubscribeOptions{}).Close()
	lat := map[string][]time.Duration{}
	pubs := make([]*Publisher, len(modes))
	for i, m := range modes {
		if pubs[i], err = m.c.NewPublisher("fw", m.opts); err != nil {
			t.Fatal(err)
		}
	}
	payload := make([]byte, 100)
	for range 20 {
		for i, m := range modes {
			lat["publish "+m.name] = append(lat["publish "+m.name], timeOps(t, 100, func(ctx context.Context) error {
				_, err := pubs[i].PublishKeyedSync(ctx, []byte("k"), payload)
				return err
			})...)
			if m.name != "direct" {
				lat["cache put "+m.name] = append(lat["cache put "+m.name], timeOps(t, 100, func(ctx context.Context) error {
					return m.c.Put(ctx, "fwc", "k", payload, 0)
				})...)
			}
		}
	}
	var out strings.Builder
	latencyTable(&out, lat, []string{"owner", "forwarded", "direct"})
	fmt.Fprintf(&out, "\n| publish mode | records/s (20 000 pipelined, 100 B) | / owner |\n| --- | --- | --- |\n")
	var ownerRate float64
	for i, m := range modes {
		opts := m.opts
		opts.Linger = 0 // the default: batches of up to 1024 records
		bp, err := m.c.NewPublisher("fw", opts)
		if err != nil {
			t.Fatal(err)
		}
		rate := throughput(t, bp, payload, 20000)
		if i == 0 {
			ownerRate = rate
		}
		fmt.Fprintf(&out, "| %s | %.0f | %.2f |\n", m.name, rate, rate/ownerRate)
	}
	t.Log(out.String())
}

// latencyTable writes the p50/p99 table of lat ("publish <mode>", "cache put <mode>") with
// each mode's ratio to the owner's.
func latencyTable(out *strings.Builder, lat map[string][]time.Duration, modes []string) {
	fmt.Fprintf(out, "\n| operation | p50 | p99 | p50 / owner | p99 / owner |\n| --- | --- | --- | --- | --- |\n")
	for _, op := range []string{"publish", "cache put"} {
		base := lat[op+" owner"]
		for _, m := range modes {
			if d, ok := lat[op+" "+m]; ok {
				fmt.Fprintf(out, "| %s %s | %v | %v | %.2f | %.2f |\n", op, m, pct(d, 50), pct(d, 99),
					float64(pct(d, 50))/float64(pct(base, 50)), float64(pct(d, 99))/float64(pct(base, 99)))
			}
		}
	}
}

// timeOps runs op n times in sequence and returns each latency.
func timeOps(t *testing.T, n int, op func(context.Context) error) []time.Duration {
	ctx := testCtx(t)
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if err := op(ctx); err != nil {
			t.Fatal(err)
		}
		out[i] = time.Since(start)
	}
	return out
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// throughput publishes n keyed records through p without waiting between them and returns
// records per second until the last is acked.
func throughput(t *testing.T, p *Publisher, payload []byte, n int) float64 {
	ctx := testCtx(t)
	start := time.Now()
	pend := make([]Pending, n)
	for i := range pend {
		var err error
		if pend[i], err = p.PublishKeyed(ctx, []byte("k"), payload); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, pd := range pend {
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

package bench

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// TestPeersSmall builds felix-peers and runs each peer at a tiny size. Building
// nats-server takes minutes, so it runs only with FELIX_BENCH_PEERS=1 (make bench-compare
// exercises the same code at full size).
func TestPeersSmall(t *testing.T) {
	if os.Getenv("FELIX_BENCH_PEERS") != "1" {
		t.Skip("set FELIX_BENCH_PEERS=1 to build and run the peers")
	}
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := BuildPeers(ctx, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	p := &Peers{Bin: bin, WorkDir: dir}
	s := Settings{Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond}
	nats, err := p.StartNATS(ctx, "always")
	if err != nil {
		t.Fatal(err)
	}
	defer nats.Stop()
	for _, c := range []struct {
		sub  string
		args []string
	}{
		{"js-publish", []string{"--publishers", "2", "--size", "1024", "--sync", "always"}},
		{"js-async", []string{"--size", "1024"}},
		{"nats-pubsub", []string{"--size", "256", "--fanout", "2"}},
	} {
		res, err := p.Client(ctx, c.sub, s, nats, append([]string{"--url", nats.Addr}, c.args...)...)
		if err != nil {
			t.Fatalf("%s: %v", c.sub, err)
		}
		if res.Sent <= 0 || res.RecordsPerSec <= 0 || res.Latency.Count == 0 || res.System == "" {
			t.Fatalf("%s: %+v", c.sub, res)
		}
	}
	redis, err := p.StartRedis(ctx)
	if errors.Is(err, ErrPeerUnavailable) {
		t.Logf("redis skipped: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer redis.Stop()
	for _, inflight := range []string{"1", "4"} {
		res, err := p.Client(ctx, "redis", s, redis, "--addr", redis.Addr, "--clients", "4", "--inflight", inflight, "--size", "256", "--keys", "100")
		if err != nil {
			t.Fatal(err)
		}
		if res.System != "redis" || res.RecordsPerSec <= 0 || res.Latency.P99 <= 0 {
			t.Fatalf("%+v", res)
		}
	}
}

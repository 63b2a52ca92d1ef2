package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/auth"
)

// startStaticCluster starts n brokers of one static cluster (FELIX_NODE_ID,
// FELIX_INTERNAL_BIND, FELIX_CLUSTER_PEERS; docs/operations.md "Static cluster") on
// 127.0.0.1 with one certificate and one key store (the first broker's auth/keys.json
// and admin token, copied before the others start), so the client's token and pinned
// fingerprint hold on every broker it is redirected to.
func startStaticCluster(t *testing.T, n int) []*testBroker {
	t.Helper()
	cert := writeCert(t)
	clientAddrs, internalAddrs := make([]string, n), make([]string, n)
	var peers []string
	for i := range n {
		clientAddrs[i], internalAddrs[i] = freeUDPAddr(t), freeUDPAddr(t)
		peers = append(peers, fmt.Sprintf("node-%d.felix=%s/%s", i, internalAddrs[i], clientAddrs[i]))
	}
	brokers := make([]*testBroker, n)
	for i := range n {
		dir := filepath.Join(t.TempDir(), "data")
		if i > 0 {
			copyAuth(t, brokers[0].dataDir, dir)
		}
		env := append([]string{"FELIX_QUIC_BIND=" + clientAddrs[i], "FELIX_INTERNAL_BIND=" + internalAddrs[i],
			fmt.Sprintf("FELIX_NODE_ID=node-%d.felix", i), "FELIX_CLUSTER_PEERS=" + strings.Join(peers, ",")}, cert...)
		brokers[i] = startBroker(t, dir, env...)
	}
	return brokers
}

// copyAuth copies the key store and the admin token of data dir from into data dir to.
func copyAuth(t *testing.T, from, to string) {
	t.Helper()
	for _, f := range []string{auth.KeyStorePath(from), filepath.Join(from, auth.AdminTokenFile)} {
		rel, _ := filepath.Rel(from, f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// subscribeWhenOpen subscribes until the owners have opened their shards (a create on a
// static-cluster broker returns before its shards open: not_found meanwhile), within ctx.
func subscribeWhenOpen(ctx context.Context, t *testing.T, c *Client, stream string, opts SubscribeOptions) *Subscription {
	t.Helper()
	for {
		sub, err := c.Subscribe(ctx, stream, Earliest, opts)
		if err == nil {
			return sub
		}
		if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrShardUnavailable) || ctx.Err() != nil {
			t.Fatalf("subscribe through a non-owner: %v", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Issue 19 item 6 on three real brokers of a static cluster: a subscription to every shard
// of a 6-shard durable stream through one broker (it leads 2 shards, the other 4 answer
// not_leader and are followed to their owners) receives every record published through
// that broker (forwarded to the owners), exactly once and in offset order per shard, both
// records published before it (from Earliest) and after.
func TestSubscribeThroughNonOwnerFollowsRedirects(t *testing.T) {
	bs := startStaticCluster(t, 3)
	const shards = 6
	for _, b := range bs {
		if _, err := b.admin().CreateStream(testCtx(t), StreamInfo{Name: "orders", Shards: shards, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	c := bs[0].dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("orders", PublisherOptions{Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32][]string{}
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			payload := fmt.Sprintf("record-%03d", i)
			res, err := p.PublishKeyedSync(ctx, fmt.Appendf(nil, "customer-%d", i%17), []byte(payload))
			if err != nil || !res.HasShard || res.FirstOffset != uint64(len(want[res.Shard])) {
				t.Fatalf("publish %d through a non-owner: %+v %v", i, res, err)
			}
			want[res.Shard] = append(want[res.Shard], payload)
		}
	}
	all := []uint32{0, 1, 2, 3, 4, 5}
	sub := subscribeWhenOpen(ctx, t, c, "orders", SubscribeOptions{Shards: all})
	defer sub.Close()
	publish(0, 60)
	got := map[uint32][]string{}
	receive := func(n int) {
		for range n {
			r, err := sub.Next(ctx)
			if err != nil || !r.HasOffset || r.Offset != uint64(len(got[r.Shard])) || r.Gap != 0 {
				t.Fatalf("record %+v after %v: %v", r, got, err)
			}
			got[r.Shard] = append(got[r.Shard], string(r.Payload))
		}
	}
	receive(60)
	publish(60, 90) // a duplicate of an earlier record would now show as an offset out of order
	receive(30)
	if fmt.Sprint(got) != fmt.Sprint(want) || len(want) < 4 {
		t.Fatalf("received %v, want %v (over at least 4 shards)", got, want)
	}
	if n := metricValue(t, bs[0], "felix_broker_redirects_sent_total"); n < 4 {
		t.Fatalf("the dialled broker redirected %v subscribes, want at least 4 (it leads 2 of 6 shards)", n)
	}
}

// metricValue reads one unlabelled series from b's /metrics (-1 when absent).
func metricValue(t *testing.T, b *testBroker, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(metricsBody(t, b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

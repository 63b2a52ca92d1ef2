package conformance

// The cluster scenarios (optional: reconnect.outlive-broker, retry.transport-other-broker)
// against three brokers of one static cluster (FELIX_CLUSTER_PEERS; docs/forwarding.md),
// as e2e/forwarding starts them: one certificate, node 0's key store and admin token
// copied to the others before they start, so one token holds on every broker.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/auth"
	"felix/client"
	"felix/testbed/scenario"
)

func init() {
	register("reconnect.outlive-broker", reconnectOutliveBroker)
	register("retry.transport-other-broker", retryTransportOtherBroker)
	register("reconnect.follow-redirect", reconnectFollowRedirect)
}

// startCluster starts n brokers node-0.felix … of one static cluster.
func startCluster(t *testing.T, n int) []*broker {
	t.Helper()
	root := t.TempDir()
	cert, err := scenario.WriteCert(root)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]*broker, n)
	internal := make([]string, n)
	var peers []string
	for i := range nodes {
		nodes[i] = newBroker(t, filepath.Join(root, fmt.Sprint(i)), cert)
		internal[i] = freeAddr(t)
		peers = append(peers, fmt.Sprintf("node-%d.felix=%s/%s", i, internal[i], nodes[i].quic))
	}
	for i, b := range nodes {
		b.env = append(b.env, "FELIX_NODE_ID="+fmt.Sprintf("node-%d.felix", i), "FELIX_INTERNAL_BIND="+internal[i],
			"FELIX_CLUSTER_PEERS="+strings.Join(peers, ","), "FELIX_LOG_LEVEL=warn")
		if i > 0 {
			copyAuth(t, nodes[0].dataDir, b.dataDir)
		}
		b.start()
	}
	return nodes
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

// ledBy returns a one-shard stream or cache name (prefix + a number) whose shard the
// static placement gives to node i of n (broker/static_cluster.go placeShards: fnv32a of
// tenant/namespace/name mod n).
func ledBy(t *testing.T, n, i int, prefix string) string {
	t.Helper()
	for k := 0; k < 100; k++ {
		name := fmt.Sprintf("%s%d", prefix, k)
		h := fnv.New32a()
		_, _ = h.Write([]byte("default/default/" + name))
		if int(h.Sum32()%uint32(n)) == i {
			return name
		}
	}
	t.Fatalf("no name led by node %d", i)
	return ""
}

// cacheLedBy is a one-shard cache led by node i, created on every broker.
func cacheLedBy(t *testing.T, nodes []*broker, i int) string {
	t.Helper()
	name := ledBy(t, len(nodes), i, "kv")
	for _, b := range nodes {
		b.createCache(name)
	}
	return name
}

// waitServed waits (at most 20 s) until try succeeds: a broker answers a create before
// the owner opened the shard, and an operation in between is not_found or
// shard_unavailable (docs/cli.md, cluster stream create). Any other error fails t.
func waitServed(t *testing.T, what string, try func(ctx context.Context) error) {
	t.Helper()
	waitFor(t, 20*time.Second, what+" served", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := try(ctx)
		if err != nil && !errors.Is(err, client.ErrNotFound) && !errors.Is(err, client.ErrShardUnavailable) {
			t.Fatalf("%s: %v", what, err)
		}
		return err == nil
	})
}

// failoverClient dials node 0 with the others as failover addresses, a 1 s idle timeout
// (a killed broker is noticed in about 1.2 s) and fast reconnects.
func failoverClient(t *testing.T, nodes []*broker) *client.Client {
	t.Helper()
	var others []string
	for _, b := range nodes[1:] {
		others = append(others, b.quic)
	}
	return nodes[0].dial(client.WithFailover(others...), client.WithIdleTimeout(time.Second),
		client.WithDialTimeout(time.Second), client.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond),
		client.WithMaxAttempts(5))
}

func retryTransportOtherBroker(t *testing.T, _ *env) {
	nodes := startCluster(t, 3)
	kv := cacheLedBy(t, nodes, 1)
	c, ctx := failoverClient(t, nodes), stepCtx(t)
	waitServed(t, "cache "+kv, func(ctx context.Context) error { return c.Put(ctx, kv, "k", []byte("before"), 0) })
	nodes[0].kill()
	// One Get, safe to re-send: its broker is dead, so it must be answered through another.
	v, found, err := c.Get(ctx, kv, "k")
	if err != nil || !found || string(v) != "before" {
		t.Fatalf("get after its broker died: %q %v %v, want the value through another broker", v, found, err)
	}
}

func reconnectOutliveBroker(t *testing.T, _ *env) {
	nodes := startCluster(t, 3)
	kv := cacheLedBy(t, nodes, 2)
	c, ctx := failoverClient(t, nodes), stepCtx(t)
	waitServed(t, "cache "+kv, func(ctx context.Context) error { _, err := c.CounterAdd(ctx, kv, "n", 1); return err })
	nodes[0].kill()
	waitFor(t, 20*time.Second, "the client reads through a surviving broker", func() bool {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _, err := c.CounterGet(gctx, kv, "n")
		return err == nil
	})
	for i := range 5 { // the client goes on: writes and reads, every one answered
		sum, err := c.CounterAdd(ctx, kv, "n", 1)
		if err != nil || sum != int64(i+2) {
			t.Fatalf("add %d after the kill: %d %v, want %d", i, sum, err, i+2)
		}
	}
	if v, found, err := c.CounterGet(ctx, kv, "n"); err != nil || !found || v != 6 {
		t.Fatalf("counter after the kill: %d %v %v, want 6", v, found, err)
	}
}

func reconnectFollowRedirect(t *testing.T, _ *env) {
	nodes := startCluster(t, 3)
	stream := ledBy(t, len(nodes), 1, "events")
	for _, b := range nodes {
		b.createStream(client.StreamInfo{Name: stream, Durable: true})
	}
	c := nodes[0].dial() // node 0 does not lead the shard: it answers the subscribe not_leader
	routes, err := c.RouteLookup(stepCtx(t), stream)
	if err != nil || len(routes) != 1 || routes[0].Owner != "node-1.felix" {
		t.Fatalf("routes of %s: %+v %v, want node-1.felix leading shard 0", stream, routes, err)
	}
	var sub *client.Subscription
	waitServed(t, "stream "+stream, func(ctx context.Context) (err error) {
		sub, err = c.Subscribe(ctx, stream, client.Earliest, client.SubscribeOptions{})
		return err
	})
	t.Cleanup(func() { sub.Close() })
	want := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	publishAll(t, c, stream, want) // forwarded by node 0 to the owner
	for i, r := range collect(t, sub, len(want)) {
		if r.Offset != uint64(i) || string(r.Payload) != string(want[i]) {
			t.Fatalf("record %d through the redirect: offset %d %q, want %d %q", i, r.Offset, r.Payload, i, want[i])
		}
	}
}

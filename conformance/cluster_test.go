package conformance

// The cluster scenarios (optional: reconnect.outlive-broker, retry.transport-other-broker)
// against three brokers of one static cluster (FELIX_CLUSTER_PEERS; docs/forwarding.md),
// as e2e/forwarding starts them: one certificate, node 0's key store and admin token
// copied to the others before they start, so one token holds on every broker.

import (
	"context"
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

// cacheLedBy returns a one-shard cache name whose shard the static placement gives to node
// i of n (broker/static_cluster.go placeShards: fnv32a of tenant/namespace/name mod n),
// created on every broker.
func cacheLedBy(t *testing.T, nodes []*broker, i int) string {
	t.Helper()
	for k := 0; k < 100; k++ {
		name := fmt.Sprintf("kv%d", k)
		h := fnv.New32a()
		_, _ = h.Write([]byte("default/default/" + name))
		if int(h.Sum32()%uint32(len(nodes))) == i {
			for _, b := range nodes {
				b.createCache(name)
			}
			return name
		}
	}
	t.Fatalf("no cache name led by node %d", i)
	return ""
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
	if err := c.Put(ctx, kv, "k", []byte("before"), 0); err != nil {
		t.Fatal(err)
	}
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
	if _, err := c.CounterAdd(ctx, kv, "n", 1); err != nil {
		t.Fatal(err)
	}
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

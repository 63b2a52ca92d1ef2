package forwarding

import (
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/auth"
	"felix/client"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// node is one broker of the test's static cluster, a supervised felix-broker process.
type node struct {
	id       string // FELIX_NODE_ID
	addr     string // client address (QUIC) and, on the same port, HTTP (metrics, admin)
	internal string // FELIX_INTERNAL_BIND
	dataDir  string
	proc     *supervisor.Process
}

// cluster is three brokers of one static cluster (FELIX_CLUSTER_PEERS) sharing one
// certificate, one key store and one admin token.
type cluster struct {
	t     *testing.T
	nodes []*node
	cert  scenario.Cert
	token string
}

// startCluster builds the broker once and starts n brokers on free 127.0.0.1 ports. The
// first broker writes the key store and the admin token; they are copied into the other
// data dirs before those start, so a token and a forwarded credential hold on every broker.
func startCluster(ctx context.Context, t *testing.T, n int) *cluster {
	t.Helper()
	bins, err := scenario.Build(ctx, filepath.Join(t.TempDir(), "bin"))
	if err != nil {
		t.Fatal(err)
	}
	sup := supervisor.NewForTest(t)
	root := t.TempDir()
	cert, err := scenario.WriteCert(root)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, cert: cert}
	var peers []string
	for i := range n {
		nd := &node{id: fmt.Sprintf("node-%d.felix", i), dataDir: filepath.Join(root, strconv.Itoa(i), "data")}
		nd.addr, nd.internal = freeAddr(t), freeAddr(t)
		peers = append(peers, nd.id+"="+nd.internal+"/"+nd.addr)
		c.nodes = append(c.nodes, nd)
	}
	for i, nd := range c.nodes {
		if i > 0 {
			copyAuth(t, c.nodes[0].dataDir, nd.dataDir)
		}
		if err := os.MkdirAll(nd.dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		ready := filepath.Join(root, strconv.Itoa(i), "ready.json")
		spec := supervisor.Spec{Name: fmt.Sprintf("broker-%d", i), Path: bins.Broker, Dir: filepath.Dir(nd.dataDir),
			Env: []string{"FELIX_QUIC_BIND=" + nd.addr, "FELIX_BROKER_METRICS_BIND=" + nd.addr, "FELIX_INTERNAL_BIND=" + nd.internal,
				"FELIX_NODE_ID=" + nd.id, "FELIX_CLUSTER_PEERS=" + strings.Join(peers, ","),
				"FELIX_DURABLE_STORAGE_DIR=" + nd.dataDir, "FELIX_READY_FILE=" + ready,
				"FELIX_TLS_CERT=" + cert.CertFile, "FELIX_TLS_KEY=" + cert.KeyFile, "FELIX_LOG_LEVEL=warn",
				"FELIX_CORE_SHARDS=1", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT="},
			Ready: supervisor.Ready{File: ready, Timeout: scenario.BrokerReadyWait}}
		if nd.proc, err = sup.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	tok, err := os.ReadFile(filepath.Join(c.nodes[0].dataDir, auth.AdminTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	c.token = strings.TrimSpace(string(tok))
	return c
}

// freeAddr is a 127.0.0.1 address whose port was free for UDP and TCP a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
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

// dial connects an SDK client to broker i (pinned certificate, admin token, fast
// reconnects, 1 s idle timeout so a killed broker is noticed within about 1.2 s) with
// maxAttempts sends per request and opts after.
func (c *cluster) dial(ctx context.Context, i, maxAttempts int, opts ...client.Option) *client.Client {
	c.t.Helper()
	all := append([]client.Option{client.WithFingerprint(c.cert.Fingerprint), client.WithToken(c.token),
		client.WithMaxAttempts(maxAttempts), client.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond),
		client.WithIdleTimeout(time.Second), client.WithDialTimeout(time.Second)}, opts...)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cl, err := client.Dial(dctx, c.nodes[i].addr, all...)
	if err != nil {
		c.t.Fatalf("dial broker %d: %v", i, err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// create makes the same stream or cache on every broker.
func (c *cluster) create(ctx context.Context, streams []client.StreamInfo, caches []client.CacheInfo) {
	c.t.Helper()
	for _, nd := range c.nodes {
		a, err := client.NewAdmin(nd.addr, client.AdminToken(c.token))
		if err != nil {
			c.t.Fatal(err)
		}
		for _, s := range streams {
			if _, err := a.CreateStream(ctx, s); err != nil {
				c.t.Fatalf("create stream %s on %s: %v", s.Name, nd.id, err)
			}
		}
		for _, cc := range caches {
			if _, err := a.CreateCache(ctx, cc); err != nil {
				c.t.Fatalf("create cache %s on %s: %v", cc.Name, nd.id, err)
			}
		}
	}
}

// leaders is the static placement (broker.StaticPlacement) of shards shards of
// "default/default/name": the index of each shard's leader in c.nodes (node ids sorted
// as created: node-0 < node-1 < node-2).
func (c *cluster) leaders(name string, shards int) []int {
	h := fnv.New32a()
	_, _ = h.Write([]byte("default/default/" + name))
	base := int(h.Sum32() % uint32(len(c.nodes)))
	out := make([]int, shards)
	for i := range out {
		out[i] = (base + i) % len(c.nodes)
	}
	return out
}

// metricSum sums every series of metric name whose line contains match on broker i.
func (c *cluster) metricSum(i int, name, match string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://" + c.nodes[i].addr + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	sum := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if (strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ")) && strings.Contains(line, match) {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				c.t.Fatalf("%s: %v", line, err)
			}
			sum += f
		}
	}
	return sum
}

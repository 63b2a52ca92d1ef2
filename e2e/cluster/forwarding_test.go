package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/broker"
	"felix/client"
	"felix/cluster/meta"
	"felix/cluster/meta/rest"
	"felix/core"
)

// Forwarding in cluster mode with processes (docs/forwarding.md, "Cluster mode";
// docs/controlplane.md, "Which keys verify what"): one control plane and three brokers, a
// replication-factor-3 stream of fwdShards shards and a cache of one shard.

const (
	fwdStream     = "events"
	fwdShards     = 4
	fwdCache      = "sessions"
	fwdPerShard   = 2 // keyed records each broker publishes to each shard
	localTenant   = "default"
	redirectedLog = "felix: subscription redirected"
)

// fwdCluster is the running cluster and what the control plane placed.
type fwdCluster struct {
	f       *fixture
	routing core.Routing
	leaders map[uint32]string // stream shard → leader's node id
	cacheBy string            // the cache shard's leader
	addr    map[string]string // node id → client address (the control plane's brokers)
	byID    map[string]*brokerProc
	token   string            // the clients' token ("" with auth off)
	admin   map[string]string // node id → the broker's own admin token (auth on)
}

// TestClusterModeForwarding: with FELIX_AUTH=off, keyed publishes through every broker
// land on their key's shard (read back from each shard's leader; the non-leaders'
// forwards counted), a cache put and get through non-owners, a subscribe to a non-owner
// redirected and followed by the SDK, and route_lookup through every broker naming each
// shard's leader and its client address.
func TestClusterModeForwarding(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startForwardingCluster(ctx, t, false)
	c.checkAll(ctx)
}

// TestClusterModeForwardingWithAuth is TestClusterModeForwarding with FELIX_AUTH=on and a
// token the control plane issued (POST /v1/tenants/{t}/tokens) used at every broker (its
// forwards verified by the owners with the control plane's JWKS too); each broker's own
// admin token (signed by its local key for tenant default, which the control plane also
// holds, under another key) still works for its admin API, and is refused as a client
// token at every broker.
func TestClusterModeForwardingWithAuth(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startForwardingCluster(ctx, t, true)
	c.checkAll(ctx)
	b0 := c.f.brokers[0]
	if code, out := call(ctx, t, "POST", "http://"+b0.addr+"/v1/tenants/"+localTenant+"/namespaces", c.admin[b0.id],
		map[string]any{"namespace": "ops"}, nil); code != http.StatusCreated {
		t.Fatalf("a namespace of tenant %s through %s's admin API with its own admin token: %d %s", localTenant, b0.id, code, out)
	}
	for _, owner := range c.f.brokers {
		for _, at := range c.f.brokers {
			cl, err := client.Dial(ctx, at.addr, client.WithFingerprint(c.f.cert.Fingerprint), client.WithTenant(localTenant),
				client.WithNamespace(localTenant), client.WithToken(c.admin[owner.id]), client.WithDialTimeout(5*time.Second))
			if err == nil {
				_ = cl.Close()
			}
			if !errors.Is(err, client.ErrUnauthorized) {
				t.Fatalf("%s's own admin token as a client token at %s: %v, want unauthorized", owner.id, at.id, err)
			}
		}
	}
}

// checkAll runs the forwarding checks in order.
func (c *fwdCluster) checkAll(ctx context.Context) {
	sent := c.publishThroughEvery(ctx)
	c.readBack(ctx, sent)
	c.checkCache(ctx)
	c.checkRedirect(ctx)
	c.checkRoutes(ctx)
}

// startForwardingCluster starts the control plane and three brokers (auth on or off),
// creates the tenant, namespace, stream and cache (through broker 0's admin API with auth
// off, on the control plane with its admin token with auth on) and waits until every broker's table holds their
// placement and each leader opened its shards.
func startForwardingCluster(ctx context.Context, t *testing.T, authOn bool) *fwdCluster {
	f := startControlPlane(ctx, t)
	if authOn {
		f.env = []string{"FELIX_AUTH=on"}
	}
	c := &fwdCluster{f: f, leaders: map[uint32]string{}, addr: map[string]string{}, byID: map[string]*brokerProc{},
		admin: map[string]string{}}
	for i := range 3 {
		b := f.startBroker(ctx, i)
		c.byID[b.id] = b
		if authOn {
			c.admin[b.id] = adminToken(t, b)
		}
	}
	base, tok := "http://"+f.brokers[0].addr, "" // auth off: through broker 0's admin API
	if authOn {                                  // a broker's admin token manages only its own tenant: the control plane's admin token
		base, tok = f.cpURL, f.token
	}
	ns := base + "/v1/tenants/" + tenant + "/namespaces/" + namespace
	for _, p := range []string{"/v1/tenants", "/v1/tenants/" + tenant + "/namespaces"} {
		if code, out := call(ctx, t, "POST", base+p, tok, map[string]any{"tenant_id": tenant, "namespace": namespace}, nil); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", base+p, code, out)
		}
	}
	var st meta.Stream
	if code, out := call(ctx, t, "POST", ns+"/streams", tok, map[string]any{"stream": fwdStream, "shards": fwdShards,
		"replication_factor": 3}, &st); code != http.StatusCreated {
		t.Fatalf("create the stream: %d %s", code, out)
	}
	var ca meta.Cache
	if code, out := call(ctx, t, "POST", ns+"/caches", tok, map[string]any{"cache": fwdCache, "shards": 1}, &ca); code != http.StatusCreated {
		t.Fatalf("create the cache: %d %s", code, out)
	}
	c.routing = core.RoutingModulo
	if st.Routing == "jump_hash" {
		c.routing = core.RoutingJumpHash
	}
	if authOn {
		c.token = c.issueToken(ctx)
	}
	c.waitPlaced(ctx, max(st.CreatedIndex, ca.CreatedIndex))
	return c
}

// adminToken is broker b's own admin token (the file its ready file names).
func adminToken(t *testing.T, b *brokerProc) string {
	t.Helper()
	var ready broker.ReadyInfo
	if err := b.proc.ReadyJSON(&ready); err != nil || ready.AdminTokenFile == "" {
		t.Fatalf("%s's ready file: %+v %v", b.id, ready, err)
	}
	data, err := os.ReadFile(ready.AdminTokenFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// issueToken creates tenant default on the control plane too (so a broker's own admin
// token names a tenant the control plane holds, under another key) and issues the
// clients' token for tenant t1.
func (c *fwdCluster) issueToken(ctx context.Context) string {
	t := c.f.t
	if code, out := call(ctx, t, "POST", c.f.cpURL+"/v1/tenants", c.f.token, map[string]any{"tenant_id": localTenant}, nil); code != http.StatusCreated {
		t.Fatalf("create tenant %s on the control plane: %d %s", localTenant, code, out)
	}
	obj := tenant + "/" + namespace + "/*"
	req := rest.TokenRequest{Subject: "e2e-client", TTLSeconds: 600, Permissions: []string{
		"stream.publish:stream:" + obj, "stream.subscribe:stream:" + obj, "cache.read:cache:" + obj, "cache.write:cache:" + obj}}
	var tb rest.TokenBody
	if code, out := call(ctx, t, "POST", c.f.cpURL+"/v1/tenants/"+tenant+"/tokens", c.f.token, req, &tb); code != http.StatusOK || tb.Token == "" {
		t.Fatalf("issue a token on the control plane: %d %s", code, out)
	}
	return tb.Token
}

// waitPlaced reads the control plane's placement of the stream and the cache, then waits
// until every broker's table holds it (after its feed reached minSeq) and each leader
// opened its shards.
func (c *fwdCluster) waitPlaced(ctx context.Context, minSeq uint64) {
	t := c.f.t
	var snap snapshotBody
	if code, out := call(ctx, t, "GET", c.f.cpURL+"/v1/snapshot", "", nil, &snap); code != 200 {
		t.Fatalf("snapshot: %d %s", code, out)
	}
	want := map[string]string{} // shard key → leader
	for _, a := range snap.Assignments {
		switch {
		case a.Kind == "stream" && a.Name == fwdStream:
			c.leaders[a.Shard] = a.Leader
		case a.Kind == "cache" && a.Name == fwdCache:
			c.cacheBy = a.Leader
		default:
			continue
		}
		want[a.Key()] = a.Leader
	}
	if len(c.leaders) != fwdShards || c.cacheBy == "" {
		t.Fatalf("the control plane's placement: %+v", snap.Assignments)
	}
	for _, b := range snap.Brokers {
		c.addr[b.NodeID] = b.ClientAddr
	}
	for _, b := range c.f.brokers {
		waitFor(t, 30*time.Second, b.id+"'s table holding the placement, the leaders' shards open", func() bool {
			v := c.f.view(ctx, b, minSeq, 5*time.Second)
			held := 0
			for _, row := range v.Ownership {
				if l, ok := want[row.Shard]; ok && l == row.Leader {
					held++
				}
			}
			led := 0
			for _, o := range v.Open {
				if l, ok := want[o.Shard]; ok && l == b.id && o.Role == "leader" {
					led++
				}
			}
			return held == len(want) && led == c.ledBy(b.id, want)
		})
	}
	t.Logf("placement: stream leaders %v, cache leader %s", c.leaders, c.cacheBy)
}

func (c *fwdCluster) ledBy(id string, want map[string]string) int {
	n := 0
	for _, l := range want {
		if l == id {
			n++
		}
	}
	return n
}

// dial connects to addr as the clients do (the control plane's token with auth on).
func (c *fwdCluster) dial(ctx context.Context, addr string, opts ...client.Option) *client.Client {
	c.f.t.Helper()
	all := append([]client.Option{client.WithFingerprint(c.f.cert.Fingerprint), client.WithTenant(tenant),
		client.WithNamespace(namespace), client.WithDialTimeout(5 * time.Second)}, opts...)
	if c.token != "" {
		all = append(all, client.WithToken(c.token))
	}
	cl, err := client.Dial(ctx, addr, all...)
	if err != nil {
		c.f.t.Fatalf("dial %s: %v", addr, err)
	}
	c.f.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// publishThroughEvery publishes, through each broker, fwdPerShard keyed records to each
// shard (keys chosen by the stream's routing), checks each answer names the key's shard,
// and checks each broker forwarded exactly the records of the shards it does not lead.
// It returns the payloads sent per shard.
func (c *fwdCluster) publishThroughEvery(ctx context.Context) map[uint32]map[string]bool {
	t := c.f.t
	sent := map[uint32]map[string]bool{}
	for s := range uint32(fwdShards) {
		sent[s] = map[string]bool{}
	}
	for _, b := range c.f.brokers {
		pub, err := c.dial(ctx, b.addr).NewPublisher(fwdStream, client.PublisherOptions{})
		if err != nil {
			t.Fatal(err)
		}
		forwarded, per := 0, map[uint32]int{}
		for k := 0; len(per) < fwdShards || !allAt(per, fwdPerShard); k++ {
			key := fmt.Sprintf("%s-key-%d", b.id, k)
			shard := uint32(core.RouteKey(c.routing, []byte(key), fwdShards))
			if per[shard] == fwdPerShard {
				continue
			}
			res, err := pub.PublishKeyedSync(ctx, []byte(key), []byte(key))
			if err != nil || (res.HasShard && res.Shard != shard) {
				t.Fatalf("publish key %s (shard %d, leader %s) through %s: %+v %v", key, shard, c.leaders[shard], b.id, res, err)
			}
			per[shard]++
			sent[shard][key] = true
			if c.leaders[shard] != b.id {
				forwarded++
			}
		}
		_ = pub.Close(ctx)
		if got := metricSum(t, b, `felix_broker_forwards_total{op="publish",outcome="ack"`); got != forwarded {
			t.Fatalf("%s forwarded %d acknowledged publishes, want %d (the records of the shards it does not lead)", b.id, got, forwarded)
		}
	}
	return sent
}

func allAt(per map[uint32]int, n int) bool {
	for _, v := range per {
		if v != n {
			return false
		}
	}
	return true
}

// readBack subscribes to each shard at its leader from the earliest record and checks it
// holds exactly the records sent to it.
func (c *fwdCluster) readBack(ctx context.Context, sent map[uint32]map[string]bool) {
	t := c.f.t
	for shard, keys := range sent {
		leader := c.byID[c.leaders[shard]]
		sub, err := c.dial(ctx, leader.addr).Subscribe(ctx, fwdStream, client.Earliest, client.SubscribeOptions{Shards: []uint32{shard}})
		if err != nil {
			t.Fatalf("subscribe to shard %d at its leader %s: %v", shard, leader.id, err)
		}
		got := map[string]bool{}
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		for len(got) < len(keys) {
			rec, err := sub.Next(rctx)
			if err != nil {
				t.Fatalf("shard %d at %s after %d of %d records: %v", shard, leader.id, len(got), len(keys), err)
			}
			if !keys[string(rec.Payload)] || got[string(rec.Payload)] || rec.Shard != shard {
				t.Fatalf("shard %d at %s: unexpected record %q (shard %d)", shard, leader.id, rec.Payload, rec.Shard)
			}
			got[string(rec.Payload)] = true
		}
		cancel()
		_ = sub.Close()
	}
}

// checkCache puts a value through a broker that does not lead the cache's shard, reads it
// through another non-owner and at the owner, and checks the first non-owner forwarded.
func (c *fwdCluster) checkCache(ctx context.Context) {
	t := c.f.t
	var others []*brokerProc
	for _, b := range c.f.brokers {
		if b.id != c.cacheBy {
			others = append(others, b)
		}
	}
	if err := c.dial(ctx, others[0].addr).Put(ctx, fwdCache, "user-1", []byte("v1"), 0); err != nil {
		t.Fatalf("cache put through the non-owner %s (owner %s): %v", others[0].id, c.cacheBy, err)
	}
	for _, b := range []*brokerProc{others[1], c.byID[c.cacheBy]} {
		v, found, err := c.dial(ctx, b.addr).Get(ctx, fwdCache, "user-1")
		if err != nil || !found || string(v) != "v1" {
			t.Fatalf("cache get through %s (owner %s): %q %v %v", b.id, c.cacheBy, v, found, err)
		}
	}
	if got := metricSum(t, others[0], `felix_broker_forwards_total{op="cache",outcome="ack"`); got != 1 {
		t.Fatalf("%s forwarded %d acknowledged cache operations, want 1", others[0].id, got)
	}
}

// checkRedirect subscribes to shard 0 at a broker that does not lead it: the broker
// answers not_leader (counted), the SDK follows to the leader (logged) and reads the
// shard's first record.
func (c *fwdCluster) checkRedirect(ctx context.Context) {
	t := c.f.t
	var at *brokerProc
	for _, b := range c.f.brokers {
		if b.id != c.leaders[0] {
			at = b
			break
		}
	}
	logs := &captured{}
	cl := c.dial(ctx, at.addr, client.WithLogger(slog.New(logs)))
	sub, err := cl.Subscribe(ctx, fwdStream, client.Earliest, client.SubscribeOptions{Shards: []uint32{0}})
	if err != nil {
		t.Fatalf("subscribe to shard 0 at the non-owner %s: %v", at.id, err)
	}
	defer sub.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if rec, err := sub.Next(rctx); err != nil || rec.Shard != 0 {
		t.Fatalf("the redirected subscription's first record: %+v %v", rec, err)
	}
	want := fmt.Sprintf("owner=%s address=%s", c.leaders[0], c.addr[c.leaders[0]])
	if !logs.has(redirectedLog, want) {
		t.Fatalf("the SDK did not log %q with %q: %v", redirectedLog, want, logs.lines())
	}
	if got := metricSum(t, at, "felix_broker_redirects_sent_total"); got < 1 {
		t.Fatalf("%s sent %d redirects, want ≥ 1", at.id, got)
	}
}

// checkRoutes asks route_lookup at every broker: each shard's owner is its leader, with
// the leader's client address as registered with the control plane.
func (c *fwdCluster) checkRoutes(ctx context.Context) {
	t := c.f.t
	for _, b := range c.f.brokers {
		rt, err := c.dial(ctx, b.addr).Routes(ctx, fwdStream)
		if err != nil || len(rt.Shards) != fwdShards {
			t.Fatalf("route_lookup at %s: %+v %v", b.id, rt, err)
		}
		for _, r := range rt.Shards {
			if r.Owner != c.leaders[r.Shard] || r.Address != c.addr[r.Owner] {
				t.Fatalf("route_lookup at %s: shard %d names %s at %q, want %s at %q",
					b.id, r.Shard, r.Owner, r.Address, c.leaders[r.Shard], c.addr[c.leaders[r.Shard]])
			}
		}
		key := []byte("route-key")
		if s, ok := rt.ShardOf(key); !ok || int(s) != core.RouteKey(c.routing, key, fwdShards) {
			t.Fatalf("route_lookup at %s: the table's routing %q sends a key to %d", b.id, rt.Routing, s)
		}
	}
}

// metricSum is the sum of broker b's /metrics samples whose line starts with prefix.
func metricSum(t *testing.T, b *brokerProc, prefix string) int {
	t.Helper()
	resp, err := http.Get("http://" + b.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("%s /metrics: %q: %v", b.id, line, err)
		}
		sum += v
	}
	return int(sum)
}

// captured is a slog.Handler keeping each record as "message k=v ...".
type captured struct {
	mu  sync.Mutex
	got []string
}

func (h *captured) Enabled(context.Context, slog.Level) bool { return true }

func (h *captured) Handle(_ context.Context, r slog.Record) error {
	var sb strings.Builder
	sb.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, sb.String())
	return nil
}

func (h *captured) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captured) WithGroup(string) slog.Handler      { return h }

func (h *captured) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// has reports whether a record starts with msg and contains sub.
func (h *captured) has(msg, sub string) bool {
	for _, l := range h.lines() {
		if strings.HasPrefix(l, msg) && strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

package broker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/auth"
	cforward "felix/cluster/forward"
	"felix/cluster/transport"
	"felix/core"
	"felix/proto"
)

// keyToShard returns a key a modulo stream of shards shards routes to shard.
func keyToShard(t *testing.T, shard, shards int) []byte {
	t.Helper()
	for i := range 10000 {
		k := []byte(fmt.Sprintf("k%d", i))
		if core.RouteKey(core.RoutingModulo, k, shards) == shard {
			return k
		}
	}
	t.Fatalf("no key for shard %d", shard)
	return nil
}

// shardLedBy returns a shard of stream (shards shards) srv's table says node leads.
func shardLedBy(t *testing.T, srv *Server, stream string, shards int, node string) int {
	t.Helper()
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: stream}
	for i := range shards {
		if leaderOf(t, srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: i}) == node {
			return i
		}
	}
	t.Fatalf("%s leads no shard of %s", node, stream)
	return 0
}

// holdTable installs change(table) on srv and keeps it (the placement no longer refills it).
func holdTable(srv *Server, change func(Ownership)) {
	owners, _ := srv.owners.Snapshot()
	stale := maps.Clone(owners)
	change(stale)
	srv.fwd.holdTable(stale)
}

func wantMetric(t *testing.T, b *internalBroker, lines ...string) {
	t.Helper()
	text := b.metricsText(t)
	for _, l := range lines {
		if !strings.Contains(text, l+"\n") {
			t.Errorf("%s /metrics lacks %q", b.srv.cfg.NodeID, l)
		}
	}
}

// An ingress whose table points at the wrong broker converges through NotLeader: the
// wrong broker names the owner (same generation 0, not yet tried: followed), the owner
// appends, two attempts. Two stale tables pointing at each other are refused as a loop:
// publish_error shard_unavailable, nothing written.
func TestStaleTableConvergesViaNotLeader(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 6})
	a, b, owner := c.brokers[0], c.brokers[1], c.brokers[2]
	shard := shardLedBy(t, a.srv, "s", 6, owner.srv.cfg.NodeID)
	ref := core.ShardRef{Kind: core.ShardStream, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "s"}, Shard: shard}
	holdTable(a.srv, func(o Ownership) { o[ref] = Assignment{Leader: b.srv.cfg.NodeID} })
	r := dialClient(t, a.srv, "")
	key := keyToShard(t, shard, 6)
	ok, isOK := r.publishKeyed("s", key, 1, "x").(*proto.PublishOK)
	if !isOK || ok.Shard == nil || int(*ok.Shard) != shard || *ok.FirstOffset != 0 {
		t.Fatalf("publish through a stale table: %#v", ok)
	}
	wantMetric(t, a, "felix_broker_forward_attempts_sum 2", "felix_broker_forward_attempts_count 1",
		"felix_broker_forward_loops_refused_total 0")
	wantMetric(t, b, `felix_broker_forwards_served_total{verdict="NotLeader"} 1`)

	holdTable(b.srv, func(o Ownership) { o[ref] = Assignment{Leader: a.srv.cfg.NodeID} })
	pe, isErr := r.publishKeyed("s", key, 2, "y").(*proto.PublishError)
	if !isErr || pe.Code != proto.CodeShardUnavailable || !strings.Contains(pe.Message, "loop") {
		t.Fatalf("publish between two tables pointing at each other: %#v, want shard_unavailable (loop)", pe)
	}
	wantMetric(t, a, "felix_broker_forward_loops_refused_total 1",
		`felix_broker_forwards_total{op="publish",outcome="fail",reason="loop"} 1`)
	if info, _ := owner.srv.engine.StreamInfo(ref.Name); info.NextOffsets[shard] != 1 {
		t.Fatalf("the owner's shard holds %d records, want 1", info.NextOffsets[shard])
	}
}

// The owner down: a forward outstanding when the owner's connection drops is answered
// indeterminate (never failed, never retried; and never acked early, although
// FELIX_ACK_ON_COMMIT is false here: the first answer the client reads is that
// indeterminate); an owner that cannot be reached is retried
// within the attempt budget (3 here), then the publish fails shard_unavailable.
func TestForwardOwnerDown(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 2})
	a, b := c.brokers[0], c.brokers[1]
	shard := shardLedBy(t, a.srv, "s", 2, b.srv.cfg.NodeID)
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	b.srv.Internal().Dispatcher.Register(proto.KindAuthorizedForwardPublish, func(context.Context, string, proto.InternalMessage) proto.InternalMessage {
		close(entered)
		<-release
		return nil
	})
	a.srv.fwd.opts = cforward.Options{Attempts: 3} // each dial of the gone owner may wait out the 5 s handshake timeout
	r := dialClient(t, a.srv, "")
	key := keyToShard(t, shard, 2)
	id := uint64(1)
	r.send(&proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: "s", Key: key,
		Payloads: [][]byte{[]byte("x")}, RequestID: &id, Ack: proto.JSONAckPerBatch})
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the forward never reached the owner")
	}
	go b.srv.internal.listener.Close() // the owner's connections drop with the request outstanding
	if pe, ok := r.next().(*proto.PublishError); !ok || pe.Code != proto.CodeIndeterminate {
		t.Fatalf("forward dropped mid-request: %#v, want indeterminate", pe)
	}
	wantMetric(t, a, `felix_broker_forwards_total{op="publish",outcome="indeterminate",reason="dropped"} 1`)
	if pe, ok := r.publishKeyed("s", key, 2, "y").(*proto.PublishError); !ok || pe.Code != proto.CodeShardUnavailable {
		t.Fatalf("owner unreachable: %#v, want shard_unavailable after the retries", pe)
	}
	wantMetric(t, a, `felix_broker_forwards_total{op="publish",outcome="fail",reason="budget"} 1`,
		"felix_broker_forward_attempts_sum 4")
}

// sharedKeys bootstraps one key store and copies it into the data dirs dir/0 .. dir/n-1,
// so that a token verifies on every broker (a cluster shares its tenants' keys).
func sharedKeys(t *testing.T, dir string, n int) {
	t.Helper()
	if _, err := auth.Bootstrap(auth.BootstrapOptions{DataDir: filepath.Join(dir, "keys")}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(auth.KeyStorePath(filepath.Join(dir, "keys")))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		p := auth.KeyStorePath(filepath.Join(dir, fmt.Sprint(i)))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// With auth on, a forward carries the client's own token and the owner verifies it as a
// direct request: a client's publish through a non-owner is acked; forwards whose
// credential is forged, signed by other keys, lacks stream.publish, or is absent (the
// legacy kind) are refused Unauthorized in the request's shape with nothing written.
func TestForwardCredentials(t *testing.T) {
	dir := t.TempDir()
	sharedKeys(t, dir, 2)
	c := startCluster(t, 2, map[string]string{"FELIX_AUTH": "on", "FELIX_DURABLE_STORAGE_DIR": filepath.Join(dir, "{i}")})
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 2})
	c.create("/v1/tenants/default/namespaces/default/caches", map[string]any{"cache": "c", "shards": 2})
	a, b := c.brokers[0], c.brokers[1]
	shard := shardLedBy(t, a.srv, "s", 2, b.srv.cfg.NodeID)
	_, cacheShard := keyOn(t, a.srv, "c", 2, b.srv.cfg.NodeID, "k")
	publisher := issue(t, filepath.Join(dir, "keys"), "stream.publish:stream:default/default/*")
	r := dialClient(t, a.srv, publisher)
	if ok, isOK := r.publishKeyed("s", keyToShard(t, shard, 2), 1, "x").(*proto.PublishOK); !isOK || *ok.FirstOffset != 0 {
		t.Fatalf("publish with a valid token through a non-owner: %#v", ok)
	}
	other := t.TempDir()
	if _, err := auth.Bootstrap(auth.BootstrapOptions{DataDir: other}); err != nil {
		t.Fatal(err)
	}
	for name, cred := range map[string]string{"forged": "not-a-token", "other keys": issue(t, other, "stream.publish:stream:default/default/*"),
		"lacks the action": issue(t, filepath.Join(dir, "keys"), "cache.read:cache:default/default/*")} {
		refusedUnauthorized(t, b, shard, cacheShard, name, cred)
	}
	refusedUnauthorized(t, b, shard, cacheShard, "legacy kind, no credential", "")
	if info, _ := b.srv.engine.StreamInfo(core.StreamName{Tenant: "default", Namespace: "default", Stream: "s"}); info.NextOffsets[shard] != 1 {
		t.Fatalf("refused forwards wrote: shard %d holds %d records, want 1", shard, info.NextOffsets[shard])
	}
	wantMetric(t, b, `felix_broker_forwards_served_total{verdict="Unauthorized"} 7`)
}

func issue(t *testing.T, dataDir, perm string) string {
	t.Helper()
	tok, err := auth.IssueToken(dataDir, "default", "client", []string{perm}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// refusedUnauthorized sends the owner b a publish forward (kind 22 with cred, or the legacy
// 2 when cred is empty) and, for a credential, a cache put forward (23): both must be
// refused Unauthorized in their own shapes.
func refusedUnauthorized(t *testing.T, b *internalBroker, shard, cacheShard int, name, cred string) {
	t.Helper()
	p := testPeer(t)
	to := transport.Peer{NodeID: b.srv.cfg.NodeID, Addr: b.srv.InternalAddr().String()}
	ref := proto.ShardRef{Tenant: []byte("default"), Namespace: []byte("default"), Name: []byte("s"), Shard: uint32(shard)}
	fp := proto.ForwardPublish{Shard: ref, Payloads: [][]byte{[]byte("forged")}}
	var req proto.InternalMessage = &fp
	if cred != "" {
		req = &proto.AuthorizedForwardPublish{ForwardPublish: fp, Credential: []byte(cred)}
	}
	ans, err := p.Request(testCtx(t), to, req)
	if e, ok := ans.(*proto.ForwardPublishError); err != nil || !ok || e.Code != proto.InternalUnauthorized {
		t.Errorf("%s publish forward: %#v %v, want ForwardPublishError Unauthorized", name, ans, err)
	}
	if cred == "" {
		return
	}
	cref := proto.ShardRef{Tenant: []byte("default"), Namespace: []byte("default"), Name: []byte("c"), Shard: uint32(cacheShard)}
	ans, err = p.Request(testCtx(t), to, &proto.AuthorizedForwardCacheOp{ForwardCacheOp: proto.ForwardCacheOp{Shard: cref,
		Op: proto.CacheOpPut, Key: []byte("k"), Value: []byte("v")}, Credential: []byte(cred)})
	if e, ok := ans.(*proto.ForwardCacheError); err != nil || !ok || e.Code != proto.InternalUnauthorized {
		t.Errorf("%s cache forward: %#v %v, want ForwardCacheError Unauthorized", name, ans, err)
	}
}

// A drain does not wait out a forward's backoff schedule: an owner answering Overload is
// retried after 1 s backoffs (16 attempts), the ingress drains after the first answer and
// the forward ends at once, failed shard_unavailable (no attempt outcome was unknown), and
// the drain is clean.
func TestDrainEndsForwardRetries(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 2})
	a, b := c.brokers[0], c.brokers[1]
	shard := shardLedBy(t, a.srv, "s", 2, b.srv.cfg.NodeID)
	b.srv.Internal().Dispatcher.Register(proto.KindAuthorizedForwardPublish, func(_ context.Context, _ string, m proto.InternalMessage) proto.InternalMessage {
		return &proto.ForwardPublishError{CorrelationID: m.Correlation(), Code: proto.InternalOverload}
	})
	a.srv.fwd.opts = cforward.Options{Attempts: 16, Backoff: time.Second, MaxBackoff: time.Second}
	r := dialClient(t, a.srv, "")
	id := uint64(1)
	r.send(&proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: "s", Key: keyToShard(t, shard, 2),
		Payloads: [][]byte{[]byte("x")}, RequestID: &id, Ack: proto.JSONAckPerBatch})
	waitUntil(t, 20*time.Second, "the owner's first Overload", func() bool {
		return strings.Contains(b.metricsText(t), `felix_internal_listener_requests_total{kind="AuthorizedForwardPublish"} 1`)
	})
	start := time.Now()
	answered := make(chan proto.Message, 1)
	go func() { // not r.next: no t.Fatal off the test goroutine
		_ = r.st.SetReadDeadline(time.Now().Add(20 * time.Second))
		var m proto.Message
		if _, body, err := proto.ReadFrame(r.st, nil, 1<<24); err == nil {
			m, _ = proto.DecodeMessage(body)
		}
		answered <- m
	}()
	if err := a.stop(); err != nil {
		t.Fatalf("drain with a forward in its backoff: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the drain took %v: it waited out the forward's retries", d)
	}
	if pe, ok := (<-answered).(*proto.PublishError); !ok || pe.Code != proto.CodeShardUnavailable {
		t.Fatalf("forward ended by the drain: %#v, want shard_unavailable", pe)
	}
}

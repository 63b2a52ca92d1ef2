package broker

import (
	"fmt"
	"strings"
	"testing"

	"felix/core"
	"felix/core/cache"
	"felix/proto"
)

// keyOn returns a key (prefix-N) of cache name (shards shards) on a shard srv's table says node leads.
func keyOn(t *testing.T, srv *Server, name string, shards uint32, node, prefix string) (string, int) {
	t.Helper()
	for i := range 1000 {
		k := fmt.Sprintf("%s-%d", prefix, i)
		shard := int(cache.ShardOf([]byte(k), shards))
		ref := core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: name}, Shard: shard}
		if leaderOf(t, srv, ref) == node {
			return k, shard
		}
	}
	t.Fatalf("no key of %s led by %s", name, node)
	return "", 0
}

// Cache put/get/delete and counter add/get through a broker that does not lead the key's
// shard are answered in their own shapes from the owner's answer; the owner holds the
// state (a direct get on it agrees) and the ingress holds nothing.
func TestForwardedCacheOps(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.create("/v1/tenants/default/namespaces/default/caches", map[string]any{"cache": "sessions", "shards": 4})
	for _, ingress := range c.brokers {
		for _, other := range c.brokers {
			if other == ingress {
				continue
			}
			key, _ := keyOn(t, ingress.srv, "sessions", 4, other.srv.cfg.NodeID, ingress.srv.cfg.NodeID)
			cacheRoundTrip(t, dialClient(t, ingress.srv, ""), key, ingress.srv.cfg.NodeID+"->"+other.srv.cfg.NodeID)
			direct := dialClient(t, other.srv, "")
			id := uint64(99)
			direct.send(&proto.CounterGet{TenantID: "default", Namespace: "default", Cache: "sessions", Key: key, RequestID: &id})
			if v, ok := direct.next().(*proto.CounterValue); !ok || v.Value != 3 {
				t.Fatalf("the owner's own counter for %s: %#v, want 3", key, v)
			}
		}
		if strings.Contains(ingress.metricsText(t), `felix_broker_forwards_total{op="cache",outcome="fail"`) {
			t.Errorf("%s: a cache forward failed", ingress.srv.cfg.NodeID)
		}
	}
}

// cacheRoundTrip runs put, get, delete, get, add 5, add -2, get through r on key.
func cacheRoundTrip(t *testing.T, r *rawStream, key, where string) {
	t.Helper()
	id := uint64(0)
	next := func() *uint64 { id++; v := id; return &v }
	ns := func() (string, string, string) { return "default", "default", "sessions" }
	tn, n, cn := ns()
	r.send(&proto.CachePut{TenantID: tn, Namespace: n, Cache: cn, Key: key, Value: []byte("v1"), RequestID: next()})
	if m, ok := r.next().(*proto.CacheOK); !ok || m.RequestID != id {
		t.Fatalf("%s put: %#v", where, m)
	}
	r.send(&proto.CacheGet{TenantID: tn, Namespace: n, Cache: cn, Key: key, RequestID: next()})
	if m, ok := r.next().(*proto.CacheValue); !ok || string(m.Value) != "v1" || *m.RequestID != id {
		t.Fatalf("%s get: %#v", where, m)
	}
	r.send(&proto.CacheDelete{TenantID: tn, Namespace: n, Cache: cn, Key: key, RequestID: next()})
	if m, ok := r.next().(*proto.CacheDeleted); !ok || string(m.Value) != "v1" {
		t.Fatalf("%s delete: %#v", where, m)
	}
	r.send(&proto.CacheGet{TenantID: tn, Namespace: n, Cache: cn, Key: key, RequestID: next()})
	if m, ok := r.next().(*proto.CacheValue); !ok || m.Value != nil {
		t.Fatalf("%s get after delete: %#v, want null", where, m)
	}
	r.send(&proto.CounterGet{TenantID: tn, Namespace: n, Cache: cn, Key: key, RequestID: next()})
	if m, ok := r.next().(*proto.CounterValue); !ok || m.IsFound() || m.Value != 0 || *m.RequestID != id {
		t.Fatalf("%s counter get before any add: %#v, want found=false", where, m)
	}
	for _, d := range []int64{5, -2} {
		r.send(&proto.CounterAdd{TenantID: tn, Namespace: n, Cache: cn, Key: key, Delta: d, RequestID: next()})
		if m, ok := r.next().(*proto.CounterValue); !ok || (d == 5 && m.Value != 5) || (d == -2 && m.Value != 3) {
			t.Fatalf("%s counter add %d: %#v", where, d, m)
		}
	}
	r.send(&proto.CounterGet{TenantID: tn, Namespace: n, Cache: cn, Key: key, RequestID: next()})
	if m, ok := r.next().(*proto.CounterValue); !ok || m.Value != 3 || !m.IsFound() || m.Found != nil {
		t.Fatalf("%s counter get: %#v", where, m)
	}
}

// A subscribe to a shard another broker leads is answered not_leader, never served: the
// not_leader message (owner node id, client address, generation) for a client that listed
// redirects, else error{code: not_leader} naming them; a shard led here subscribes.
func TestSubscribeRedirected(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "events", "shards": 4})
	a, b := c.brokers[0], c.brokers[1]
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: "events"}
	var remote, local uint32
	for i := uint32(0); i < 4; i++ {
		if leaderOf(t, a.srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: int(i)}) == b.srv.cfg.NodeID {
			remote = i
		} else {
			local = i
		}
	}
	r := dialClient(t, a.srv, "", proto.FeatureRedirects)
	r.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "events", Shard: &remote})
	nl, ok := r.next().(*proto.NotLeader)
	if !ok || nl.Owner.NodeID != b.srv.cfg.NodeID || nl.Owner.Address != b.srv.QUICAddr().String() || nl.Shard != remote || nl.Generation != 0 {
		t.Fatalf("subscribe to shard %d led by %s: %#v", remote, b.srv.cfg.NodeID, nl)
	}
	plain := dialClient(t, a.srv, "")
	plain.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "events", Shard: &remote})
	e, ok := plain.next().(*proto.Error)
	if !ok || e.Code != proto.CodeNotLeader || !strings.Contains(e.Message, b.srv.cfg.NodeID) ||
		!strings.Contains(e.Message, b.srv.QUICAddr().String()) || !strings.Contains(e.Message, "generation 0") {
		t.Fatalf("subscribe without redirects: %#v", e)
	}
	plain.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "events", Shard: &local})
	if m, ok := plain.next().(*proto.Subscribed); !ok {
		t.Fatalf("subscribe to shard %d led here: %#v", local, m)
	}
	if !strings.Contains(a.metricsText(t), "felix_broker_redirects_sent_total 2\n") {
		t.Error("redirects_sent is not 2")
	}
}

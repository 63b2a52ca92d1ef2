package broker

import (
	"strings"
	"testing"

	"felix/core"
	"felix/proto"
)

// shardsLedBy splits the shards 0..n-1 of ref's stream or cache by whether srv's table
// names node as their leader.
func shardsLedBy(t *testing.T, srv *Server, ref core.ShardRef, n int, node string) (led, other []uint32) {
	t.Helper()
	for i := range n {
		ref.Shard = i
		if leaderOf(t, srv, ref) == node {
			led = append(led, uint32(i))
		} else {
			other = append(other, uint32(i))
		}
	}
	if len(led) == 0 || len(other) == 0 {
		t.Fatalf("%d shards of %v: led by %s %v, others %v", n, ref.Name, node, led, other)
	}
	return led, other
}

// wantNotLeader checks m is the not_leader answer to request id naming owner.
func wantNotLeader(t *testing.T, what string, m proto.Message, id uint64, owner *internalBroker, shard uint32) {
	t.Helper()
	nl, ok := m.(*proto.NotLeader)
	if !ok || nl.RequestID == nil || *nl.RequestID != id || nl.Owner.NodeID != owner.srv.cfg.NodeID ||
		nl.Owner.Address != owner.srv.QUICAddr().String() || nl.Shard != shard {
		t.Fatalf("%s: %#v, want not_leader{request_id %d, %s at %s, shard %d}", what, m, id, owner.srv.cfg.NodeID, owner.srv.QUICAddr(), shard)
	}
}

// Consumer-group operations on a stream shard another broker leads are answered
// not_leader with their request_id and the leader's node id and client address (the
// error form without the redirects feature); on a shard led here they are served.
func TestGroupOpsRedirected(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "work", "shards": 4})
	a, b := c.brokers[0], c.brokers[1]
	ref := core.ShardRef{Kind: core.ShardStream, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "work"}}
	led, other := shardsLedBy(t, a.srv, ref, 4, a.srv.cfg.NodeID)
	r := dialClient(t, a.srv, "", proto.FeatureRedirects, proto.FeatureGroups)
	tn, ns := "default", "default"
	reqs := []proto.Message{
		&proto.GroupPoll{TenantID: tn, Namespace: ns, Stream: "work", Shard: other[0], Group: "g", MaxRecords: 1, RequestID: 1},
		&proto.GroupAck{TenantID: tn, Namespace: ns, Stream: "work", Shard: other[0], Group: "g", Offsets: []uint64{0}, RequestID: 2},
		&proto.GroupNack{TenantID: tn, Namespace: ns, Stream: "work", Shard: other[0], Group: "g", Offsets: []uint64{0}, RequestID: 3},
		&proto.DeadLettersList{TenantID: tn, Namespace: ns, Stream: "work", Shard: other[0], Group: "g", Limit: 1, RequestID: 4},
		&proto.DeadLettersRedrive{TenantID: tn, Namespace: ns, Stream: "work", Shard: other[0], Group: "g", Offsets: []uint64{0}, RequestID: 5},
	}
	for i, m := range reqs {
		r.send(m)
		wantNotLeader(t, string(m.Type()), r.next(), uint64(i+1), b, other[0])
	}
	plain := dialClient(t, a.srv, "", proto.FeatureGroups)
	plain.send(reqs[0])
	if e, ok := plain.next().(*proto.Error); !ok || e.Code != proto.CodeNotLeader || e.RequestID == nil || *e.RequestID != 1 ||
		!strings.Contains(e.Message, b.srv.QUICAddr().String()) {
		t.Fatalf("group_poll without redirects: %#v", e)
	}
	r.send(&proto.GroupPoll{TenantID: tn, Namespace: ns, Stream: "work", Shard: led[0], Group: "g", MaxRecords: 1, RequestID: 9})
	if m, ok := r.next().(*proto.GroupRecords); !ok || m.RequestID != 9 {
		t.Fatalf("group_poll of shard %d led here: %#v", led[0], m)
	}
	if !strings.Contains(a.metricsText(t), "felix_broker_redirects_sent_total 6\n") {
		t.Error("redirects_sent is not 6")
	}
}

// A cache watch is redirected to the leader of its key's cache shard; a prefix watch of a
// one-shard cache led elsewhere is redirected too, and a prefix watch of a cache whose
// shards several brokers lead is refused malformed (no single broker can serve it); a key
// on a shard led here is watched here.
func TestCacheWatchRedirected(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create("/v1/tenants/default/namespaces/default/caches", map[string]any{"cache": "sessions", "shards": 4})
	c.create("/v1/tenants/default/namespaces/default/caches", map[string]any{"cache": "one", "shards": 1})
	a, b := c.brokers[0], c.brokers[1]
	oneRef := core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "one"}}
	if leaderOf(t, a.srv, oneRef) == a.srv.cfg.NodeID {
		a, b = b, a
	}
	remoteKey, shard := keyOn(t, a.srv, "sessions", 4, b.srv.cfg.NodeID, "k")
	localKey, _ := keyOn(t, a.srv, "sessions", 4, a.srv.cfg.NodeID, "k")
	r := dialClient(t, a.srv, "", proto.FeatureRedirects, proto.FeatureCacheWatch)
	watch := func(cache string, key, prefix *string, id uint64) proto.Message {
		r.send(&proto.CacheWatch{TenantID: "default", Namespace: "default", Cache: cache, Key: key, Prefix: prefix, RequestID: id})
		return r.next()
	}
	empty := ""
	wantNotLeader(t, "watch of a remote key", watch("sessions", &remoteKey, nil, 1), 1, b, uint32(shard))
	wantNotLeader(t, "prefix watch of a remote one-shard cache", watch("one", nil, &empty, 2), 2, b, 0)
	if e, ok := watch("sessions", nil, &empty, 3).(*proto.Error); !ok || e.Code != proto.CodeMalformed || !strings.Contains(e.Message, "several brokers") {
		t.Fatalf("prefix watch over shards of two brokers: %#v", e)
	}
	if m, ok := watch("sessions", &localKey, nil, 4).(*proto.CacheWatching); !ok || m.RequestID != 4 {
		t.Fatalf("watch of a key led here: %#v", m)
	}
}

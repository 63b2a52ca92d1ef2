package broker

import (
	"testing"

	"felix/core"
	"felix/proto"
)

// route_lookup names each shard's leader from the ownership table, with its client
// address and generation, and the stream's routing (modulo, jump_hash), on every broker
// alike; an unknown stream is refused
// not_found with the request id.
func TestRouteLookupNamesEachShardsLeader(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 4})
	c.create(streamsPath, map[string]any{"stream": "j", "shards": 3, "routing": "jump_hash"})
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: "s"}
	for _, b := range c.brokers {
		r := dialClient(t, b.srv, "", proto.FeatureRedirects)
		r.send(&proto.RouteLookup{TenantID: "default", Namespace: "default", Stream: "s", RequestID: 7})
		rt, ok := r.next().(*proto.Route)
		if !ok || rt.RequestID != 7 || len(rt.Shards) != 4 || rt.Routing != "modulo" {
			t.Fatalf("route_lookup on %s: %#v", b.srv.cfg.NodeID, rt)
		}
		leaders := map[string]bool{}
		for i, sr := range rt.Shards {
			leader := c.byID(leaderOf(t, b.srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: i}))
			if sr.Shard != uint32(i) || sr.Owner.NodeID != leader.srv.cfg.NodeID ||
				sr.Owner.Address != leader.srv.QUICAddr().String() || sr.Generation != 0 {
				t.Fatalf("shard %d: %#v, want %s at %s", i, sr, leader.srv.cfg.NodeID, leader.srv.QUICAddr())
			}
			leaders[sr.Owner.NodeID] = true
		}
		if len(leaders) != 2 {
			t.Fatalf("4 shards on 2 brokers all led by %v", leaders)
		}
		r.send(&proto.RouteLookup{TenantID: "default", Namespace: "default", Stream: "j", RequestID: 9})
		if rt, ok := r.next().(*proto.Route); !ok || len(rt.Shards) != 3 || rt.Routing != "jump_hash" {
			t.Fatalf("route_lookup of a jump-hash stream on %s: %#v", b.srv.cfg.NodeID, rt)
		}
		r.send(&proto.RouteLookup{TenantID: "default", Namespace: "default", Stream: "missing", RequestID: 8})
		e, ok := r.next().(*proto.Error)
		if !ok || e.Code != proto.CodeNotFound || e.RequestID == nil || *e.RequestID != 8 {
			t.Fatalf("route_lookup of a missing stream: %#v", e)
		}
	}
}

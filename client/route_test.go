package client

import (
	"slices"
	"testing"
)

// RouteLookup on a single node: every shard led by the broker asked (address ""); on a
// static cluster of three: each shard's leader with its client address, two shards each
// (6 shards, 3 brokers), the same answer from every broker; an unknown stream is
// ErrNotFound.
func TestRouteLookup(t *testing.T) {
	single := startBroker(t, "")
	if _, err := single.admin().CreateStream(testCtx(t), StreamInfo{Name: "r", Shards: 3}); err != nil {
		t.Fatal(err)
	}
	routes, err := single.dial().RouteLookup(testCtx(t), "r")
	if err != nil || len(routes) != 3 || routes[2].Shard != 2 || routes[0].Address != "" {
		t.Fatalf("single node: %+v %v", routes, err)
	}
	bs := startStaticCluster(t, 3)
	addrs := map[string]bool{}
	for _, b := range bs {
		addrs[b.info.QUICAddr] = true
		if _, err := b.admin().CreateStream(testCtx(t), StreamInfo{Name: "r", Shards: 6}); err != nil {
			t.Fatal(err)
		}
	}
	var first []ShardRoute
	for i, b := range bs {
		c := b.dial()
		routes, err := c.RouteLookup(testCtx(t), "r")
		if err != nil || len(routes) != 6 {
			t.Fatalf("broker %d: %+v %v", i, routes, err)
		}
		per := map[string]int{}
		for j, r := range routes {
			if r.Shard != uint32(j) || !addrs[r.Address] || r.Owner == "" || r.Generation != 0 {
				t.Fatalf("broker %d shard %d: %+v", i, j, r)
			}
			per[r.Address]++
		}
		if len(per) != 3 || per[b.info.QUICAddr] != 2 {
			t.Fatalf("broker %d: shards per owner %v, want 2 each", i, per)
		}
		if first == nil {
			first = routes
		} else if !slices.Equal(first, routes) {
			t.Fatalf("brokers disagree: %+v vs %+v", first, routes)
		}
		_, err = c.RouteLookup(testCtx(t), "missing")
		mustErrIs(t, err, ErrNotFound)
	}
}

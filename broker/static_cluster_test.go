package broker

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strings"
	"testing"

	"felix/core"
)

func TestParseClusterPeers(t *testing.T) {
	peers, err := ParseClusterPeers(" b.felix=127.0.0.1:7001/127.0.0.1:6001 , a.felix=10.0.0.1:7000/10.0.0.1:6000")
	if err != nil {
		t.Fatal(err)
	}
	want := []StaticPeer{{"b.felix", "127.0.0.1:7001", "127.0.0.1:6001"}, {"a.felix", "10.0.0.1:7000", "10.0.0.1:6000"}}
	if !slices.Equal(peers, want) {
		t.Fatalf("parsed %+v, want %+v", peers, want)
	}
	if got := formatPeers(peers); got != "b.felix=127.0.0.1:7001/127.0.0.1:6001,a.felix=10.0.0.1:7000/10.0.0.1:6000" {
		t.Fatalf("formatPeers = %q", got)
	}
	if p, err := ParseClusterPeers("  "); p != nil || err != nil {
		t.Fatalf("empty list: %v %v", p, err)
	}
	for _, bad := range []string{
		"a=127.0.0.1:1",                        // no client address
		"127.0.0.1:1/127.0.0.1:2",              // no node id
		"a_b=127.0.0.1:1/127.0.0.1:2",          // not a DNS name
		"a=127.0.0.1:1/127.0.0.1:2,A=h:3/h:4",  // the same node id twice (case)
		"a=127.0.0.1:0/127.0.0.1:2",            // port 0 is not dialable
		"a=127.0.0.1:x/127.0.0.1:2",            // not a port
		"a=:1/127.0.0.1:2",                     // no host
		"a=127.0.0.1:1/127.0.0.1:2,,b=h:1/h:2", // empty entry
	} {
		if _, err := ParseClusterPeers(bad); !errors.Is(err, ErrPeers) {
			t.Errorf("ParseClusterPeers(%q) = %v, want ErrPeers", bad, err)
		}
	}
}

// FELIX_CLUSTER_PEERS is validated at startup: ErrConfig naming the setting for a bad
// list, a list without this node's FELIX_NODE_ID, or one without FELIX_INTERNAL_BIND.
func TestClusterPeersConfig(t *testing.T) {
	peers := "a.felix=127.0.0.1:7001/127.0.0.1:6001,b.felix=127.0.0.1:7002/127.0.0.1:6002"
	base := map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:6001", "FELIX_INTERNAL_BIND": "127.0.0.1:7001",
		"FELIX_NODE_ID": "A.felix", "FELIX_CLUSTER_PEERS": peers}
	cfg, _, err := LoadConfig(nil, envOf(base))
	if err != nil || len(cfg.ClusterPeers) != 2 || cfg.SourceOf("FELIX_CLUSTER_PEERS") != SourceEnv {
		t.Fatalf("valid list (node id listed in another case): %+v %v", cfg, err)
	}
	for name, change := range map[string]map[string]string{
		"bad entry":        {"FELIX_CLUSTER_PEERS": "a.felix=127.0.0.1:7001"},
		"node not listed":  {"FELIX_NODE_ID": "c.felix"},
		"no internal bind": {"FELIX_INTERNAL_BIND": ""},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range change {
			env[k] = v
		}
		_, _, err := LoadConfig(nil, envOf(env))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "FELIX_CLUSTER_PEERS") {
			t.Errorf("%s: %v, want ErrConfig naming FELIX_CLUSTER_PEERS", name, err)
		}
	}
}

// fixedView is a CatalogView over fixed streams and caches (the placement reads only these).
type fixedView struct {
	CatalogView
	streams []Stream
	caches  []Cache
}

func (v fixedView) Streams(_, _ string) []Stream { return v.streams }
func (v fixedView) Caches(_, _ string) []Cache   { return v.caches }

// The placement is the brief's formula: shard i of name led by sorted[(fnv32(name)+i) % n],
// the same table whatever the order or case of the peer list, nothing for a single copy's
// replica set, and a replica set of the next R−1 peers when R > 1.
func TestStaticPlacement(t *testing.T) {
	peers := []StaticPeer{{NodeID: "c"}, {NodeID: "A"}, {NodeID: "b"}}
	view := fixedView{streams: []Stream{{TenantID: "t", Namespace: "ns", Stream: "orders", Shards: 8}},
		caches: []Cache{{TenantID: "t", Namespace: "ns", Cache: "sessions", Shards: 3}}}
	got := StaticPlacement(peers, view)
	if len(got) != 11 {
		t.Fatalf("%d entries, want 8 stream shards + 3 cache shards", len(got))
	}
	sorted := []string{"A", "b", "c"}
	for name, refOf := range map[string]func(int) core.ShardRef{
		"t/ns/orders":   func(i int) core.ShardRef { return sref("orders", i) },
		"t/ns/sessions": func(i int) core.ShardRef { return cref("sessions", i) },
	} {
		h := fnv.New32a()
		h.Write([]byte(name))
		for i := 0; i < 3; i++ {
			a, ok := got[refOf(i)]
			want := sorted[(int(h.Sum32())+i)%3]
			if !ok || a.Leader != want || len(a.ReplicaSet) != 0 || a.Generation != 0 {
				t.Errorf("%s shard %d: %+v, want leader %s at generation 0, no replica set", name, i, a, want)
			}
		}
	}
	again := StaticPlacement([]StaticPeer{{NodeID: "b"}, {NodeID: "c"}, {NodeID: "A"}}, view)
	if !got.equal(again) {
		t.Fatal("the placement depends on the order of the peer list")
	}
	leaders := map[string]int{}
	for _, a := range got {
		leaders[a.Leader]++
	}
	if len(leaders) != 3 {
		t.Fatalf("8+3 shards over 3 peers used only %v", leaders)
	}
	r2 := placeShards(sorted, "t/ns/orders", 4, 2)
	for i, a := range r2 {
		lead := slices.Index(sorted, a.Leader)
		if len(a.ReplicaSet) != 1 || a.ReplicaSet[0] != sorted[(lead+1)%3] {
			t.Errorf("R=2 shard %d: %+v, want the next peer as its replica", i, a)
		}
	}
	if len(StaticPlacement(nil, view)) != 0 {
		t.Fatal("no peers placed shards")
	}
}

// A broker leading none of a stream's shards routes from the catalog exactly as the
// engine does: keyed (modulo and jump hash), idempotent (producer id, sequence).
func TestCatalogRouteMatchesTheEngine(t *testing.T) {
	srv, stop := startInProcess(t, nil)
	defer stop()
	base := "/v1/tenants/default/namespaces/default/streams"
	for _, body := range []map[string]any{{"stream": "mod", "shards": 7}, {"stream": "jump", "shards": 7, "routing": "jump_hash"}} {
		if code, out := adminPost(t, srv, "POST", base, body); code != http.StatusCreated {
			t.Fatalf("create %v: %d %s", body, code, out)
		}
	}
	f := &forwarding{s: srv}
	for _, stream := range []string{"mod", "jump"} {
		name := core.StreamName{Tenant: "default", Namespace: "default", Stream: stream}
		for i := range 300 {
			key := []byte(fmt.Sprintf("key-%d", i))
			want, err := srv.engine.Route(name, key, "", 0)
			got, gerr := f.route(name, key, "", 0)
			if err != nil || gerr != nil || got != want {
				t.Fatalf("%s key %q: catalog %d (%v), engine %d (%v)", stream, key, got, gerr, want, err)
			}
			want, _ = srv.engine.Route(name, nil, "producer-1", uint64(i))
			if got, _ := f.route(name, nil, "producer-1", uint64(i)); got != want {
				t.Fatalf("%s sequence %d: catalog %d, engine %d", stream, i, got, want)
			}
		}
	}
	if _, err := f.route(core.StreamName{Tenant: "default", Namespace: "default", Stream: "nope"}, nil, "", 0); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}
}

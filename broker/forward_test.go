package broker

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/core"
	"felix/proto"
	"felix/testbed/scenario"
)

// testCluster is a static cluster of brokers in this process on 127.0.0.1, ordered by node id.
type testCluster struct {
	t       *testing.T
	brokers []*internalBroker
}

// startCluster starts n brokers with FELIX_CLUSTER_PEERS naming all of them (ports chosen
// before the start, since every broker must know every address) and env over the defaults
// ("{i}" in a value is the broker's index).
func startCluster(t *testing.T, n int, env map[string]string) *testCluster {
	t.Helper()
	type ports struct{ client, internal int }
	ps := make([]ports, n)
	var peers []string
	for i := range ps {
		for _, p := range []*int{&ps[i].client, &ps[i].internal} {
			port, err := scenario.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			*p = port
		}
		peers = append(peers, fmt.Sprintf("node-%d.felix=127.0.0.1:%d/127.0.0.1:%d", i, ps[i].internal, ps[i].client))
	}
	c := &testCluster{t: t}
	for i := range ps {
		e := map[string]string{"FELIX_QUIC_BIND": fmt.Sprintf("127.0.0.1:%d", ps[i].client),
			"FELIX_INTERNAL_BIND": fmt.Sprintf("127.0.0.1:%d", ps[i].internal), "FELIX_NODE_ID": fmt.Sprintf("node-%d.felix", i),
			"FELIX_CLUSTER_PEERS": strings.Join(peers, ",")}
		for k, v := range env {
			e[k] = strings.ReplaceAll(v, "{i}", strconv.Itoa(i))
		}
		c.brokers = append(c.brokers, startInternal(t, e))
	}
	return c
}

// byID returns the broker with node id id.
func (c *testCluster) byID(id string) *internalBroker {
	for _, b := range c.brokers {
		if strings.EqualFold(b.srv.cfg.NodeID, id) {
			return b
		}
	}
	c.t.Fatalf("no broker %q", id)
	return nil
}

// create POSTs body to path on every broker (the same spec everywhere), then waits until
// every broker opened exactly the shards its table says it leads.
func (c *testCluster) create(path string, body map[string]any) {
	c.t.Helper()
	for _, b := range c.brokers {
		if code, out := adminAs(c.t, b, path, body); code != http.StatusCreated {
			c.t.Fatalf("create %v on %s: %d %s", body, b.srv.cfg.NodeID, code, out)
		}
	}
	for _, b := range c.brokers {
		waitUntil(c.t, 20*time.Second, "the led shards open on "+b.srv.cfg.NodeID, func() bool { return ledShardsOpen(b.srv) })
	}
}

// adminAs POSTs body to path on b with its admin token (none with auth off).
func adminAs(t *testing.T, b *internalBroker, path string, body any) (int, string) {
	t.Helper()
	token := ""
	if b.ready.AdminTokenFile != "" {
		tok, err := os.ReadFile(b.ready.AdminTokenFile)
		if err != nil {
			t.Fatal(err)
		}
		token = strings.TrimSpace(string(tok))
	}
	return adminRequest(t, b.srv, "POST", path, token, body)
}

// ledShardsOpen reports whether srv's engine holds open, as leader, every shard its table
// says it leads, and nothing else.
func ledShardsOpen(srv *Server) bool {
	owners, _ := srv.owners.Snapshot()
	want := map[core.ShardRef]bool{}
	for ref, a := range owners {
		if a.Leader == srv.cfg.NodeID {
			want[ref] = true
		}
	}
	got := srv.engine.Shards()
	if len(got) != len(want) {
		return false
	}
	for _, st := range got {
		if !want[st.Ref] || st.Role != core.RoleLeader {
			return false
		}
	}
	return true
}

// leaderOf is the node id leading ref in srv's table.
func leaderOf(t *testing.T, srv *Server, ref core.ShardRef) string {
	a, ok := srv.owners.Lookup(ref)
	if !ok {
		t.Fatalf("%v: no entry", ref)
	}
	return a.Leader
}

// dialClient opens an authenticated client bi stream to srv, listing features.
func dialClient(t *testing.T, srv *Server, token string, features ...string) *rawStream {
	t.Helper()
	flags := uint16(0x003F) | proto.FlagPublishKeyed
	return authedStream(t, srv, &proto.Auth{TenantID: "default", Token: token, ClientFlags: &flags,
		Features: append([]string{proto.FeatureErrorCodes, proto.FeatureRoutingKeys, proto.FeatureCounters, proto.FeatureCacheDelete}, features...)})
}

// publishKeyed sends one acked JSON publish of payload with key and returns the answer.
func (r *rawStream) publishKeyed(stream string, key []byte, id uint64, payload string) proto.Message {
	r.t.Helper()
	r.send(&proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: stream, Key: key,
		Payloads: [][]byte{[]byte(payload)}, RequestID: &id, Ack: proto.JSONAckPerBatch})
	return r.next()
}

const streamsPath = "/v1/tenants/default/namespaces/default/streams"

// Keyed publishes through every broker (two of three are non-owners for any shard) land on
// the shard the key routes to (modulo and jump hash), exactly once, acked with the owner's
// offsets: per shard, the acked offsets are 0..n-1 without a gap or a repeat, and the
// owner's log ends at n.
func TestForwardedKeyedPublishes(t *testing.T) {
	c := startCluster(t, 3, nil)
	for _, routing := range []string{"modulo", "jump_hash"} {
		stream := "orders-" + strings.ReplaceAll(routing, "_", "-")
		c.create(streamsPath, map[string]any{"stream": stream, "shards": 8, "routing": routing})
		spec := streamSpec(Stream{Routing: routing})
		offsets := map[int][]uint64{}
		id := uint64(0)
		for _, b := range c.brokers {
			r := dialClient(t, b.srv, "")
			for k := range 40 {
				id++
				key := []byte(fmt.Sprintf("customer-%d", k))
				ok, isOK := r.publishKeyed(stream, key, id, fmt.Sprintf("%s/%d", key, id)).(*proto.PublishOK)
				want := core.RouteKey(spec.Routing, key, 8)
				if !isOK || ok.Shard == nil || int(*ok.Shard) != want || ok.FirstOffset == nil {
					t.Fatalf("%s: publish %d (key %s) through %s: %+v, want an ack from shard %d", routing, id, key, b.srv.cfg.NodeID, ok, want)
				}
				offsets[want] = append(offsets[want], *ok.FirstOffset)
			}
		}
		checkExactlyOnce(t, c, stream, offsets)
	}
	text := c.brokers[0].metricsText(t)
	for _, want := range []string{`felix_broker_forwards_total{op="publish",outcome="ack",reason="none"}`,
		"felix_broker_forward_attempts_count", "felix_broker_forward_duration_seconds_count",
		`felix_broker_forwards_served_total{verdict="proceed"}`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// checkExactlyOnce checks every shard's acked offsets are 0..n-1 once each and the
// shard's owner holds exactly n records.
func checkExactlyOnce(t *testing.T, c *testCluster, stream string, offsets map[int][]uint64) {
	t.Helper()
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: stream}
	for shard, offs := range offsets {
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		for i, o := range offs {
			if o != uint64(i) {
				t.Fatalf("%s shard %d: acked offsets %v: a gap or a duplicate", stream, shard, offs)
			}
		}
		owner := c.byID(leaderOf(t, c.brokers[0].srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: shard}))
		info, err := owner.srv.engine.StreamInfo(name)
		if err != nil || info.NextOffsets[shard] != uint64(len(offs)) {
			t.Fatalf("%s shard %d on its owner %s: %+v %v, want %d records", stream, shard, owner.srv.cfg.NodeID, info.NextOffsets, err, len(offs))
		}
	}
}

// The local path's ownership check allocates nothing: one atomic load, one map lookup, a
// comparison.
func TestLocalOwnershipCheckAllocatesNothing(t *testing.T) {
	srv := &Server{cfg: &Config{ClusterConfig: ClusterConfig{NodeID: "a"}}, owners: NewOwnershipTable()}
	f := &forwarding{s: srv, self: "a"}
	name := core.StreamName{Tenant: "t", Namespace: "ns", Stream: "s"}
	srv.owners.Replace(Ownership{{Kind: core.ShardStream, Name: name, Shard: 0}: {Leader: "A"},
		{Kind: core.ShardStream, Name: name, Shard: 1}: {Leader: "b"}})
	local, remote := core.ShardRef{Kind: core.ShardStream, Name: name}, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: 1}
	if _, ok := f.remote(local); ok {
		t.Fatal("a shard led here (node id in another case) is remote")
	}
	if a, ok := f.remote(remote); !ok || a.Leader != "b" {
		t.Fatal("a shard led by b is not remote")
	}
	if n := testing.AllocsPerRun(1000, func() { f.remote(local) }); n != 0 {
		t.Fatalf("local ownership check: %v allocations", n)
	}
}

// An idempotent publish through a non-owner travels as kind 28: the owner deduplicates a
// re-send of the same producer id and request id against its producer window and the
// client gets duplicate with the first offsets.
func TestForwardedIdempotentPublish(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "idem", "shards": 4})
	a, b := c.brokers[0], c.brokers[1]
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: "idem"}
	id := uint64(1)
	for ; leaderOf(t, a.srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: idempotentShard("p1", id, 4)}) != b.srv.cfg.NodeID; id++ {
	}
	r := dialClient(t, a.srv, "", proto.FeatureIdempotentPublish)
	var first *proto.PublishOK
	for try := range 2 {
		r.send(&proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: "idem", Payloads: [][]byte{[]byte("x")},
			RequestID: &id, Ack: proto.JSONAckPerBatch, ProducerID: "p1", Idempotent: true})
		ok, isOK := r.next().(*proto.PublishOK)
		if !isOK || ok.FirstOffset == nil || ok.Duplicate != (try == 1) {
			t.Fatalf("idempotent publish %d through %s: %#v", try, a.srv.cfg.NodeID, ok)
		}
		if try == 1 && *ok.FirstOffset != *first.FirstOffset {
			t.Fatalf("duplicate answered offset %d, first %d", *ok.FirstOffset, *first.FirstOffset)
		}
		first = ok
	}
	info, _ := b.srv.engine.StreamInfo(name)
	if shard := idempotentShard("p1", id, 4); info.NextOffsets[shard] != 1 {
		t.Fatalf("the owner stored %d records, want 1", info.NextOffsets[shard])
	}
	wantMetric(t, b, `felix_internal_listener_requests_total{kind="IdempotentForwardPublish"} 2`)
}

// Binary keyed acked batches (0x0009 with 0x4000) through a non-owner are forwarded as they
// are: every one acked ok, and each shard's owner holds exactly the records whose keys
// route to it (the payloads stay in the read buffer until the owner answered).
func TestForwardedBinaryPublishes(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "bin", "shards": 4})
	a := c.brokers[0]
	r := dialClient(t, a.srv, "")
	perShard := map[int]uint64{}
	for i := range 30 {
		key := []byte(fmt.Sprintf("device-%d", i))
		b := &proto.PublishBatch{Acked: true, RequestID: uint64(i + 1), AckMode: proto.AckPerBatch, Key: key,
			TenantID: []byte("default"), Namespace: []byte("default"), Stream: []byte("bin"),
			Payloads: [][]byte{[]byte("one"), []byte("two")}}
		frame, err := proto.AppendPublishBatch(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.st.Write(frame); err != nil {
			t.Fatal(err)
		}
		perShard[core.RouteKey(core.RoutingModulo, key, 4)] += 2
	}
	for i := range 30 {
		_ = r.st.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, body, err := proto.ReadFrame(r.st, nil, 1<<24)
		var ack proto.PublishAck
		if err == nil {
			err = proto.DecodePublishAck(body, &ack)
		}
		if err != nil || ack.Status != proto.AckStatusOK {
			t.Fatalf("binary ack %d: %+v %v", i, ack, err)
		}
	}
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: "bin"}
	for shard, n := range perShard {
		owner := c.byID(leaderOf(t, a.srv, core.ShardRef{Kind: core.ShardStream, Name: name, Shard: shard}))
		if info, _ := owner.srv.engine.StreamInfo(name); info.NextOffsets[shard] != n {
			t.Fatalf("shard %d on %s holds %d records, want %d", shard, owner.srv.cfg.NodeID, info.NextOffsets[shard], n)
		}
	}
}

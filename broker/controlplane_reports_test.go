package broker

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/core"
)

// In cluster mode the leader of an RF3 Quorum stream reports to the control plane: its
// report names itself at the shard's generation and every member of the replica set with
// the storage identity the control plane registered and the offset the quorum tracker
// counts; after three acknowledged publishes every member is reported at 3 or more.
func TestControlPlaneLeaderReports(t *testing.T) {
	cp := startTestControlPlane(t)
	brokers := startCPBrokers(t, cp, 3)
	b0 := brokers[0].srv
	for _, p := range []string{"/v1/tenants", "/v1/tenants/t1/namespaces"} {
		if code, out := adminPost(t, b0, "POST", p, map[string]any{"tenant_id": "t1", "namespace": "ns"}); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", p, code, out)
		}
	}
	code, out := adminPost(t, b0, "POST", "/v1/tenants/t1/namespaces/ns/streams",
		map[string]any{"stream": "orders", "shards": 1, "replication_factor": 3, "consistency": "Quorum"})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	want := cp.ownership()
	for _, b := range brokers {
		waitUntil(t, 20*time.Second, "every shard open on "+b.srv.cfg.NodeID, func() bool {
			owners, _ := b.srv.owners.Snapshot()
			return owners.equal(want) && holdsInRole(b.srv, want)
		})
	}
	ref := meta.ShardRef{Kind: "stream", TenantID: "t1", Namespace: "ns", Name: "orders"}
	a, ok := cp.node.FSM.State().Assignment(ref)
	if !ok || len(a.Followers) != 2 {
		t.Fatalf("assignment %+v", a)
	}
	var leader *Server
	for _, b := range brokers {
		if b.srv.cfg.NodeID == a.Leader {
			leader = b.srv
		}
	}
	name := core.StreamName{Tenant: "t1", Namespace: "ns", Stream: "orders"}
	for i := range 3 {
		ch := make(chan error, 1)
		req := &core.PublishRequest{Stream: name, Payloads: [][]byte{[]byte(fmt.Sprint("r", i))}, Ack: core.AckOnCommit}
		if err := leader.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-ch:
			if err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("publish %d not acknowledged within 20 s", i)
		}
	}
	var last meta.Report
	waitUntil(t, 10*time.Second, "a report naming every member at 3 or more", func() bool {
		for _, r := range cp.node.FSM.State().Reports() {
			if r.Key() == ref.Key() {
				last = r
				return reportCovers(cp, r, a, 3)
			}
		}
		return false
	})
	if last.Leader != a.Leader || last.Generation != a.Generation {
		t.Fatalf("report %+v, want leader %s at %d", last, a.Leader, a.Generation)
	}
}

// reportCovers tells whether r names every member of a's replica set at least at min
// under the storage identity the control plane registered.
func reportCovers(cp *testControlPlane, r meta.Report, a meta.Assignment, min uint64) bool {
	if r.Leader != a.Leader || r.Generation != a.Generation || len(r.Replicas) != 1+len(a.Followers) {
		return false
	}
	for _, rep := range r.Replicas {
		b, ok := cp.node.FSM.State().Broker(rep.NodeID)
		if !ok || b.StorageID == "" || rep.StorageID != b.StorageID || rep.DurableOffset < min {
			return false
		}
	}
	return true
}

// reportDue: a first report, a new generation or a changed offset is due at once; an
// unchanged one only after reportRefresh.
func TestReportDue(t *testing.T) {
	now := time.Unix(100, 0)
	a := shardAcks{gen: 2, held: []uint64{5, 5, 4}}
	last := sentReport{gen: 2, held: []uint64{5, 5, 4}, at: now}
	cases := []struct {
		name string
		last sentReport
		a    shardAcks
		at   time.Time
		want bool
	}{
		{"first", sentReport{}, a, now, true},
		{"unchanged", last, a, now.Add(reportRefresh - time.Millisecond), false},
		{"refresh", last, a, now.Add(reportRefresh), true},
		{"changed", last, shardAcks{gen: 2, held: []uint64{6, 5, 4}}, now.Add(time.Millisecond), true},
		{"generation", last, shardAcks{gen: 3, held: a.held}, now.Add(time.Millisecond), true},
	}
	for _, c := range cases {
		if got := reportDue(c.last, c.a, c.at); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

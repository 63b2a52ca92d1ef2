package rest

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// TestGenerationsAboveReportsAfterRestore: issue 20's gap "Generations never
// go backwards, even after a control-plane restore". A stream reaches
// generation 3; the group is restored from a snapshot taken before the
// stream existed; two brokers heartbeat their ballots (3 and 2) within the
// steady-heartbeat window (no entry for a steady heartbeat); the stream,
// created again, is placed at a generation above every broker's report. With
// heartbeatNeedsEntry looking only at assigned shards the report is dropped
// and the new shard starts at 0.
func TestGenerationsAboveReportsAfterRestore(t *testing.T) {
	n, _ := member(t, meta.Config{}, false)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	srv := httptest.NewServer(New(Config{Node: n, Token: testToken, HeartbeatEntryEvery: 10 * time.Second,
		Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}))
	t.Cleanup(srv.Close)
	propose := func(c meta.Command) meta.Result {
		t.Helper()
		res, err := n.Propose(c, 5*time.Second)
		if err != nil || res.Err != nil {
			t.Fatalf("%T: %v %v", c, err, res.Err)
		}
		return res
	}
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1"}`, 200)
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b2"}`, 200)
	propose(&meta.CreateTenant{TenantID: "t"})
	propose(&meta.CreateNamespace{TenantID: "t", Namespace: "n"})
	st := n.FSM.State()
	older, err := (&meta.Snapshot{State: st, Epoch: 1}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	ref := meta.ShardRef{Kind: "stream", TenantID: "t", Namespace: "n", Name: "s"}
	create := &meta.CreateStream{TenantID: "t", Namespace: "n", Stream: "s", Shards: 1, ReplicationFactor: 2, AtMs: now.UnixMilli()}
	propose(create)
	propose(&meta.SetAssignment{ShardRef: ref, Leader: "b2", Followers: []string{"b1"}, Generation: 3})

	if err := n.Raft.Restore(&raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: st.Index(), Term: 1, Size: int64(len(older))}, bytes.NewReader(older), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.FSM.State().Assignment(ref); ok {
		t.Fatal("the restored state still holds the stream's assignment")
	}
	for b, g := range map[string]int{"b1": 3, "b2": 2} {
		expect(t, srv, "POST", "/v1/brokers/"+b+"/heartbeat", `{"generations":{"`+ref.Key()+`":`+strconv.Itoa(g)+`}}`, 204)
	}
	create.AtMs = now.UnixMilli()
	a := propose(create)
	got, ok := n.FSM.State().Assignment(ref)
	if !ok {
		t.Fatalf("no assignment after the create (%+v)", a.Value)
	}
	if got.Generation <= 3 {
		t.Fatalf("the shard placed after the restore is at generation %d, at or below a broker's report of 3", got.Generation)
	}
}

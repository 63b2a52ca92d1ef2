package rest

import (
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"felix/cluster/meta"
)

// TestSteadyHeartbeatIsNotAnEntry: with HeartbeatEntryEvery a steady heartbeat reaches
// OnHeartbeat without a Raft entry; a draining change, a generation above the shard's
// highest (not one at it), or a last entry that old makes one; an unregistered broker is still 404 and reaches no
// OnHeartbeat.
func TestSteadyHeartbeatIsNotAnEntry(t *testing.T) {
	n, _ := member(t, meta.Config{}, false)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	var arrived []string
	srv := httptest.NewServer(New(Config{Node: n, Token: testToken, HeartbeatEntryEvery: time.Second,
		Now:         func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		OnHeartbeat: func(node string, draining bool) { mu.Lock(); defer mu.Unlock(); arrived = append(arrived, node) }}))
	t.Cleanup(srv.Close)
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1"}`, 200)
	entryAfter := func(body string, want bool) {
		t.Helper()
		before := n.FSM.State().Index()
		expect(t, srv, "POST", "/v1/brokers/b1/heartbeat", body, 204)
		if got := n.FSM.State().Index() != before; got != want {
			t.Fatalf("heartbeat %s: entry %v, want %v", body, got, want)
		}
	}
	advance(500 * time.Millisecond)
	entryAfter(`{}`, false)
	entryAfter(`{"draining":true}`, true)
	entryAfter(`{"draining":true}`, false)
	advance(time.Second)
	entryAfter(`{"draining":true}`, true)
	entryAfter(`{}`, true) // undrained: initial placement takes it again
	for _, c := range []meta.Command{&meta.CreateTenant{TenantID: "t"}, &meta.CreateNamespace{TenantID: "t", Namespace: "n"},
		&meta.CreateStream{TenantID: "t", Namespace: "n", Stream: "s", Shards: 1, AtMs: now.UnixMilli()}} {
		if res, err := n.Propose(c, 5*time.Second); err != nil || res.Err != nil {
			t.Fatalf("%T: %v %v", c, err, res.Err)
		}
	}
	key := meta.ShardRef{Kind: "stream", TenantID: "t", Namespace: "n", Name: "s"}.Key()
	entryAfter(`{"generations":{"`+key+`":0}}`, false)
	entryAfter(`{"generations":{"`+key+`":4}}`, true)
	entryAfter(`{"generations":{"`+key+`":4}}`, false)
	expect(t, srv, "POST", "/v1/brokers/b9/heartbeat", `{}`, 404)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(arrived, slices.Repeat([]string{"b1"}, 8)) {
		t.Fatalf("OnHeartbeat saw %v, want b1 eight times", arrived)
	}
}

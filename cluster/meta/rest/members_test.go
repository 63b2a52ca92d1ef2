package rest

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
)

// cpMember is one member of a members test: its node, server and data dir.
type cpMember struct {
	node *raftnode.Node
	srv  *httptest.Server
}

// memberNet starts members named by nodes (the first bootstrapped alone,
// the others empty, waiting to be added) at levels (0 = this build's), each
// with a storage identity, on connected in-memory transports; MemberURL
// knows every member's REST URL by node id.
func memberNet(t *testing.T, nodes []string, levels []meta.Level) []cpMember {
	t.Helper()
	urls := map[string]string{}
	memberURL := func(id raft.ServerID) string { n, _ := raftnode.SplitServerID(id); return urls[n] }
	var trans []*raft.InmemTransport
	for _, name := range nodes {
		_, tr := raft.NewInmemTransport(raft.ServerAddress(name))
		for _, o := range trans {
			tr.Connect(o.LocalAddr(), o)
			o.Connect(tr.LocalAddr(), tr)
		}
		trans = append(trans, tr)
	}
	var out []cpMember
	for i, name := range nodes {
		dir := t.TempDir()
		sid, _, err := raftnode.LoadOrCreateStorageID(dir)
		if err != nil {
			t.Fatal(err)
		}
		cfg := raftnode.Config{ID: raftnode.ServerID(name, sid), Dir: dir, Transport: trans[i], Tune: tune, Level: levels[i]}
		if i == 0 {
			cfg.Bootstrap = []raft.Server{{Suffrage: raft.Voter, ID: cfg.ID, Address: trans[i].LocalAddr()}}
		}
		n, err := raftnode.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		srv := httptest.NewServer(New(Config{Node: n, Token: testToken, MemberURL: memberURL}))
		t.Cleanup(srv.Close)
		urls[name] = srv.URL
		out = append(out, cpMember{n, srv})
	}
	waitFor(t, "leader", 10*time.Second, func() bool { return out[0].node.Raft.State() == raft.Leader })
	return out
}

// TestMembersAddTransferRemove: GET /v1/identity of an empty member; POST
// /v1/members by node id (the leader asks the candidate's identity and
// level); GET /v1/members; leadership handed over with POST
// /v1/members/leader; the first member removed with DELETE by node id.
func TestMembersAddTransferRemove(t *testing.T) {
	ms := memberNet(t, []string{"a", "b"}, []meta.Level{0, 0})
	a, b := ms[0], ms[1]
	var ident IdentityBody
	if call(t, b.srv, "GET", "/v1/identity", "", &ident); ident.ServerID != string(b.node.ID) || ident.NodeID != "b" ||
		ident.HasState || ident.Level != meta.BuildMaxLevel || ident.RaftAddr != "b" {
		t.Fatalf("identity of the empty member: %+v", ident)
	}
	var mv MemberView
	if st, _ := call(t, a.srv, "POST", "/v1/members", `{"id":"b"}`, &mv); st != 200 || mv.ID != string(b.node.ID) || mv.Level != meta.BuildMaxLevel {
		t.Fatalf("add b: %d %+v", st, mv)
	}
	waitFor(t, "b hearing the leader", 10*time.Second, func() bool { return b.node.Raft.Leader() != "" })
	var body MembersBody
	call(t, b.srv, "GET", "/v1/members", "", &body)
	if len(body.Members) != 2 || body.Leader != string(a.node.ID) || body.ServedBy != string(a.node.ID) ||
		body.Members[1].Level != meta.BuildMaxLevel || body.Members[1].NodeID != "b" || body.Members[1].Held {
		t.Fatalf("members through the follower: %+v", body)
	}
	var lb LeaderBody
	if st, _ := call(t, a.srv, "POST", "/v1/members/leader", `{"id":"b"}`, &lb); st != 200 || lb.ID != string(b.node.ID) {
		t.Fatalf("transfer: %d %+v", st, lb)
	}
	waitFor(t, "b leading, and a knowing it", 10*time.Second, func() bool {
		_, id := a.node.Raft.LeaderWithID()
		return b.node.Raft.State() == raft.Leader && id == b.node.ID
	})
	expect(t, a.srv, "DELETE", "/v1/members/nobody", "", 404)
	expect(t, a.srv, "DELETE", "/v1/members/a", "", 204)
	if voters, _ := b.node.Voters(); fmt.Sprint(voters) != fmt.Sprint([]string{string(b.node.ID)}) {
		t.Fatalf("voters after the removal: %v", voters)
	}
}

// TestAddMemberBelowFloorThroughREST: at floor 12 a candidate whose build
// reports 11 is refused 409 naming both levels; a candidate answering under
// another storage id than the one asked is refused 409; an id whose
// storage id nobody can tell is 400.
func TestAddMemberBelowFloorThroughREST(t *testing.T) {
	ms := memberNet(t, []string{"a", "old"}, []meta.Level{0, 11})
	a, old := ms[0], ms[1]
	if _, err := a.node.ReportLevel(a.node.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, a.srv, "POST", "/v1/brokers", `{"node_id":"b1","storage_id":"s1"}`, 200)
	if fl := a.node.FSM.State().Floor(); fl != 12 {
		t.Fatalf("floor %d, want 12", fl)
	}
	e := expect(t, a.srv, "POST", "/v1/members", `{"id":"old"}`, 409)
	if !strings.Contains(e.Message, "11") || !strings.Contains(e.Message, "12") {
		t.Fatalf("refusal names both levels? %+v", e)
	}
	e = expect(t, a.srv, "POST", "/v1/members", `{"id":"old/00000000000000ff"}`, 409)
	if !strings.Contains(e.Message, string(old.node.ID)) {
		t.Fatalf("identity refusal: %+v", e)
	}
	expect(t, a.srv, "POST", "/v1/members", `{"id":"nobody"}`, 400)
	expect(t, a.srv, "POST", "/v1/members/levels", `{"member_id":"","level":3}`, 400)
	if voters, _ := a.node.Voters(); len(voters) != 1 {
		t.Fatalf("voters %v", voters)
	}
}

// TestWriteNeedingLevelRefusedUntilEveryMemberReports: at floor 1 a member
// whose build reports level 2 may join; the finalize of jump_hash_routing
// (level 3) is then refused 409 naming it, until it reports 14.
func TestWriteNeedingLevelRefusedUntilEveryMemberReports(t *testing.T) {
	ms := memberNet(t, []string{"a", "old"}, []meta.Level{0, 2})
	a, old := ms[0], ms[1]
	if _, err := a.node.ReportLevel(a.node.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var mv MemberView
	if st, _ := call(t, a.srv, "POST", "/v1/members", `{"id":"old"}`, &mv); st != 200 || mv.Level != 2 {
		t.Fatalf("an older build at floor 1: %d %+v", st, mv)
	}
	e := expect(t, a.srv, "POST", "/v1/fleet/features/jump_hash_routing/finalize", "", 409)
	if !strings.Contains(e.Message, string(old.node.ID)) || !strings.Contains(e.Message, "3") {
		t.Fatalf("refusal names the member and the level? %+v", e)
	}
	expect(t, a.srv, "POST", "/v1/members/levels", fmt.Sprintf(`{"member_id":%q,"level":14}`, old.node.ID), 200)
	expect(t, a.srv, "POST", "/v1/fleet/features/jump_hash_routing/finalize", "", 200)
}

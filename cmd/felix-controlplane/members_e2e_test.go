package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/cluster/meta/rest"
)

// cpMember is one member process of a three-member group.
type cpMember struct {
	id, bind, raft, metrics, dir string
	env                          []string
	p                            *proc
}

func (m *cpMember) base() string { return "http://" + m.bind }

// startGroup starts n members cp1..cpN as processes on free 127.0.0.1 ports
// with FELIX_CONTROLPLANE_PEERS and _PEER_URLS and one admin token, and
// waits until each is ready (it knows a leader).
func startGroup(t *testing.T, n int, tok string) []*cpMember {
	t.Helper()
	var ms []*cpMember
	var peers, urls []string
	for i := 1; i <= n; i++ {
		m := &cpMember{id: fmt.Sprintf("cp%d", i), bind: freeAddr(t), raft: freeAddr(t), metrics: freeAddr(t), dir: t.TempDir()}
		for name, v := range map[string]string{rest.TokenFile: tok, rest.KeySecretFile: strings.Repeat("5e", 32)} {
			if err := os.WriteFile(filepath.Join(m.dir, name), []byte(v+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		peers, urls = append(peers, m.id+"@"+m.raft), append(urls, m.id+"@"+m.base())
		ms = append(ms, m)
	}
	for _, m := range ms {
		m.env = []string{"FELIX_CONTROLPLANE_NODE_ID=" + m.id, "FELIX_CONTROLPLANE_BIND=" + m.bind,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + m.raft, "FELIX_CONTROLPLANE_METRICS_BIND=" + m.metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + m.dir, "FELIX_CONTROLPLANE_PEERS=" + strings.Join(peers, ","),
			"FELIX_CONTROLPLANE_PEER_URLS=" + strings.Join(urls, ",")}
		m.p = startMember(t, m.env)
	}
	for _, m := range ms {
		waitReady(t, m.p, m.metrics)
	}
	return ms
}

// logsOf gives every member's output (printed when a test fails).
func logsOf(ms []*cpMember) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", m.id, m.p.out)
	}
	return b.String()
}

// poll checks cond every 50 ms until it holds; past 20 s it fails the test
// with what and every member's output.
func poll(t *testing.T, ms []*cpMember, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 20s\n%s", what, logsOf(ms))
		}
		<-tick.C
	}
}

// waitMembers polls GET /v1/members at m until cond holds.
func waitMembers(t *testing.T, ms []*cpMember, m *cpMember, what string, cond func(rest.MembersBody) bool) rest.MembersBody {
	t.Helper()
	var mb rest.MembersBody
	poll(t, ms, what, func() bool {
		mb = rest.MembersBody{}
		resp, err := client.Get(m.base() + "/v1/members")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&mb) == nil && resp.StatusCode == 200 && cond(mb)
	})
	return mb
}

// memberOf gives the row of node id node, or false.
func memberOf(mb rest.MembersBody, node string) (rest.MemberView, bool) {
	for _, m := range mb.Members {
		if m.NodeID == node {
			return m, true
		}
	}
	return rest.MemberView{}, false
}

// allAt: n members, each reporting this build's level, one leading.
func allAt(n int) func(rest.MembersBody) bool {
	return func(mb rest.MembersBody) bool {
		if len(mb.Members) != n || mb.Leader == "" {
			return false
		}
		for _, m := range mb.Members {
			if m.Level != meta.BuildMaxLevel || m.StorageID == "" {
				return false
			}
		}
		return true
	}
}

// hasTenantAt tells whether member m's own state (GET /v1/snapshot) holds tenant.
func hasTenantAt(m *cpMember, tenant string) bool {
	resp, err := client.Get(m.base() + "/v1/snapshot")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var snap rest.SnapshotBody
	if json.NewDecoder(resp.Body).Decode(&snap) != nil {
		return false
	}
	for _, tn := range snap.Tenants {
		if tn.TenantID == tenant {
			return true
		}
	}
	return false
}

func byNode(ms []*cpMember, serverID string) *cpMember {
	node, _, _ := strings.Cut(serverID, "/")
	for _, m := range ms {
		if m.id == node {
			return m
		}
	}
	return nil
}

// TestThreeMembersTransferRemoveReAdd: three member processes bootstrap one
// group (each learning the others' storage ids); leadership is handed to a
// follower; a follower is removed and added again; then its data dir is
// wiped: it comes back under a new storage id, cannot be added while its old
// id holds its address, and is removed and added as the new server, which
// catches up from nothing.
func TestThreeMembersTransferRemoveReAdd(t *testing.T) {
	const tok = "members-e2e-token"
	ms := startGroup(t, 3, tok)
	mb := waitMembers(t, ms, ms[0], "three members at this level", allAt(3))
	post(t, ms[1].base(), tok, "/v1/tenants", `{"tenant_id":"t1"}`, 201)
	sameJWKS(t, ms, "t1")
	target := ms[0]
	if byNode(ms, mb.Leader) == target {
		target = ms[1]
	}
	if out, code := runAdmin(t, ms[2].base(), tok, "members", "transfer-leader", target.id); code != 0 {
		t.Fatalf("transfer-leader: %d %s\n%s", code, out, logsOf(ms))
	}
	mb = waitMembers(t, ms, ms[2], "the new leader", func(mb rest.MembersBody) bool { return byNode(ms, mb.Leader) == target })
	var y *cpMember
	for _, m := range ms {
		if m != target {
			y = m
		}
	}
	if out, code := runAdmin(t, target.base(), tok, "members", "remove", y.id); code != 0 {
		t.Fatalf("remove %s: %d %s", y.id, code, out)
	}
	waitMembers(t, ms, target, "two members", func(mb rest.MembersBody) bool { return len(mb.Members) == 2 })
	if out, code := runAdmin(t, target.base(), tok, "members", "add", y.id); code != 0 || !strings.Contains(out, "added "+y.id+"/") {
		t.Fatalf("add %s again: %d %s\n%s", y.id, code, out, logsOf(ms))
	}
	waitMembers(t, ms, target, "three members again", allAt(3))
	post(t, target.base(), tok, "/v1/tenants", `{"tenant_id":"t2"}`, 201)
	waitTenant(t, ms, y, "t2")
	wipedRejoins(t, ms, target, y, tok)
}

// sameJWKS checks that every member publishes the same one-key JWKS for
// tenant (each derives it from the shared tenant-key secret).
func sameJWKS(t *testing.T, ms []*cpMember, tenant string) {
	t.Helper()
	var first string
	for _, m := range ms {
		waitTenant(t, ms, m, tenant)
		doc := get(t, m.base()+"/v1/tenants/"+tenant+"/.well-known/jwks.json")
		if first == "" {
			first = doc
		}
		if doc != first || strings.Count(doc, `"kid"`) != 1 {
			t.Fatalf("%s's JWKS %s, cp1's %s", m.id, doc, first)
		}
	}
}

// waitTenant waits until m's own state holds tenant.
func waitTenant(t *testing.T, ms []*cpMember, m *cpMember, tenant string) {
	t.Helper()
	poll(t, ms, m.id+" holding tenant "+tenant, func() bool { return hasTenantAt(m, tenant) })
}

// wipedRejoins stops y, wipes its data dir but the admin token, restarts
// it, and has the operator replace its old server id with the new one.
func wipedRejoins(t *testing.T, ms []*cpMember, leader, y *cpMember, tok string) {
	t.Helper()
	before, _ := memberOf(waitMembers(t, ms, leader, "members", allAt(3)), y.id)
	stop(t, y.p)
	for _, name := range []string{"wal", "snapshots", "storage-id"} {
		if err := os.RemoveAll(filepath.Join(y.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	y.p = startMember(t, y.env)
	waitReady(t, y.p, y.metrics)
	var ident rest.IdentityBody
	if err := json.Unmarshal([]byte(get(t, y.base()+"/v1/identity")), &ident); err != nil || ident.StorageID == before.StorageID ||
		ident.HasState {
		t.Fatalf("the wiped member's identity %+v (%v), old storage id %s", ident, err, before.StorageID)
	}
	waitMembers(t, ms, leader, "the old id answered under the new one", func(mb rest.MembersBody) bool {
		m, ok := memberOf(mb, y.id)
		return ok && m.ID == before.ID && m.AnsweredAs == ident.ServerID
	})
	if out, code := runAdmin(t, leader.base(), tok, "members", "add", y.id); code != 1 || !strings.Contains(out, "remove it first") {
		t.Fatalf("adding the new server over the old one's address: %d %s", code, out)
	}
	if out, code := runAdmin(t, leader.base(), tok, "members", "remove", y.id); code != 0 {
		t.Fatalf("remove the old server: %d %s", code, out)
	}
	if out, code := runAdmin(t, leader.base(), tok, "members", "add", y.id); code != 0 || !strings.Contains(out, ident.ServerID) {
		t.Fatalf("add the new server: %d %s\n%s", code, out, logsOf(ms))
	}
	waitMembers(t, ms, leader, "the new server at this level", func(mb rest.MembersBody) bool {
		m, ok := memberOf(mb, y.id)
		return allAt(3)(mb) && ok && m.ID == ident.ServerID
	})
	post(t, leader.base(), tok, "/v1/tenants", `{"tenant_id":"t3"}`, 201)
	waitTenant(t, ms, y, "t3")
	if !hasTenantAt(y, "t1") {
		t.Fatal("the new server did not catch up from the start")
	}
	sameJWKS(t, ms, "t1")
	if out, code := runAdmin(t, y.base(), tok, "members"); code != 0 || !strings.Contains(out, ident.StorageID) || !strings.Contains(out, "HELD") {
		t.Fatalf("admin members: %d\n%s", code, out)
	}
	if m := get(t, "http://"+leader.metrics+"/metrics"); !strings.Contains(m, `felix_meta_raft_member_below_floor{member="`+ident.ServerID+`"} 0`) {
		t.Fatalf("leader metrics:\n%s", m)
	}
}

// TestMemberBelowFloorHeldThenReleasedAsProcesses: the floor is raised to
// 12 (a registration with a storage identity); a follower restarts playing
// an older build (FELIX_TEST_METADATA_LEVEL=11): the leader holds it (held in
// /v1/members, felix_meta_raft_member_below_floor 1) and it misses a write;
// restarted on this build's level it is released and catches up.
func TestMemberBelowFloorHeldThenReleasedAsProcesses(t *testing.T) {
	const tok = "hold-e2e-token"
	ms := startGroup(t, 3, tok)
	mb := waitMembers(t, ms, ms[0], "three members at this level", allAt(3))
	leader := byNode(ms, mb.Leader)
	post(t, leader.base(), tok, "/v1/brokers", `{"node_id":"b1","storage_id":"s1","client_addr":"127.0.0.1:5000"}`, 200)
	waitMembers(t, ms, leader, "floor 12", func(mb rest.MembersBody) bool { return mb.Floor == 12 })
	y := ms[0]
	if y == leader {
		y = ms[1]
	}
	stop(t, y.p)
	y.p = startMember(t, append(slices.Clone(y.env), "FELIX_TEST_METADATA_LEVEL=11"))
	mb = waitMembers(t, ms, leader, y.id+" held", func(mb rest.MembersBody) bool {
		m, ok := memberOf(mb, y.id)
		return ok && m.Held && m.Level == 11
	})
	held, _ := memberOf(mb, y.id)
	lead := byNode(ms, mb.Leader)
	if m := get(t, "http://"+lead.metrics+"/metrics"); !strings.Contains(m, `felix_meta_raft_member_below_floor{member="`+held.ID+`"} 1`) {
		t.Fatalf("leader metrics while %s is held:\n%s", y.id, m)
	}
	post(t, lead.base(), tok, "/v1/tenants", `{"tenant_id":"during"}`, 201)
	if hasTenantAt(y, "during") {
		t.Fatal("the held member was fed a write")
	}
	stop(t, y.p)
	y.p = startMember(t, y.env)
	waitMembers(t, ms, lead, y.id+" released at this level", func(mb rest.MembersBody) bool {
		m, ok := memberOf(mb, y.id)
		return ok && !m.Held && m.Level == meta.BuildMaxLevel
	})
	waitTenant(t, ms, y, "during")
}

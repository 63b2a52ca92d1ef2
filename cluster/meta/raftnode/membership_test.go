package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"felix/clock/clocktest"
	"felix/cluster/meta"
)

// inmemNet connects in-memory transports by address; a member restarted at
// an address gets a new transport, connected both ways to the others.
type inmemNet struct {
	mu    sync.Mutex
	trans map[raft.ServerAddress]*raft.InmemTransport
}

func (nw *inmemNet) transport(addr raft.ServerAddress) *raft.InmemTransport {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.trans == nil {
		nw.trans = map[raft.ServerAddress]*raft.InmemTransport{}
	}
	_, tr := raft.NewInmemTransport(addr)
	for a, o := range nw.trans {
		if a != addr {
			tr.Connect(a, o)
			o.Connect(addr, tr)
		}
	}
	nw.trans[addr] = tr
	return tr
}

// syncBuffer is a log sink safe for raft's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// group is a test group of members named m1.. with storage identities in
// their data dirs.
type group struct {
	t     *testing.T
	net   inmemNet
	dirs  []string
	nodes []*Node
	clk   *clocktest.Fake
	logs  []*syncBuffer
}

func slowTune(c *raft.Config) {
	c.HeartbeatTimeout, c.ElectionTimeout = 400*time.Millisecond, 400*time.Millisecond
	c.LeaderLeaseTimeout, c.CommitTimeout = 200*time.Millisecond, 5*time.Millisecond
}

// newGroup starts n members bootstrapped with each other's NODE/STORAGE ids.
func newGroup(t *testing.T, n int) *group {
	t.Helper()
	g := &group{t: t, clk: clocktest.NewFake(time.Time{})}
	var servers []raft.Server
	for i := 0; i < n; i++ {
		dir := t.TempDir()
		sid, created, err := LoadOrCreateStorageID(dir)
		if err != nil || !created {
			t.Fatalf("storage id: %v %v", created, err)
		}
		addr := raft.ServerAddress(fmt.Sprintf("m%d", i+1))
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: ServerID(string(addr), sid), Address: addr})
		g.dirs = append(g.dirs, dir)
		g.logs = append(g.logs, &syncBuffer{})
	}
	g.nodes = make([]*Node, n)
	for i := range servers {
		g.start(i, servers[i].ID, servers)
	}
	return g
}

// start (re)starts member i under id (bootstrap ignored where the dir has
// state; nil bootstraps nothing).
func (g *group) start(i int, id raft.ServerID, bootstrap []raft.Server) *Node {
	g.t.Helper()
	addr := raft.ServerAddress(fmt.Sprintf("m%d", i+1))
	log := hclog.New(&hclog.LoggerOptions{Output: g.logs[i], Level: hclog.Info})
	n, err := Start(Config{ID: id, Dir: g.dirs[i], Transport: g.net.transport(addr), Bootstrap: bootstrap, Tune: slowTune,
		Clock: g.clk, Logger: log})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { _ = n.Close() })
	g.nodes[i] = n
	return n
}

func (g *group) propose(n *Node, c meta.Command) {
	g.t.Helper()
	res, err := n.Propose(c, 5*time.Second)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		g.t.Fatalf("%s: %v", c.Kind(), err)
	}
}

func hasTenant(n *Node, id string) bool {
	for _, tn := range n.FSM.State().Tenants() {
		if tn.TenantID == id {
			return true
		}
	}
	return false
}

// followers gives the members other than l.
func followers(nodes []*Node, l *Node) (out []int) {
	for i, n := range nodes {
		if n != l {
			out = append(out, i)
		}
	}
	return out
}

func TestStorageIDIsKeptAndNewAfterAWipe(t *testing.T) {
	dir := t.TempDir()
	a, created, err := LoadOrCreateStorageID(dir)
	if err != nil || !created || len(a) != 16 {
		t.Fatalf("first: %q %v %v", a, created, err)
	}
	if b, created, err := LoadOrCreateStorageID(dir); b != a || created || err != nil {
		t.Fatalf("again: %q %v %v, want %q kept", b, created, err, a)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if c, created, err := LoadOrCreateStorageID(dir); c == a || !created || err != nil {
		t.Fatalf("after the wipe: %q %v %v, want a new id", c, created, err)
	}
	if err := os.WriteFile(dir+"/"+StorageIDFile, []byte("not-an-id\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateStorageID(dir); !errors.Is(err, ErrBadStorageID) {
		t.Fatalf("a bad file: %v", err)
	}
	if has, err := HasState(dir); has || err != nil {
		t.Fatalf("a dir that never ran Raft: %v %v", has, err)
	}
	if node, sid := SplitServerID(ServerID("cp1", a)); node != "cp1" || sid != a {
		t.Fatalf("split: %q %q", node, sid)
	}
}

// TestWipedMemberComesBackAsNewServer: a follower's data dir is wiped; it
// restarts under a new storage id at the same address. Its answers are not
// the old server's: with the other follower down, the leader and the wiped
// member cannot commit (without the identity check its acknowledgements
// would count as the old member's, and the write would commit). The
// operator removes the old server (raft refuses two at one address, so the
// add is refused first) and adds the new one, which then catches up.
func TestWipedMemberComesBackAsNewServer(t *testing.T) {
	g := newGroup(t, 3)
	l := leader(t, g.nodes)
	g.propose(l, &meta.CreateTenant{TenantID: "before"})
	if has, err := HasState(t.TempDir()); has || err != nil {
		t.Fatalf("an empty dir: %v %v", has, err)
	}
	fs := followers(g.nodes, l)
	v, f := fs[0], fs[1]
	old := g.nodes[v].ID
	if err := g.nodes[v].Close(); err != nil {
		t.Fatal(err)
	}
	if has, err := HasState(g.dirs[v]); !has || err != nil {
		t.Fatalf("a member's dir after a run: %v %v", has, err)
	}
	if err := os.RemoveAll(g.dirs[v]); err != nil {
		t.Fatal(err)
	}
	sid, created, err := LoadOrCreateStorageID(g.dirs[v])
	if err != nil || !created {
		t.Fatal(created, err)
	}
	nv := g.start(v, ServerID(fmt.Sprintf("m%d", v+1), sid), nil)
	waitFor(t, "the wiped member hearing the leader", 10*time.Second, func() bool { return nv.Raft.Leader() != "" })
	if err := g.nodes[f].Close(); err != nil {
		t.Fatal(err)
	}
	res, err := l.Propose(&meta.CreateTenant{TenantID: "lost-quorum"}, 5*time.Second)
	if err == nil && res.Err == nil {
		t.Fatal("a write committed with the leader and the wiped member only: the wiped member counted as the old one")
	}
	if hasTenant(nv, "lost-quorum") || hasTenant(nv, "before") {
		t.Fatal("the wiped member applied entries as the old server")
	}
	if !strings.Contains(g.logs[l.index(g.nodes)].String(), "answered as "+string(nv.ID)) {
		t.Fatalf("no identity warning on the leader:\n%s", g.logs[l.index(g.nodes)])
	}
	if got := l.Hold.AnsweredAs()[old]; got != nv.ID {
		t.Fatalf("the leader's view of who answers for %s: %q", old, got)
	}
	g.start(f, g.nodes[f].ID, nil)
	l = leader(t, g.nodes)
	if err := l.AddMember(nv.ID, nv.Hold.LocalAddr(), meta.BuildMaxLevel, true, 5*time.Second); meta.StatusOf(err) != 409 ||
		!strings.Contains(err.Error(), string(old)) {
		t.Fatalf("adding the new server while the old one holds its address: %v", err)
	}
	if err := l.RemoveMember(old, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.AddMember(nv.ID, nv.Hold.LocalAddr(), meta.BuildMaxLevel, true, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	g.propose(l, &meta.CreateTenant{TenantID: "after"})
	waitFor(t, "the new member's state", 10*time.Second, func() bool { return hasTenant(nv, "after") && hasTenant(nv, "before") })
	voters, _ := l.Voters()
	want := []string{string(g.nodes[0].ID), string(g.nodes[1].ID), string(g.nodes[2].ID)}
	if slices.Sort(voters); fmt.Sprint(voters) != fmt.Sprint(want) {
		t.Fatalf("voters %v", voters)
	}
	if err := l.RemoveMember(old, time.Second); !errors.Is(err, ErrNotMember) {
		t.Fatalf("removing the old server again: %v", err)
	}
}

// TestMemberBelowFloorHeldThenReleased: with the floor at 12, a follower
// reports level 11: the leader holds it (one warning, the gauge at 1) and
// it gets no entry; it reports 14 and, on the next recheck (the fake
// clock), it is released and catches up.
func TestMemberBelowFloorHeldThenReleased(t *testing.T) {
	g := newGroup(t, 3)
	l := leader(t, g.nodes)
	for _, n := range g.nodes {
		g.propose(l, &meta.MemberLevelReport{MemberID: string(n.ID), Level: meta.BuildMaxLevel})
	}
	g.propose(l, &meta.RegisterBroker{NodeID: "b1", StorageID: "s1", AtMs: 1000})
	if fl := l.FSM.State().Floor(); fl != 12 {
		t.Fatalf("floor %d after a registration with identity, want 12", fl)
	}
	fs := followers(g.nodes, l)
	v, o := g.nodes[fs[0]], g.nodes[fs[1]]
	g.propose(l, &meta.MemberLevelReport{MemberID: string(v.ID), Level: 11})
	waitFor(t, "the hold", 10*time.Second, func() bool { return l.Hold.Held(v.ID) })
	// Both senders to v (replication and heartbeats) wait on the fake clock:
	// nothing looks at v's standing again until it advances.
	waitFor(t, "both sends to the held member waiting", 10*time.Second, func() bool { return len(g.clk.Deadlines()) >= 2 })
	g.propose(l, &meta.CreateTenant{TenantID: "during"})
	waitFor(t, "the other follower applying", 10*time.Second, func() bool { return hasTenant(o, "during") })
	g.propose(l, &meta.MemberLevelReport{MemberID: string(v.ID), Level: meta.BuildMaxLevel})
	if hasTenant(v, "during") || !l.Hold.Held(v.ID) || !l.Hold.BelowFloor()[v.ID] {
		t.Fatal("the held member was fed, or released before a recheck")
	}
	g.clk.Advance(DefaultHoldRecheck)
	waitFor(t, "the release and catch-up", 10*time.Second, func() bool { return hasTenant(v, "during") })
	if l.Hold.Held(v.ID) || l.Hold.BelowFloor()[v.ID] {
		t.Fatalf("still held: %v", l.Hold.BelowFloor())
	}
	logs := g.logs[l.index(g.nodes)].String()
	if c := strings.Count(logs, "holding a control-plane member"); c != 1 || !strings.Contains(logs, "released a held") {
		t.Fatalf("%d hold warnings (want 1), release logged %v:\n%s", c, strings.Contains(logs, "released a held"), logs)
	}
}

// TestAddMemberBelowFloorRefused: at floor 12 a candidate at 11, or one
// that reported no level, is refused naming both levels; one at 14 joins.
func TestAddMemberBelowFloorRefused(t *testing.T) {
	g := newGroup(t, 1)
	l := leader(t, g.nodes)
	g.propose(l, &meta.MemberLevelReport{MemberID: string(l.ID), Level: meta.BuildMaxLevel})
	g.propose(l, &meta.RegisterBroker{NodeID: "b1", StorageID: "s1", AtMs: 1000})
	var mle *meta.MemberLevelError
	err := l.AddMember("m2/0000000000000002", "m2", 11, true, time.Second)
	if !errors.As(err, &mle) || !strings.Contains(err.Error(), "11") || !strings.Contains(err.Error(), "12") ||
		meta.StatusOf(err) != 409 {
		t.Fatalf("below the floor: %v", err)
	}
	if err := l.AddMember("m2/0000000000000002", "m2", 0, false, time.Second); !errors.As(err, &mle) || !mle.Unreported {
		t.Fatalf("unreported: %v", err)
	}
	if voters, _ := l.Voters(); len(voters) != 1 {
		t.Fatalf("voters after refusals %v", voters)
	}
	if err := l.TransferLeadership("nobody/0000000000000000"); meta.StatusOf(err) != 404 {
		t.Fatalf("transfer to a non-member: %v", err)
	}
}

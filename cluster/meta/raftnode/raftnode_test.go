package raftnode

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/internal/testwait"
)

// cluster starts three members on in-memory transports, all bootstrapped
// with the same three voters, with short timeouts.
func cluster(t *testing.T) []*Node {
	t.Helper()
	return start(t, []string{t.TempDir(), t.TempDir(), t.TempDir()})
}

// start starts one member per data dir (bootstrap is ignored where a dir
// already holds state); each is closed at cleanup unless closed before.
func start(t *testing.T, dirs []string) []*Node {
	t.Helper()
	var trans []*raft.InmemTransport
	var servers []raft.Server
	for i := range dirs {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(fmt.Sprintf("m%d", i+1)))
		trans = append(trans, tr)
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(addr), Address: addr})
	}
	for i, a := range trans {
		for j, b := range trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	nodes := make([]*Node, len(dirs))
	for i := range nodes {
		n, err := Start(Config{ID: servers[i].ID, Dir: dirs[i], Transport: trans[i], Bootstrap: servers,
			// The production timeouts (DefaultHeartbeatTimeout): at 200 ms a loaded machine
			// lost leadership mid-proposal ("leadership lost while committing log").
			Tune: func(c *raft.Config) { c.CommitTimeout = 5 * time.Millisecond }})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n
		t.Cleanup(func() { _ = n.Close() })
	}
	return nodes
}

// waitFor waits for cond with a deadline (checking every few milliseconds).
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

func leader(t *testing.T, nodes []*Node) *Node {
	t.Helper()
	var l *Node
	waitFor(t, "leader", 10*time.Second, func() bool {
		for _, n := range nodes {
			if n.Raft.State() == raft.Leader {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

// TestCreateReplicatesToAllThree: a tenant, namespace and stream created
// through the leader reach every member's state, with the same placement.
func TestCreateReplicatesToAllThree(t *testing.T) {
	nodes := cluster(t)
	l := leader(t, nodes)
	for _, c := range []meta.Command{
		&meta.CreateTenant{TenantID: "t"}, &meta.CreateNamespace{TenantID: "t", Namespace: "ns"},
		&meta.RegisterBroker{NodeID: "b1", AtMs: 1000}, &meta.RegisterBroker{NodeID: "b2", AtMs: 1000},
		&meta.CreateStream{TenantID: "t", Namespace: "ns", Stream: "s", Shards: 4, ReplicationFactor: 2, AtMs: 1000},
	} {
		res, err := l.Propose(c, 5*time.Second)
		if err != nil || res.Err != nil {
			t.Fatalf("%s: %v %v", c.Kind(), err, res.Err)
		}
	}
	want := l.FSM.State().Assignments()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("stream on member %d", i+1), 10*time.Second, func() bool {
			return len(n.FSM.State().Streams()) == 1
		})
		got := n.FSM.State().Assignments()
		if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 4 {
			t.Fatalf("member %d placement %v, leader's %v", i+1, got, want)
		}
	}
	if res, err := nodes[0].Propose(&meta.CreateTenant{TenantID: "t"}, time.Second); err == nil && res.Err == nil &&
		nodes[0] == l {
		t.Fatal("a second create of tenant t was not refused")
	}
}

// TestUnknownKindStopsTheMember: an entry of a kind this build does not
// know is committed; each member that reaches it logs it and stops, applying
// nothing after it. The leader stops first; a second member stops once it
// is elected and commits the entry; the third (left without a quorum) may
// never learn the entry was committed, and then has not applied it either.
func TestUnknownKindStopsTheMember(t *testing.T) {
	nodes := cluster(t)
	l := leader(t, nodes)
	if _, err := l.Propose(&meta.CreateTenant{TenantID: "before"}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	_, err := l.ApplyEntry([]byte{0x7f, 0x00, 0x00, 0x01, '{', '}'}, 5*time.Second)
	if !errors.Is(err, meta.ErrUnreadableEntry) {
		t.Fatalf("leader's answer %v, want a fatal entry", err)
	}
	fatalIndex := l.Raft.LastIndex()
	select {
	case <-l.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not stop")
	}
	stopped := func() (n int) {
		for _, m := range nodes {
			if m.Err() != nil {
				n++
			}
		}
		return n
	}
	waitFor(t, "a second member stopping", 20*time.Second, func() bool { return stopped() >= 2 })
	for i, n := range nodes {
		if ts := n.FSM.State().Tenants(); len(ts) != 1 {
			t.Fatalf("member %d tenants %v", i+1, ts)
		}
		var fe *meta.FatalError
		switch {
		case n.Err() == nil && n.FSM.State().Index() >= fatalIndex:
			t.Fatalf("member %d went past the fatal entry %d", i+1, fatalIndex)
		case n.Err() != nil && (!errors.As(n.Err(), &fe) || fe.Reason != "unknown kind"):
			t.Fatalf("member %d: %v", i+1, n.Err())
		case n.Err() != nil:
			<-n.Stopped()
			if n.Raft.State() != raft.Shutdown {
				t.Fatalf("member %d raft state %s", i+1, n.Raft.State())
			}
		}
	}
}

// TestRestartFromSnapshotAndWAL: a snapshot persisted through raft's file
// store, then more entries in the WAL; after every member is closed and
// started again on its directory, each state is back, restored from the
// snapshot and the WAL's entries after it.
func TestRestartFromSnapshotAndWAL(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	nodes := start(t, dirs)
	l := leader(t, nodes)
	for _, c := range []meta.Command{&meta.CreateTenant{TenantID: "t"}, &meta.CreateNamespace{TenantID: "t", Namespace: "ns"}} {
		if res, err := l.Propose(c, 5*time.Second); err != nil || res.Err != nil {
			t.Fatalf("%v %v", err, res.Err)
		}
	}
	if err := l.Raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	if res, err := l.Propose(&meta.CreateTenant{TenantID: "after"}, 5*time.Second); err != nil || res.Err != nil {
		t.Fatalf("%v %v", err, res.Err)
	}
	for _, n := range nodes {
		waitFor(t, "both tenants", 10*time.Second, func() bool { return len(n.FSM.State().Tenants()) == 2 })
	}
	want := l.FSM.State().Index()
	for _, n := range nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	again := start(t, dirs)
	leader(t, again)
	for i, n := range again {
		waitFor(t, fmt.Sprintf("member %d's state back", i+1), 10*time.Second, func() bool {
			return n.FSM.State().Index() >= want && len(n.FSM.State().Namespaces()) == 1
		})
		if ts := n.FSM.State().Tenants(); len(ts) != 2 {
			t.Fatalf("member %d tenants %v", i+1, ts)
		}
	}
	// The leader's state came from its snapshot: its feed starts there.
	var gone *meta.GoneError
	if _, err := again[l.index(nodes)].FSM.Changes(0, 0); !errors.As(err, &gone) {
		t.Fatalf("leader's feed from 0 after the restart: %v, want Gone (restored from the snapshot)", err)
	}
}

// index gives n's position in nodes.
func (n *Node) index(nodes []*Node) int {
	for i, m := range nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// TestNewClusterAutoFinalize: every member reports its level, one broker
// registers with features; the leader's step finalizes them in order
// (publisher_principal excepted) and every member has them enabled.
func TestNewClusterAutoFinalize(t *testing.T) {
	nodes := cluster(t)
	l := leader(t, nodes)
	now := time.Now().UnixMilli()
	if step, err := l.AutoFinalize(now, 5*time.Second); err != nil || step.Action != meta.AutoIdle {
		t.Fatalf("before any registration: %v %v", step.Action, err)
	}
	feats := []string{meta.FeatureGenerationStart, meta.FeatureMajorityAck, meta.FeaturePublisherPrincipal}
	if res, err := l.Propose(&meta.RegisterBroker{NodeID: "b1", Features: feats, AtMs: now}, 5*time.Second); err != nil || res.Err != nil {
		t.Fatalf("%v %v", err, res.Err)
	}
	if step, err := l.AutoFinalize(now, 5*time.Second); err != nil || step.Action != meta.AutoWait {
		t.Fatalf("no member reported yet: %v %v", step.Action, err)
	}
	for _, n := range nodes {
		if _, err := l.ReportLevel(n.ID, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	step, err := l.AutoFinalize(now+1000, 5*time.Second)
	if err != nil || step.Action != meta.AutoPropose || len(step.Commands) != 2 {
		t.Fatalf("step %+v: %v", step, err)
	}
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("features on member %d", i+1), 10*time.Second, func() bool {
			return len(n.FSM.State().Enabled()) == 2
		})
		if n.FSM.State().IsEnabled(meta.FeaturePublisherPrincipal) {
			t.Fatalf("member %d enabled publisher_principal", i+1)
		}
	}
}

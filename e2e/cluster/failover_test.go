package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// cpMember is one member of a three-member control plane.
type cpMember struct {
	id, rest, raft, metrics, dir string
	proc                         *supervisor.Process
}

// startControlPlaneGroup starts three felix-controlplane members as one Raft group (one
// admin token in every data dir) and waits until each knows a leader (/ready).
func startControlPlaneGroup(ctx context.Context, t *testing.T) (*fixture, []*cpMember) {
	t.Helper()
	f := &fixture{t: t, sup: supervisor.NewForTest(t), root: t.TempDir(), token: "e2e-cluster-admin-token"}
	var err error
	if f.cert, err = scenario.WriteCert(f.root); err != nil {
		t.Fatal(err)
	}
	var members []*cpMember
	var peers, urls, bases []string
	for i := 1; i <= 3; i++ {
		m := &cpMember{id: fmt.Sprintf("cp%d", i), rest: freeAddr(t), raft: freeAddr(t), metrics: freeAddr(t)}
		m.dir = filepath.Join(f.root, m.id)
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.dir, "admin-token"), []byte(f.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		peers, urls = append(peers, m.id+"@"+m.raft), append(urls, m.id+"@http://"+m.rest)
		bases = append(bases, "http://"+m.rest)
		members = append(members, m)
	}
	for _, m := range members {
		spec := supervisor.Spec{Name: m.id, Path: bins.controlPlane, Dir: f.root, Env: []string{
			"FELIX_CONTROLPLANE_NODE_ID=" + m.id, "FELIX_CONTROLPLANE_BIND=" + m.rest,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + m.raft, "FELIX_CONTROLPLANE_METRICS_BIND=" + m.metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + m.dir, "FELIX_CONTROLPLANE_PEERS=" + strings.Join(peers, ","),
			"FELIX_CONTROLPLANE_PEER_URLS=" + strings.Join(urls, ",")},
			Ready: supervisor.Ready{URL: "http://" + m.metrics + "/live", Timeout: 30 * time.Second}}
		if m.proc, err = f.sup.Start(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range members {
		waitFor(t, 30*time.Second, m.id+" knowing a leader", func() bool {
			code, _ := call(ctx, t, "GET", "http://"+m.metrics+"/ready", "", nil, nil)
			return code == http.StatusOK
		})
	}
	f.cpURL = strings.Join(bases, ",")
	f.tokenFile = filepath.Join(members[0].dir, "admin-token")
	return f, members
}

// leaderOf asks the live members which one leads (GET /v1/members).
func leaderOf(ctx context.Context, t *testing.T, members []*cpMember) *cpMember {
	t.Helper()
	var found *cpMember
	waitFor(t, 30*time.Second, "a control-plane leader", func() bool {
		for _, m := range members {
			if !m.proc.Running() {
				continue
			}
			var body struct {
				Leader string `json:"leader"`
			}
			if code, _ := call(ctx, t, "GET", "http://"+m.rest+"/v1/members", "", nil, &body); code != http.StatusOK {
				continue
			}
			for _, l := range members {
				if body.Leader == l.id || strings.HasPrefix(body.Leader, l.id+"/") { // the Raft id is cpN/storage-id
					found = l
					return l.proc.Running()
				}
			}
		}
		return false
	})
	return found
}

// Brokers given all three members' URLs keep working through a SIGKILL of the leader: an
// admin write through a broker lands once a new leader is elected (the broker's client
// moves to the next member), and the change reaches every broker's table through the feed
// of a surviving member.
func TestBrokersFollowALeaderKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f, members := startControlPlaneGroup(ctx, t)
	for i := range 3 {
		f.startBroker(ctx, i)
	}
	admin := "http://" + f.brokers[0].addr
	for _, p := range []string{"/v1/tenants", "/v1/tenants/" + tenant + "/namespaces"} {
		if code, out := call(ctx, t, "POST", admin+p, "", map[string]any{"tenant_id": tenant, "namespace": namespace}, nil); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", p, code, out)
		}
	}
	leader := leaderOf(ctx, t, members)
	if _, err := leader.proc.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	streams := "http://" + f.brokers[1].addr + "/v1/tenants/" + tenant + "/namespaces/" + namespace + "/streams"
	var created struct {
		CreatedIndex uint64 `json:"created_index"`
	}
	waitFor(t, 60*time.Second, "the create through broker 1 after the leader's kill", func() bool {
		code, out := call(ctx, t, "POST", streams, "", map[string]any{"stream": "after-kill", "shards": 2, "replication_factor": 3}, &created)
		if code != http.StatusCreated && code != http.StatusServiceUnavailable {
			t.Fatalf("create after the kill: %d %s", code, out)
		}
		return code == http.StatusCreated
	})
	t.Logf("killed leader %s; the create through broker 1 landed %v after the kill (index %d)", leader.id, time.Since(killed).Round(time.Millisecond), created.CreatedIndex)
	for _, b := range f.brokers {
		waitFor(t, 30*time.Second, b.id+"'s table holding the stream created after the kill", func() bool {
			v := f.view(ctx, b, created.CreatedIndex, 5*time.Second)
			n := 0
			for _, row := range v.Ownership {
				if strings.Contains(row.Shard, "/after-kill/") && len(row.ReplicaSet) == 2 {
					n++
				}
			}
			return v.Seq >= created.CreatedIndex && n == 2
		})
	}
}

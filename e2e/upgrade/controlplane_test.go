package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/testbed/supervisor"
)

// cpProc is a one-member felix-controlplane: its REST URL, admin token (file) and build.
type cpProc struct {
	url, token, tokenFile string
	proc                  *supervisor.Process
	built                 build
}

// startControlPlane starts a one-member control plane of build b (it bootstraps its group)
// and waits for /ready; its admin token is the data dir's admin-token file.
func (r *rig) startControlPlane(ctx context.Context, b build) *cpProc {
	r.t.Helper()
	rest, raftAddr, metrics := freeAddr(r.t), freeAddr(r.t), freeAddr(r.t)
	data := filepath.Join(r.root, "cp")
	spec := supervisor.Spec{Name: "controlplane", Path: b.controlPlane, Dir: r.root,
		Env: []string{"FELIX_CONTROLPLANE_NODE_ID=cp1", "FELIX_CONTROLPLANE_BIND=" + rest,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + raftAddr, "FELIX_CONTROLPLANE_METRICS_BIND=" + metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + data, "FELIX_CONTROLPLANE_PEERS="},
		Ready: supervisor.Ready{URL: "http://" + metrics + "/ready", Timeout: time.Minute}}
	p, err := r.sup.Start(ctx, spec)
	if err != nil {
		r.t.Fatalf("start the control plane (%s): %v", b.name, err)
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		r.t.Fatal(err)
	}
	r.cp = &cpProc{url: "http://" + rest, token: strings.TrimSpace(string(tok)), tokenFile: filepath.Join(data, "admin-token"),
		proc: p, built: b}
	return r.cp
}

// startClusterBroker starts broker i of build b in cluster mode against the rig's control
// plane, waiting for its ready file (written once it registered and loaded the snapshot)
// when ready.
func (r *rig) startClusterBroker(ctx context.Context, b build, i int, ready bool) *brokerProc {
	r.t.Helper()
	name := fmt.Sprintf("broker-%d", i)
	bp := &brokerProc{name: name, addr: freeAddr(r.t), internal: freeAddr(r.t), nodeID: fmt.Sprintf("node-%d.felix", i),
		data: filepath.Join(r.root, name, "data"), built: b}
	spec := r.brokerSpec(b, name, bp.addr, "FELIX_INTERNAL_BIND="+bp.internal, "FELIX_NODE_ID="+bp.nodeID,
		"FELIX_CONTROLPLANE_URL="+r.cp.url, "FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE="+r.cp.tokenFile,
		"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS=500")
	if !ready {
		spec.Ready = supervisor.Ready{}
	}
	var err error
	if bp.proc, err = r.sup.Start(ctx, spec); err != nil {
		r.t.Fatalf("start %s (%s): %v", name, b.name, err)
	}
	return bp
}

// brokerView is a row of the control plane's GET /v1/brokers.
type brokerView struct {
	NodeID   string   `json:"node_id"`
	Features []string `json:"features"`
}

// clusterView is the part of a broker's GET /cluster/ownership the tests read.
type clusterView struct {
	Ownership []struct {
		Shard      string   `json:"shard"`
		Leader     string   `json:"leader"`
		ReplicaSet []string `json:"replica_set"`
	} `json:"ownership"`
	Open []struct {
		Shard   string `json:"shard"`
		Role    string `json:"role"`
		Durable uint64 `json:"durable_offset"`
	} `json:"open"`
}

const tenant, namespace = "t1", "n1"

// createStream creates tenant/namespace (when first) and a one-shard stream of replication
// factor rf through broker bp's admin API (forwarded to the control plane).
func (r *rig) createStream(ctx context.Context, bp *brokerProc, stream string, rf int) {
	r.t.Helper()
	admin := "http://" + bp.addr
	for _, p := range []string{"/v1/tenants", "/v1/tenants/" + tenant + "/namespaces"} {
		if code, out := call(ctx, r.t, "POST", admin+p, "", map[string]any{"tenant_id": tenant, "namespace": namespace}, nil); code != 201 && code != 409 {
			r.t.Fatalf("POST %s through %s (%s): %d %s", p, bp.name, bp.built.name, code, out)
		}
	}
	code, out := call(ctx, r.t, "POST", admin+"/v1/tenants/"+tenant+"/namespaces/"+namespace+"/streams", "",
		map[string]any{"stream": stream, "shards": 1, "replication_factor": rf}, nil)
	if code != 201 {
		r.t.Fatalf("create %s through %s (%s): %d %s", stream, bp.name, bp.built.name, code, out)
	}
}

// leaderOf waits until every broker's table holds stream's shard 0, open in its role on
// each, and returns its leader.
func (r *rig) leaderOf(ctx context.Context, brokers []*brokerProc, stream string) *brokerProc {
	r.t.Helper()
	var leader string
	for _, b := range brokers {
		waitFor(r.t, time.Minute, b.name+" opening "+stream, func() bool {
			v := r.view(ctx, b)
			for _, o := range v.Open {
				if strings.Contains(o.Shard, "/"+stream+"/") {
					for _, row := range v.Ownership {
						if row.Shard == o.Shard {
							leader = row.Leader
						}
					}
					return true
				}
			}
			return false
		})
	}
	for _, b := range brokers {
		if b.nodeID == leader {
			return b
		}
	}
	r.t.Fatalf("%s: leader %q is none of the brokers", stream, leader)
	return nil
}

// view reads bp's GET /cluster/ownership.
func (r *rig) view(ctx context.Context, bp *brokerProc) clusterView {
	var v clusterView
	call(ctx, r.t, "GET", "http://"+bp.addr+"/cluster/ownership", "", nil, &v)
	return v
}

// durableOn reads bp's durable offset of stream's shard (0 when not open).
func (r *rig) durableOn(ctx context.Context, bp *brokerProc, stream string) uint64 {
	for _, o := range r.view(ctx, bp).Open {
		if strings.Contains(o.Shard, "/"+stream+"/") {
			return o.Durable
		}
	}
	return 0
}

// clusterFelix runs build b's felix against bp in tenant/namespace.
func (r *rig) clusterFelix(ctx context.Context, b build, bp *brokerProc, args ...string) string {
	r.t.Helper()
	return r.mustFelix(ctx, b, bp, append([]string{"--tenant", tenant, "--namespace", namespace}, args...)...)
}

// replicated publishes n records "prefix-i" through stream's leader with the leader's build's
// CLI, waits until every broker holds them durably, and reads them back from the leader.
func (r *rig) replicated(ctx context.Context, brokers []*brokerProc, stream, prefix string, n int) {
	r.t.Helper()
	leader := r.leaderOf(ctx, brokers, stream)
	before := r.durableOn(ctx, leader, stream)
	for i := range n {
		r.clusterFelix(ctx, leader.built, leader, "pub", stream, fmt.Sprintf("%s-%d", prefix, i))
	}
	for _, b := range brokers {
		waitFor(r.t, time.Minute, fmt.Sprintf("%s (%s) durable at %d on %s", b.name, b.built.name, before+uint64(n), stream), func() bool {
			return r.durableOn(ctx, b, stream) >= before+uint64(n)
		})
	}
	got := r.clusterFelix(ctx, leader.built, leader, "sub", stream, "--from", fmt.Sprint(before), "--count", fmt.Sprint(n))
	if want := records(prefix, n); got != want {
		r.t.Fatalf("%s read back from %s (%s): %q, want %q", stream, leader.name, leader.built.name, got, want)
	}
}

// logWarnings logs the WARN and ERROR lines of a process's output (what a mismatch costs is
// said, not hidden), at most 10; the test setup's own (auth off, no internal mTLS) are left out.
func logWarnings(t *testing.T, name, tail string) {
	t.Helper()
	n := 0
	for _, line := range strings.Split(tail, "\n") {
		expected := strings.Contains(line, "internal transport unauthenticated") || strings.Contains(line, "auth disabled")
		if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && !expected && n < 10 {
			t.Logf("%s: %s", name, line)
			n++
		}
	}
}

// records is the text felix sub prints for records "prefix-0".."prefix-(n-1)".
func records(prefix string, n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "%s-%d\n", prefix, i)
	}
	return sb.String()
}

// registered waits until the control plane lists every broker of brokers.
func (r *rig) registered(ctx context.Context, brokers []*brokerProc) []brokerView {
	r.t.Helper()
	var views []brokerView
	waitFor(r.t, time.Minute, "every broker registered", func() bool {
		views = nil
		call(ctx, r.t, "GET", r.cp.url+"/v1/brokers", "", nil, &views)
		return len(views) == len(brokers)
	})
	return views
}

// TestControlPlaneREST (seed "Control-plane REST: additive, and the broker tolerates
// absence"): old brokers against the new control plane and new brokers against the old one
// register, follow the catalog, replicate a stream of replication factor 2, and their
// heartbeats keep them live; a current leader's replica reports are taken by the old
// control plane (no "replica report not delivered"); neither direction fails.
func TestControlPlaneREST(t *testing.T) {
	gate(t)
	predates(t, "8423823", "leader reports (POST /v1/reports from the broker)")
	predates(t, "bc12c1f", "the replica reports' storage identities")
	for _, c := range []struct{ name, cp, brokers string }{
		{"old brokers, new control plane", "new", "old"}, {"new brokers, old control plane", "old", "new"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			r := newRig(t)
			r.startControlPlane(ctx, pick(c.cp))
			brokers := []*brokerProc{r.startClusterBroker(ctx, pick(c.brokers), 0, true),
				r.startClusterBroker(ctx, pick(c.brokers), 1, true)}
			views := r.registered(ctx, brokers)
			// The create waits for the new-cluster finalize: on v0.1.0's control plane a create
			// naming no routing that is proposed before jump_hash_routing is enabled and applied
			// after is refused 409 entry_level ("a jump_hash stream needs an entry at metadata
			// level 3; this one is at 1"; CreateStream.levels read the proposer's state, apply's
			// normalize the applied one). The current build is fixed
			// (TestCreateRacingJumpHashFinalize); the race is not this surface's.
			waitFor(t, 30*time.Second, "the new cluster's features finalized", func() bool { return len(r.enabled(ctx)) > 0 })
			r.createStream(ctx, brokers[0], "orders", 2)
			r.replicated(ctx, brokers, "orders", "rec", 3)
			t.Logf("%s control plane, %s brokers: registered %+v; RF2 stream replicated", r.cp.built.name, brokers[0].built.name, views)
			for _, b := range append(brokers, &brokerProc{name: "controlplane", proc: r.cp.proc}) {
				if !b.proc.Running() {
					t.Fatalf("%s exited: %s", b.name, b.proc.Tail())
				}
				logWarnings(t, b.name, b.proc.Tail())
				// Seed: "the reports still land, minus the new information".
				if line := lineWith(b.proc.Tail(), "replica report not delivered"); line != "" {
					t.Fatalf("%s (%s) on a %s control plane: %s", b.name, b.built.name, r.cp.built.name, line)
				}
			}
		})
	}
}

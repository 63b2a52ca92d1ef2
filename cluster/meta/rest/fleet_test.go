package rest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
)

// upgraded makes the group an upgraded cluster (b1 registered twice, so the
// new-cluster rule does not apply) with b1 reporting feats and the member's
// level reported.
func upgraded(t *testing.T, n *raftnode.Node, srv *httptest.Server, feats string) {
	t.Helper()
	for range 2 {
		expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1","features":[`+feats+`]}`, 200)
	}
	if _, err := n.ReportLevel(n.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestFleetFeaturesThroughREST(t *testing.T) {
	n, srv := member(t, meta.Config{}, false)
	upgraded(t, n, srv, `"generation_start","majority_ack"`)
	const fin = "/v1/fleet/features/%s/finalize"
	e := expect(t, srv, "POST", fmt.Sprintf(fin, "majority_ack")+"?dry_run=1", "", 409)
	if d, _ := e.Detail.(map[string]any); d == nil || fmt.Sprint(d["missing_prerequisites"]) != "[generation_start]" {
		t.Fatalf("missing prerequisite: %+v", e)
	}
	e = expect(t, srv, "POST", fmt.Sprintf(fin, "jump_hash_routing")+"?dry_run=1", "", 409)
	if d, _ := e.Detail.(map[string]any); d == nil || fmt.Sprint(d["lacking"]) != "[b1]" {
		t.Fatalf("lacking broker: %+v", e)
	}
	expect(t, srv, "POST", fmt.Sprintf(fin, "jump_hash_routing"), "", 409)
	expect(t, srv, "POST", fmt.Sprintf(fin, "no_such_feature")+"?dry_run=1", "", 404)
	var body FinalizeBody
	if got, _ := call(t, srv, "POST", fmt.Sprintf(fin, "generation_start")+"?dry_run=1", "", &body); got != 200 || !body.DryRun {
		t.Fatalf("dry run: %d %+v", got, body)
	}
	if st := n.FSM.State(); st.IsEnabled(meta.FeatureGenerationStart) {
		t.Fatal("the dry run enabled the feature")
	}
	for _, f := range []string{"generation_start", "majority_ack"} {
		if got, _ := call(t, srv, "POST", fmt.Sprintf(fin, f), "", &body); got != 200 || body.State == nil || body.State.Name != f {
			t.Fatalf("finalize %s: %d %+v", f, got, body)
		}
	}
	var views []FeatureView
	call(t, srv, "GET", "/v1/fleet/features", "", &views)
	i := slices.IndexFunc(views, func(v FeatureView) bool { return v.Name == "majority_ack" })
	if i < 0 || !views[i].Enabled || fmt.Sprint(views[i].SupportedBy) != "[b1]" || len(views) != len(meta.FeatureOrder) {
		t.Fatalf("features: %+v", views)
	}
	e = expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b2","features":["generation_start"],"settings":{"FELIX_INTERNAL_FENCE":"false"}}`, 409)
	if !strings.Contains(e.Message, "majority_ack") || !strings.Contains(e.Message, "unset FELIX_INTERNAL_FENCE") {
		t.Fatalf("registration after finalize: %+v", e)
	}
	var brokers []BrokerView
	if call(t, srv, "GET", "/v1/brokers", "", &brokers); len(brokers) != 1 || brokers[0].State != "live" || len(brokers[0].Missing) != 0 {
		t.Fatalf("brokers: %+v", brokers)
	}
	expect(t, srv, "POST", "/v1/brokers/b1/heartbeat", `{"draining":true}`, 204)
	expect(t, srv, "POST", "/v1/brokers/b9/heartbeat", `{}`, 404)
	expect(t, srv, "POST", "/v1/brokers/b1/heartbeat", `{"node_id":"b2"}`, 400)
	expect(t, srv, "POST", "/v1/reports", `{"kind":"stream","tenant_id":"t","namespace":"n","name":"s","leader":"b1"}`, 404)
	var mb MembersBody
	if call(t, srv, "GET", "/v1/members", "", &mb); mb.Leader != "m1" || len(mb.Members) != 1 || mb.Members[0].Level != meta.BuildMaxLevel {
		t.Fatalf("members: %+v", mb)
	}
}

func TestNewClusterFinalizesAtRegistration(t *testing.T) {
	n, srv := member(t, meta.Config{}, false)
	if _, err := n.ReportLevel(n.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1","features":["generation_start","publisher_principal"]}`, 200)
	st := n.FSM.State()
	if !st.IsEnabled(meta.FeatureGenerationStart) || st.IsEnabled(meta.FeaturePublisherPrincipal) {
		t.Fatalf("new cluster after the first registration: %+v", st.Enabled())
	}
}

// pair starts a two-member group on the in-memory transport, each served
// over httptest with the other's URL known; it gives the leader's and the
// follower's servers.
func pair(t *testing.T) (leader, follower *httptest.Server) {
	t.Helper()
	var trans []*raft.InmemTransport
	var servers []raft.Server
	for _, id := range []string{"m1", "m2"} {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		trans, servers = append(trans, tr), append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: addr})
	}
	trans[0].Connect(trans[1].LocalAddr(), trans[1])
	trans[1].Connect(trans[0].LocalAddr(), trans[0])
	urls := map[raft.ServerID]string{}
	nodes := make([]*raftnode.Node, 2)
	srvs := make([]*httptest.Server, 2)
	for i := range nodes {
		n, err := raftnode.Start(raftnode.Config{ID: servers[i].ID, Dir: t.TempDir(), Transport: trans[i], Bootstrap: servers, Tune: tune})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		nodes[i] = n
		srvs[i] = httptest.NewServer(New(Config{Node: n, Token: testToken, MemberURL: func(id raft.ServerID) string { return urls[id] }}))
		t.Cleanup(srvs[i].Close)
		urls[n.ID] = srvs[i].URL
	}
	waitFor(t, "leader", 10*time.Second, func() bool {
		return nodes[0].Raft.State() == raft.Leader || nodes[1].Raft.State() == raft.Leader
	})
	if nodes[0].Raft.State() == raft.Leader {
		return srvs[0], srvs[1]
	}
	return srvs[1], srvs[0]
}

func TestFollowerForwardsOnce(t *testing.T) {
	leader, follower := pair(t)
	waitFor(t, "the follower to know the leader", 10*time.Second, func() bool {
		got, _ := call(t, follower, "GET", "/v1/tenants", "", nil)
		return got == 200
	})
	expect(t, follower, "POST", "/v1/tenants", `{"tenant_id":"via_follower"}`, 201)
	var ts []meta.Tenant
	if call(t, leader, "GET", "/v1/tenants", "", &ts); len(ts) != 1 || ts[0].TenantID != "via_follower" {
		t.Fatalf("the leader's tenants: %+v", ts)
	}
	req := httptest.NewRequest("POST", "/v1/tenants", strings.NewReader(`{"tenant_id":"x"}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set(ForwardedHeader, "1")
	resp, err := follower.Client().Do(mustClient(t, follower, req))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a forwarded request at a follower: %d (never a chain)", resp.StatusCode)
	}
}

// mustClient turns a server-side test request into one for srv.
func mustClient(t *testing.T, srv *httptest.Server, r *http.Request) *http.Request {
	t.Helper()
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", strings.TrimPrefix(srv.URL, "http://")
	return out
}

func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	tok, created, err := LoadOrCreateToken(dir)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("first start: %q %v %v", tok, created, err)
	}
	fi, err := os.Stat(filepath.Join(dir, TokenFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v %v", fi, err)
	}
	again, created, err := LoadOrCreateToken(dir)
	if err != nil || created || again != tok {
		t.Fatalf("second start: %q %v %v", again, created, err)
	}
	if err := os.Chmod(filepath.Join(dir, TokenFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadOrCreateToken(dir); err == nil {
		t.Fatal("a world-readable token file was accepted")
	}
}

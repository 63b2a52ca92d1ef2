package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/cluster/meta/metaclient"
	"felix/cluster/meta/metaclient/metaclienttest"
	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
	"felix/core"
)

// testControlPlane is a one-member control plane (metaclienttest) and the file holding
// its admin token.
type testControlPlane struct {
	*metaclienttest.Member
	node      *raftnode.Node
	srv       *httptest.Server
	tokenFile string
}

func startTestControlPlane(t *testing.T) *testControlPlane {
	t.Helper()
	m := metaclienttest.Start(t, rest.Config{MaxWait: 2 * time.Second})
	if _, err := m.Node.ReportLevel(m.Node.ID, 5*time.Second); err != nil { // a new cluster on this release
		t.Fatal(err)
	}
	cp := &testControlPlane{Member: m, node: m.Node, srv: m.Server, tokenFile: filepath.Join(t.TempDir(), "admin-token")}
	if err := os.WriteFile(cp.tokenFile, []byte(metaclienttest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cp
}

// env is a cluster-mode broker's settings for node id.
func (cp *testControlPlane) env(id string) map[string]string {
	return map[string]string{"FELIX_CONTROLPLANE_URL": cp.srv.URL, "FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE": cp.tokenFile,
		"FELIX_INTERNAL_BIND": "127.0.0.1:0", "FELIX_NODE_ID": id, "FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS": "100",
		"FELIX_CONTROLPLANE_SYNC_INTERVAL_MS": "200"}
}

// ownershipOf is the control plane's placement as an ownership table.
func (cp *testControlPlane) ownership() Ownership {
	m := newMirror()
	for _, a := range cp.node.FSM.State().Assignments() {
		m.assignments[a.Key()] = a
	}
	return m.ownership()
}

func startCPBrokers(t *testing.T, cp *testControlPlane, n int) []*internalBroker {
	t.Helper()
	var out []*internalBroker
	for i := range n {
		out = append(out, startInternal(t, cp.env(fmt.Sprintf("node-%d.felix", i))))
	}
	return out
}

// Three brokers register; a stream with replication factor 3 created through one broker's
// admin API reaches every broker's catalog and ownership table as the control plane placed
// it, each broker opens every shard in its role, the new cluster's features show in
// felix_broker_fleet_feature_enabled, and a delete (a tombstone) removes the data
// everywhere.
func TestControlPlaneClusterMode(t *testing.T) {
	cp := startTestControlPlane(t)
	brokers := startCPBrokers(t, cp, 3)
	if bs := cp.node.FSM.State().Brokers(); len(bs) != 3 || bs[0].StorageID == "" || bs[0].ClientAddr == "" || bs[0].InternalAddr == "" {
		t.Fatalf("registered brokers: %+v", bs)
	}
	b0 := brokers[0].srv
	for _, p := range []string{"/v1/tenants", "/v1/tenants/t1/namespaces"} {
		if code, out := adminPost(t, b0, "POST", p, map[string]any{"tenant_id": "t1", "namespace": "ns"}); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", p, code, out)
		}
	}
	streams := "/v1/tenants/t1/namespaces/ns/streams"
	code, out := adminPost(t, b0, "POST", streams, map[string]any{"stream": "orders", "shards": 3, "replication_factor": 3})
	if code != http.StatusCreated || !strings.Contains(out, `"replication_factor":3`) {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, out := adminPost(t, b0, "POST", streams, map[string]any{"stream": "wide", "replication_factor": 4}); code != http.StatusServiceUnavailable {
		t.Fatalf("replication factor 4 with 3 brokers: %d %s, want the control plane's 503", code, out)
	}
	if _, err := b0.catalog.Stream("t1", "ns", "orders"); err != nil {
		t.Fatalf("the creating broker does not read its own create: %v", err)
	}
	want := cp.ownership()
	if len(want) != 3 {
		t.Fatalf("placement: %+v", want)
	}
	for _, b := range brokers {
		waitUntil(t, 20*time.Second, "the placement and every shard open on "+b.srv.cfg.NodeID, func() bool {
			owners, _ := b.srv.owners.Snapshot()
			return owners.equal(want) && holdsInRole(b.srv, want)
		})
		m := b.metricsText(t)
		if !strings.Contains(m, `felix_broker_fleet_feature_enabled{feature="jump_hash_routing"} 1`) ||
			!strings.Contains(m, `felix_broker_fleet_feature_enabled{feature="majority_ack"} 0`) {
			t.Fatalf("fleet feature metrics on %s:\n%s", b.srv.cfg.NodeID, grepLines(m, "fleet_feature"))
		}
	}
	if code, out := adminPost(t, brokers[1].srv, "DELETE", streams+"/orders", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, out)
	}
	for _, b := range brokers {
		waitUntil(t, 20*time.Second, "the tombstoned stream removed on "+b.srv.cfg.NodeID, func() bool {
			_, err := b.srv.catalog.Stream("t1", "ns", "orders")
			_, einfo := b.srv.engine.StreamInfo(core.StreamName{Tenant: "t1", Namespace: "ns", Stream: "orders"})
			return errors.Is(err, ErrNotFound) && errors.Is(einfo, core.ErrNotFound) && len(b.srv.engine.Shards()) == 0
		})
	}
}

// holdsInRole reports whether srv has open exactly the shards want gives it, each in its
// role at its generation.
func holdsInRole(srv *Server, want Ownership) bool {
	n := 0
	for _, a := range want {
		if _, ok := a.Role(srv.cfg.NodeID); ok {
			n++
		}
	}
	got := srv.engine.Shards()
	if len(got) != n {
		return false
	}
	for _, st := range got {
		role, ok := want[st.Ref].Role(srv.cfg.NodeID)
		if !ok || role != st.Role || st.Generation != want[st.Ref].Generation {
			return false
		}
	}
	return true
}

func grepLines(text, word string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A reload keeps what is merely absent from the snapshot and removes only what it
// tombstones; while the control plane is away the broker keeps its catalog and table,
// logs the outage once and counts it, and resumes the feed when it is back.
func TestControlPlaneReloadAndOutage(t *testing.T) {
	cp := startTestControlPlane(t)
	b := startCPBrokers(t, cp, 1)[0]
	srv := b.srv
	for _, st := range []Stream{{TenantID: "default", Namespace: "default", Stream: "local-only", Durable: true}} {
		if _, err := srv.catalog.CreateStream(st, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.cp.reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.catalog.Stream("default", "default", "local-only"); err != nil {
		t.Fatalf("a name absent from the snapshot was removed: %v", err)
	}
	if !strings.Contains(b.logs.String(), "absent from the control plane") {
		t.Fatal("keeping an absent name is not logged")
	}
	for _, p := range []string{"/v1/tenants", "/v1/tenants/t1/namespaces"} {
		body := map[string]any{"tenant_id": "t1", "namespace": "ns"}
		if code, out := adminPost(t, srv, "POST", p, body); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", p, code, out)
		}
	}
	streams := "/v1/tenants/t1/namespaces/ns/streams"
	if code, out := adminPost(t, srv, "POST", streams, map[string]any{"stream": "s1"}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	cp.Down.Store(true)
	waitUntil(t, 20*time.Second, "the outage noticed", func() bool {
		return strings.Contains(b.metricsText(t), "felix_broker_controlplane_reachable 0")
	})
	if code, out := adminPost(t, srv, "POST", streams, map[string]any{"stream": "s2"}); code != http.StatusServiceUnavailable {
		t.Fatalf("a write while the control plane is away: %d %s", code, out)
	}
	if _, err := srv.catalog.Stream("t1", "ns", "s1"); err != nil || len(srv.engine.Shards()) == 0 {
		t.Fatalf("the catalog or the open shards went with the control plane: %v %v", err, srv.engine.Shards())
	}
	// Deleted while this broker cannot see it: the feed brings the tombstone afterwards.
	if res, err := cp.node.Propose(&meta.DeleteStream{TenantID: "t1", Namespace: "ns", Stream: "s1"}, 5*time.Second); err != nil || res.Err != nil {
		t.Fatalf("delete on the control plane: %v %v", err, res.Err)
	}
	cp.Down.Store(false)
	waitUntil(t, 20*time.Second, "the tombstone applied after the outage", func() bool {
		_, err := srv.catalog.Stream("t1", "ns", "s1")
		return errors.Is(err, ErrNotFound) && strings.Contains(b.metricsText(t), "felix_broker_controlplane_reachable 1")
	})
	if n := strings.Count(b.logs.String(), "control plane unreachable"); n != 1 {
		t.Fatalf("the outage logged %d times, want once", n)
	}
	if !strings.Contains(b.metricsText(t), "felix_broker_controlplane_outages_total 1") {
		t.Fatal("the outage is not counted")
	}
	if _, err := srv.catalog.Stream("default", "default", "local-only"); err != nil {
		t.Fatalf("the absent name went later: %v", err)
	}
}

// A registration the control plane refuses (a finalized feature this build lacks) stops
// the broker: Run returns the control plane's reason before the broker is ready.
func TestControlPlaneRefusedRegistration(t *testing.T) {
	cp := startTestControlPlane(t)
	n := cp.node
	for range 2 { // an upgraded cluster: the new-cluster rule does not apply
		if res, err := n.Propose(&meta.RegisterBroker{NodeID: "old.felix", Features: []string{meta.FeatureGenerationStart},
			AtMs: time.Now().UnixMilli()}, 5*time.Second); err != nil || res.Err != nil {
			t.Fatal(err, res.Err)
		}
	}
	if res, err := n.Propose(&meta.FinalizeFeature{Feature: meta.FeatureGenerationStart, AtMs: time.Now().UnixMilli()}, 5*time.Second); err != nil || res.Err != nil {
		t.Fatal(err, res.Err)
	}
	cfg := testConfig(t, t.TempDir(), cp.env("node-0.felix"))
	logs := &syncBuffer{}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = srv.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "generation_start") || !strings.Contains(err.Error(), "409") ||
		!strings.Contains(logs.String(), "refused this broker's registration") {
		t.Fatalf("Run = %v; logs:\n%s", err, logs.String())
	}
	if slices.ContainsFunc(n.FSM.State().Brokers(), func(b meta.Broker) bool { return b.NodeID == "node-0.felix" }) {
		t.Fatal("the refused broker was registered")
	}
	// A wrong admin token (401) stops it too, naming the setting, instead of retrying.
	bad := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(bad, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := cp.env("node-1.felix")
	env["FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE"] = bad
	srv, err = New(testConfig(t, t.TempDir(), env), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Run(ctx); err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE") {
		t.Fatalf("a wrong admin token: Run = %v", err)
	}
}

// FELIX_CONTROLPLANE_URL: ErrConfig with FELIX_CLUSTER_PEERS, without the internal
// transport, or with a URL that is not http(s)://host; the defaults of the intervals.
func TestControlPlaneConfig(t *testing.T) {
	base := map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:6001", "FELIX_INTERNAL_BIND": "127.0.0.1:7001",
		"FELIX_NODE_ID": "a.felix", "FELIX_CONTROLPLANE_URL": " http://127.0.0.1:8443/, http://127.0.0.1:8445"}
	cfg, _, err := LoadConfig(nil, envOf(base))
	if err != nil || !slices.Equal(cfg.ControlPlane.URLs, []string{"http://127.0.0.1:8443", "http://127.0.0.1:8445"}) ||
		cfg.ControlPlane.HeartbeatIntervalMS != 250 || cfg.ControlPlane.SyncIntervalMS != 2000 {
		t.Fatalf("valid: %+v %v", cfg.ControlPlane, err)
	}
	for name, change := range map[string]map[string]string{
		"with static peers": {"FELIX_CLUSTER_PEERS": "a.felix=127.0.0.1:7001/127.0.0.1:6001"},
		"no internal bind":  {"FELIX_INTERNAL_BIND": ""},
		"not a URL":         {"FELIX_CONTROLPLANE_URL": "127.0.0.1:8443"},
		"heartbeat too low": {"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS": "10"},
	} {
		env := map[string]string{}
		for k, v := range base {
			env[k] = v
		}
		for k, v := range change {
			env[k] = v
		}
		if _, _, err := LoadConfig(nil, envOf(env)); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "FELIX_C") {
			t.Errorf("%s: %v, want ErrConfig naming the setting", name, err)
		}
	}
}

// runAt runs a cluster-mode broker on cfg until the test ends (or stop), and waits until
// it is ready.
func runAt(t *testing.T, cfg *Config) (srv *Server, logs *syncBuffer, stop func() error) {
	t.Helper()
	logs = &syncBuffer{}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once bool
	var runErr error
	stop = func() error {
		if !once {
			once = true
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20 s")
			}
		}
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	waitUntil(t, 20*time.Second, "the broker ready", func() bool { return srv.ready.Load() })
	return srv, logs, stop
}

// A broker restarted while the control plane is away serves the catalog and placement it
// held (from <data>/controlplane.json) and registers once the control plane is back.
func TestControlPlaneRestartWhileAway(t *testing.T) {
	cp := startTestControlPlane(t)
	cfg := testConfig(t, t.TempDir(), cp.env("node-0.felix"))
	srv, _, stop := runAt(t, cfg)
	for _, p := range []string{"/v1/tenants", "/v1/tenants/t1/namespaces"} {
		if code, out := adminPost(t, srv, "POST", p, map[string]any{"tenant_id": "t1", "namespace": "ns"}); code != http.StatusCreated {
			t.Fatalf("%s: %d %s", p, code, out)
		}
	}
	if code, out := adminPost(t, srv, "POST", "/v1/tenants/t1/namespaces/ns/streams", map[string]any{"stream": "s1", "shards": 2}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	want := cp.ownership()
	waitUntil(t, 20*time.Second, "the shards open", func() bool { return holdsInRole(srv, want) && len(srv.engine.Shards()) == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cp.Down.Store(true)
	srv, logs, _ := runAt(t, testConfig(t, cfg.DataDir, cp.env("node-0.felix")))
	if owners, _ := srv.owners.Snapshot(); !owners.equal(want) || !holdsInRole(srv, want) ||
		!strings.Contains(logs.String(), "serving from the control-plane state held") {
		t.Fatalf("restarted while away: table %v, open %v; logs:\n%s", owners, srv.engine.Shards(), logs.String())
	}
	if strings.Contains(logs.String(), "registered with the control plane") {
		t.Fatal("registered while the control plane was away")
	}
	cp.Down.Store(false)
	waitUntil(t, 20*time.Second, "the registration once the control plane is back", func() bool {
		bs := cp.node.FSM.State().Brokers()
		return strings.Contains(logs.String(), "registered with the control plane") && len(bs) == 1 && bs[0].Incarnation == 2
	})
	cp.Down.Store(true) // a first start without a held state waits for the control plane
	fresh := testConfig(t, t.TempDir(), cp.env("node-1.felix"))
	first, err := New(fresh, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := first.Run(ctx); err == nil || !strings.Contains(err.Error(), "registration") || first.ready.Load() {
		t.Fatalf("a first start with the control plane away: %v (ready %v)", err, first.ready.Load())
	}
}

// A snapshot without a feed epoch (the control plane's start at 1) is refused and
// installs nothing.
func TestControlPlaneSnapshotWithoutEpochRefused(t *testing.T) {
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"seq":5,"epoch":0,"streams":[{"tenant_id":"t","namespace":"n","stream":"s"}]}`))
	}))
	t.Cleanup(fake.Close)
	srv, stop := startInProcess(t, nil)
	defer stop()
	c, err := metaclient.New(metaclient.Config{URLs: []string{fake.URL}})
	if err != nil {
		t.Fatal(err)
	}
	cp := &controlPlane{s: srv, client: c, retry: time.Second, mirror: newMirror(), moved: make(chan struct{})}
	cp.owners.Store(&Ownership{})
	if err := cp.reload(context.Background()); err == nil || !strings.Contains(err.Error(), "without a feed epoch") {
		t.Fatalf("reload: %v", err)
	}
	if cp.cursor.Load() != 0 || len(cp.mirror.streams) != 0 {
		t.Fatalf("installed: cursor %d, mirror %+v", cp.cursor.Load(), cp.mirror.streams)
	}
}

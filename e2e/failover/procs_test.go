// Package failover is failover through the control plane with real processes (issue 20
// item 1; docs/failover.md, "Wiring"): one felix-controlplane member and three
// felix-broker processes in cluster mode, an RF3 Quorum stream, idempotent producers
// through the SDK with WithFailover, and the broker leading shard 0 SIGKILLed and
// replaced, a few times. FELIX_FAILOVER_KILLS sets the number of kills (3 by default;
// `make soak-failover` runs 20).
package failover

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/internal/testwait"
	"felix/testbed/clusterbed"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// bins are felix-broker and felix-controlplane, built once by TestMain.
var bins struct{ broker, controlPlane string }

// TestMain builds ./cmd/felix-broker and ./cmd/felix-controlplane once into a temp dir.
// The package runs only with FELIX_FAILOVER_E2E=1 (make soak-failover sets it): it is
// issue 20's acceptance of automatic failover, which is off by default. Before promotion
// ran a fence round it lost acknowledged Quorum records (5 of 8 runs of 20 kills); with
// FELIX_TEST_FENCE_ROUND=off it still does (the teeth; docs/bench/failover.md). Joining
// make test and CI is the lead's decision (docs/failover.md, "Wiring").
func TestMain(m *testing.M) {
	if os.Getenv("FELIX_FAILOVER_E2E") != "1" {
		fmt.Println("e2e/failover: not run (FELIX_FAILOVER_E2E=1 or make soak-failover runs it): automatic failover is off by default (docs/failover.md)")
		os.Exit(0)
	}
	scenario.MainWithCommands("felix-e2e-failover-bin", func(p map[string]string) {
		bins.broker, bins.controlPlane = p["felix-broker"], p["felix-controlplane"]
	}, m.Run, "felix-broker", "felix-controlplane")
}

// Failure detection as the test runs it: brokers heartbeat every 250 ms, the control
// plane calls one suspect after 750 ms and down after 1500 ms (placement's defaults).
const (
	heartbeatMS   = "250"
	suspectMS     = "750"
	downMS        = "1500"
	tenant        = "t1"
	namespace     = "n1"
	streamName    = "orders"
	readyTimeout  = time.Minute
	requestBudget = 10 * time.Second
	shardKey      = "stream/" + tenant + "/" + namespace + "/" + streamName + "/0"
)

// fixture is one control-plane member and three brokers, supervised (killed at cleanup;
// their last log lines printed when the test failed).
type fixture struct {
	t         *testing.T
	sup       *supervisor.Supervisor
	root      string
	cpURL     string
	tokenFile string
	cert      scenario.Cert
	brokers   []*brokerProc
}

// brokerProc is one felix-broker in cluster mode: client QUIC and ops/admin HTTP on the
// same port number, the internal transport on another; proc is its current run.
type brokerProc struct {
	id, addr, internal string
	proc               *supervisor.Process
}

func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// start starts the control plane and three brokers and waits for each to be ready.
func start(ctx context.Context, t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, sup: supervisor.NewForTest(t), root: t.TempDir()}
	keepLogs(t, f.sup.Dir())
	var err error
	if f.cert, err = scenario.WriteCert(f.root); err != nil {
		t.Fatal(err)
	}
	rest, raftAddr, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	data := filepath.Join(f.root, "cp")
	spec := supervisor.Spec{Name: "controlplane", Path: bins.controlPlane, Dir: f.root,
		Env: []string{"FELIX_CONTROLPLANE_NODE_ID=cp1", "FELIX_CONTROLPLANE_BIND=" + rest,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + raftAddr, "FELIX_CONTROLPLANE_METRICS_BIND=" + metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + data, "FELIX_CONTROLPLANE_PEERS=",
			"FELIX_CONTROLPLANE_SUSPECT_AFTER_MS=" + suspectMS, "FELIX_CONTROLPLANE_DOWN_AFTER_MS=" + downMS,
			"FELIX_CONTROLPLANE_AUTO_FAILOVER=on"},
		Ready: supervisor.Ready{URL: "http://" + metrics + "/ready", Timeout: 30 * time.Second}}
	if _, err := f.sup.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	f.cpURL, f.tokenFile = "http://"+rest, filepath.Join(data, "admin-token")
	for i := range 3 {
		f.startBroker(ctx, i)
	}
	return f
}

// keepLogs, with FELIX_FAILOVER_KEEP_LOGS=DIR, copies every process log of a failed test
// (the supervisor's dir) to DIR/<test>-<time> before the temp dirs go.
func keepLogs(t *testing.T, from string) {
	keep := os.Getenv("FELIX_FAILOVER_KEEP_LOGS")
	if keep == "" {
		return
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		to := filepath.Join(keep, t.Name()+"-"+time.Now().UTC().Format("150405"))
		logs, _ := filepath.Glob(filepath.Join(from, "*.log"))
		if err := os.MkdirAll(to, 0o755); err != nil {
			t.Logf("logs not kept: %v", err)
			return
		}
		for _, l := range logs {
			if data, err := os.ReadFile(l); err == nil {
				_ = os.WriteFile(filepath.Join(to, filepath.Base(l)), data, 0o644)
			}
		}
		t.Logf("process logs kept in %s", to)
	})
}

// startBroker starts broker i in cluster mode and waits for its ready file.
func (f *fixture) startBroker(ctx context.Context, i int) {
	f.t.Helper()
	b := &brokerProc{id: fmt.Sprintf("node-%d.felix", i), addr: freeAddr(f.t), internal: freeAddr(f.t)}
	dir := filepath.Join(f.root, strconv.Itoa(i))
	readyFile := filepath.Join(dir, "ready.json")
	spec := supervisor.Spec{Name: fmt.Sprintf("broker-%d", i), Path: bins.broker, Dir: f.root,
		Env: []string{"FELIX_QUIC_BIND=" + b.addr, "FELIX_BROKER_METRICS_BIND=" + b.addr, "FELIX_INTERNAL_BIND=" + b.internal,
			"FELIX_NODE_ID=" + b.id, "FELIX_CONTROLPLANE_URL=" + f.cpURL,
			"FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE=" + f.tokenFile,
			"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS=" + heartbeatMS, "FELIX_CONTROLPLANE_SYNC_INTERVAL_MS=200",
			"FELIX_DURABLE_STORAGE_DIR=" + filepath.Join(dir, "data"),
			"FELIX_READY_FILE=" + readyFile, "FELIX_TLS_CERT=" + f.cert.CertFile, "FELIX_TLS_KEY=" + f.cert.KeyFile,
			"FELIX_AUTH=off", "FELIX_CORE_SHARDS=1", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_CLUSTER_PEERS=",
			"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT=",
			// FELIX_TEST_FENCE_ROUND=off turns the promoted leader's fence round off (the teeth:
			// acknowledged records are lost again; docs/bench/failover.md).
			"FELIX_TEST_FENCE_ROUND=" + os.Getenv("FELIX_TEST_FENCE_ROUND")},
		Ready: supervisor.Ready{File: readyFile, Timeout: readyTimeout}}
	var err error
	if b.proc, err = f.sup.Start(ctx, spec); err != nil {
		f.t.Fatal(err)
	}
	f.brokers = append(f.brokers, b)
}

// broker returns the broker with node id id.
func (f *fixture) broker(id string) *brokerProc {
	for _, b := range f.brokers {
		if b.id == id {
			return b
		}
	}
	f.t.Fatalf("no broker %s", id)
	return nil
}

// call sends a JSON request and decodes a JSON answer into out (when not nil); it returns
// the status and the raw answer; a transport error is status 0.
func call(ctx context.Context, method, url string, body, out any) (int, string) {
	return clusterbed.CallJSON(ctx, method, url, "", body, out)
}

// assignment is the control plane's assignment of shard 0 of the stream.
func (f *fixture) assignment(ctx context.Context) (meta.Assignment, bool) {
	var snap struct {
		Assignments []meta.Assignment `json:"assignments"`
	}
	if code, _ := call(ctx, "GET", f.cpURL+"/v1/snapshot", nil, &snap); code != http.StatusOK {
		return meta.Assignment{}, false
	}
	for _, a := range snap.Assignments {
		if a.Kind == "stream" && a.Name == streamName && a.Shard == 0 {
			return a, true
		}
	}
	return meta.Assignment{}, false
}

// openShard is a broker's view of shard 0 from GET /cluster/ownership: its role and
// generation there, committed and durable offsets.
type openShard struct {
	Shard      string `json:"shard"`
	Role       string `json:"role"`
	Generation uint64 `json:"generation"`
	Committed  uint64 `json:"committed"`
	Durable    uint64 `json:"durable_offset"`
}

// open is broker b's view of shard 0 of the stream (ok=false when it does not answer or
// does not hold it).
func (f *fixture) open(ctx context.Context, b *brokerProc) (openShard, bool) {
	var v struct {
		Open []openShard `json:"open"`
	}
	if code, _ := call(ctx, "GET", "http://"+b.addr+"/cluster/ownership", nil, &v); code != http.StatusOK {
		return openShard{}, false
	}
	for _, o := range v.Open {
		if o.Shard == shardKey {
			return o, true
		}
	}
	return openShard{}, false
}

// waitFor polls cond every 10 ms until it holds or d passed (then the test fails naming
// what).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

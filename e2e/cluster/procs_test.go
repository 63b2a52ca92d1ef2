package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/internal/testwait"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// bins are felix-broker and felix-controlplane, built once by TestMain.
var bins struct{ broker, controlPlane string }

// TestMain builds ./cmd/felix-broker and ./cmd/felix-controlplane once into a temp dir.
func TestMain(m *testing.M) {
	scenario.MainWithCommands("felix-e2e-cluster-bin", func(p map[string]string) {
		bins.broker, bins.controlPlane = p["felix-broker"], p["felix-controlplane"]
	}, m.Run, "felix-broker", "felix-controlplane")
}

// freeAddr is a 127.0.0.1 address whose port was free for UDP and TCP a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// fixture is one control-plane member and the brokers registered with it, supervised
// (killed at cleanup; their last log lines printed when the test failed).
type fixture struct {
	t     *testing.T
	sup   *supervisor.Supervisor
	root  string
	cpURL string // the members' REST base URLs, comma-separated (FELIX_CONTROLPLANE_URL)
	token string // its admin token
	// tokenFile holds the token (a member's DATA_DIR/admin-token), given to the brokers.
	tokenFile string
	cert      scenario.Cert
	brokers   []*brokerProc
	// env is added to every broker's settings after the defaults (the last of a key wins).
	env []string
}

// brokerProc is one felix-broker in cluster mode: client QUIC and ops/admin HTTP on the
// same port number, the internal transport on another.
type brokerProc struct {
	id, addr, internal string
	proc               *supervisor.Process
}

// startControlPlane starts a one-member felix-controlplane (it bootstraps its group) and
// waits for /ready; its admin token is the data dir's admin-token file.
func startControlPlane(ctx context.Context, t *testing.T) *fixture {
	t.Helper()
	f := &fixture{t: t, sup: supervisor.NewForTest(t), root: t.TempDir()}
	cert, err := scenario.WriteCert(f.root)
	if err != nil {
		t.Fatal(err)
	}
	f.cert = cert
	rest, raftAddr, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	data := filepath.Join(f.root, "cp")
	spec := supervisor.Spec{Name: "controlplane", Path: bins.controlPlane, Dir: f.root,
		Env: []string{"FELIX_CONTROLPLANE_NODE_ID=cp1", "FELIX_CONTROLPLANE_BIND=" + rest,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + raftAddr, "FELIX_CONTROLPLANE_METRICS_BIND=" + metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + data, "FELIX_CONTROLPLANE_PEERS="},
		Ready: supervisor.Ready{URL: "http://" + metrics + "/ready", Timeout: 30 * time.Second}}
	if _, err := f.sup.Start(ctx, spec); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(data, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	f.cpURL, f.token = "http://"+rest, strings.TrimSpace(string(tok))
	f.tokenFile = filepath.Join(data, "admin-token")
	return f
}

// startBroker starts broker i in cluster mode and waits for its ready file (written once
// it registered and loaded the snapshot).
func (f *fixture) startBroker(ctx context.Context, i int) *brokerProc {
	return f.spawnBroker(ctx, i, true)
}

// spawnBroker starts broker i in cluster mode, waiting for its ready file when ready.
func (f *fixture) spawnBroker(ctx context.Context, i int, ready bool) *brokerProc {
	f.t.Helper()
	b := &brokerProc{id: fmt.Sprintf("node-%d.felix", i), addr: freeAddr(f.t), internal: freeAddr(f.t)}
	dir := filepath.Join(f.root, strconv.Itoa(i))
	readyFile := filepath.Join(dir, "ready.json")
	spec := supervisor.Spec{Name: fmt.Sprintf("broker-%d", i), Path: bins.broker, Dir: f.root,
		Env: []string{"FELIX_QUIC_BIND=" + b.addr, "FELIX_BROKER_METRICS_BIND=" + b.addr, "FELIX_INTERNAL_BIND=" + b.internal,
			"FELIX_NODE_ID=" + b.id, "FELIX_CONTROLPLANE_URL=" + f.cpURL,
			"FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE=" + f.tokenFile,
			"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS=500", "FELIX_DURABLE_STORAGE_DIR=" + filepath.Join(dir, "data"),
			"FELIX_READY_FILE=" + readyFile, "FELIX_TLS_CERT=" + f.cert.CertFile, "FELIX_TLS_KEY=" + f.cert.KeyFile,
			"FELIX_AUTH=off", "FELIX_CORE_SHARDS=1", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_CLUSTER_PEERS=",
			"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT="}}
	spec.Env = append(spec.Env, f.env...)
	if ready {
		spec.Ready = supervisor.Ready{File: readyFile, Timeout: scenario.BrokerReadyWait}
	}
	var err error
	if b.proc, err = f.sup.Start(ctx, spec); err != nil {
		f.t.Fatal(err)
	}
	f.brokers = append(f.brokers, b)
	return b
}

// call sends a JSON request (token as its bearer credential when not empty) and decodes a
// JSON answer into out (when not nil); it returns the status and the raw answer.
func call(ctx context.Context, t *testing.T, method, url, token string, body, out any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: answer %s: %v", method, url, data, err)
		}
	}
	return resp.StatusCode, string(data)
}

// waitFor polls cond until it holds or d passed (then the test fails naming what).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

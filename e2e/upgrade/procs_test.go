package upgrade

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/internal/testwait"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// rig is one test's processes: a supervisor (every process killed at cleanup, the last
// lines of each printed when the test failed), a temp root and one client certificate
// every broker serves with (so a broker restarted on the other build keeps its fingerprint).
type rig struct {
	t    *testing.T
	sup  *supervisor.Supervisor
	root string
	cert scenario.Cert
	cp   *cpProc // the control plane, when started
}

// newRig starts nothing yet; it needs FELIX_UPGRADE_E2E=1 (gate).
func newRig(t *testing.T) *rig {
	t.Helper()
	gate(t)
	r := &rig{t: t, sup: supervisor.NewForTest(t), root: t.TempDir()}
	cert, err := scenario.WriteCert(r.root)
	if err != nil {
		t.Fatal(err)
	}
	r.cert = cert
	return r
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

// brokerProc is one felix-broker: client QUIC and admin/ops HTTP on one port number, its
// data dir, and its internal address and node id when it is in a cluster.
type brokerProc struct {
	name, addr, data, internal, nodeID string
	proc                               *supervisor.Process
	built                              build // the build of the running process
}

// brokerSpec is the spec of a broker named name of build b on addr, its data and ready
// file under the rig's root/name; env is added last (the last of a key wins).
func (r *rig) brokerSpec(b build, name, addr string, env ...string) supervisor.Spec {
	dir := filepath.Join(r.root, name)
	ready := filepath.Join(dir, "ready.json")
	base := []string{"FELIX_QUIC_BIND=" + addr, "FELIX_BROKER_METRICS_BIND=" + addr,
		"FELIX_DURABLE_STORAGE_DIR=" + filepath.Join(dir, "data"), "FELIX_READY_FILE=" + ready,
		"FELIX_TLS_CERT=" + r.cert.CertFile, "FELIX_TLS_KEY=" + r.cert.KeyFile, "FELIX_CORE_SHARDS=1",
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_AUTH=off", "FELIX_CLUSTER_PEERS=", "FELIX_CONTROLPLANE_URL=",
		"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT="}
	return supervisor.Spec{Name: name, Path: b.broker, Dir: r.root, Env: append(base, env...),
		Ready: supervisor.Ready{File: ready, Timeout: scenario.BrokerReadyWait}}
}

// startBroker starts a single-node broker (auth off) of build b and waits until it is ready.
func (r *rig) startBroker(ctx context.Context, b build, name string, env ...string) *brokerProc {
	r.t.Helper()
	bp := &brokerProc{name: name, addr: freeAddr(r.t), data: filepath.Join(r.root, name, "data"), built: b}
	var err error
	if bp.proc, err = r.sup.Start(ctx, r.brokerSpec(b, name, bp.addr, env...)); err != nil {
		r.t.Fatalf("start %s (%s): %v", name, b.name, err)
	}
	return bp
}

// swap stops bp with SIGTERM (its drain bounded) and starts it again on build b with the
// same addresses, data and settings, waiting until it is ready: one step of a rolling
// upgrade (or its reversal).
func (r *rig) swap(ctx context.Context, bp *brokerProc, b build) {
	r.t.Helper()
	if st, err := bp.proc.Terminate(ctx, 15*time.Second); err != nil {
		r.t.Fatalf("stop %s: %v %v", bp.name, st, err)
	}
	p, err := r.sup.Restart(ctx, bp.proc, func(s *supervisor.Spec) { s.Path = b.broker })
	if err != nil {
		r.t.Fatalf("restart %s on %s: %v", bp.name, b.name, err)
	}
	bp.proc, bp.built = p, b
	r.t.Logf("%s now runs %s", bp.name, b.name)
}

// felix runs build b's felix CLI against bp (auth off, its certificate pinned) with args,
// bounded by 30 s; it returns stdout, stderr and the exit code (-1: it did not run).
func (r *rig) felix(ctx context.Context, b build, bp *brokerProc, args ...string) (string, string, int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.cli, args...)
	cmd.Dir = r.root
	cmd.Env = append(withoutFelix(os.Environ()), "FELIX_SERVER="+bp.addr, "FELIX_ADMIN_URL=http://"+bp.addr,
		"FELIX_TLS_FINGERPRINT="+r.cert.Fingerprint)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		r.t.Logf("felix %s (%s): %v", strings.Join(args, " "), b.name, err)
	}
	return stdout.String(), stderr.String(), code
}

// withoutFelix drops every FELIX_* entry of env (the test's own settings stay out of a CLI run).
func withoutFelix(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FELIX_") {
			out = append(out, kv)
		}
	}
	return out
}

// mustFelix is felix that fails the test unless the command exits 0; it returns stdout.
func (r *rig) mustFelix(ctx context.Context, b build, bp *brokerProc, args ...string) string {
	r.t.Helper()
	out, errOut, code := r.felix(ctx, b, bp, args...)
	if code != 0 {
		r.t.Fatalf("%s felix %s against %s (%s): exit %d\nstdout: %s\nstderr: %s", b.name, strings.Join(args, " "),
			bp.name, bp.built.name, code, out, errOut)
	}
	return out
}

// call sends a JSON request (token as its bearer credential when not empty) and decodes a
// 2xx JSON answer into out (when not nil); it returns the status and the raw answer.
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
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
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

// waitFor polls cond every 100 ms until it holds; past d the test fails naming what.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	next := time.Time{}
	testwait.Until(t, d, what, func() bool {
		if time.Now().Before(next) {
			return false
		}
		next = time.Now().Add(100 * time.Millisecond)
		return cond()
	})
}

// metric reads the value of the series named exactly series (name and labels) from bp's
// /metrics; ok is false when the series is absent.
func metric(ctx context.Context, t *testing.T, bp *brokerProc, series string) (v float64, ok bool) {
	t.Helper()
	_, text := call(ctx, t, "GET", "http://"+bp.addr+"/metrics", "", nil, nil)
	for _, line := range strings.Split(text, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// publishN publishes n records "prefix-i" through bp with build b's felix CLI.
func (r *rig) publishN(ctx context.Context, b build, bp *brokerProc, stream, prefix string, n int) {
	r.t.Helper()
	for i := range n {
		r.mustFelix(ctx, b, bp, "pub", stream, fmt.Sprintf("%s-%d", prefix, i))
	}
}

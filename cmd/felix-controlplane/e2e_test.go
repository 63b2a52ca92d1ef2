package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/cluster/meta"
)

// The end-to-end tests build the real binary once and run it on free
// 127.0.0.1 ports with a temp data dir.
var binary string

// client bounds every request of the tests.
var client = &http.Client{Timeout: 10 * time.Second}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "felix-controlplane-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "felix-controlplane")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// freeAddr gives a 127.0.0.1 port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is one running member; exited is closed once it exited, with err.
type proc struct {
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{}
	err    error
}

func startMember(t *testing.T, env []string) *proc {
	t.Helper()
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), env...)
	p := &proc{cmd: cmd, out: &bytes.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// waitReady polls /ready until 200, with a deadline; a member that exits
// first fails the test.
func waitReady(t *testing.T, p *proc, metrics string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := client.Get("http://" + metrics + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("member not ready within 20s:\n%s", p.out)
		}
		select {
		case <-p.exited:
			t.Fatalf("member exited (%v):\n%s", p.err, p.out)
		case <-tick.C:
		}
	}
}

func post(t *testing.T, base, token, path, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d, want %d: %s", path, resp.StatusCode, want, data)
	}
}

func TestStreamSurvivesSIGTERMAndRestart(t *testing.T) {
	dir := t.TempDir()
	bind, metrics := freeAddr(t), freeAddr(t)
	env := []string{"FELIX_CONTROLPLANE_DATA_DIR=" + dir, "FELIX_CONTROLPLANE_BIND=" + bind,
		"FELIX_CONTROLPLANE_RAFT_BIND=" + freeAddr(t), "FELIX_CONTROLPLANE_METRICS_BIND=" + metrics}
	p := startMember(t, env)
	waitReady(t, p, metrics)
	token, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok, base := strings.TrimSpace(string(token)), "http://"+bind
	post(t, base, "wrong", "/v1/tenants", `{"tenant_id":"acme"}`, 401)
	post(t, base, tok, "/v1/tenants", `{"tenant_id":"acme"}`, 201)
	post(t, base, tok, "/v1/tenants/acme/namespaces", `{"namespace":"prod"}`, 201)
	post(t, base, tok, "/v1/brokers", `{"node_id":"b1","client_addr":"127.0.0.1:5000","feed_cursor":4242}`, 200)
	post(t, base, tok, "/v1/tenants/acme/namespaces/prod/streams", `{"stream":"orders","shards":3}`, 201)
	adminCommands(t, base, tok)
	if m := get(t, "http://"+metrics+"/metrics"); !strings.Contains(m, "\nfelix_meta_raft_leader 1\n") {
		t.Fatalf("metrics of the only member:\n%s", m)
	}
	stop(t, p)
	p = startMember(t, env)
	waitReady(t, p, metrics)
	resp, err := client.Get(base + "/v1/tenants/acme/namespaces/prod/streams/orders")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s meta.Stream
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 || s.Shards != 3 || s.ReplicationFactor != 1 {
		t.Fatalf("after restart: %d %+v %v\n%s", resp.StatusCode, s, err, p.out)
	}
	stop(t, p)
}

// stop sends SIGTERM and waits (bounded) for a clean exit.
func stop(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", p.err, p.out)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no exit within 30s of SIGTERM:\n%s", p.out)
	}
}

func TestPrintConfigAndBadSettings(t *testing.T) {
	cmd := exec.Command(binary, "--print-config")
	cmd.Env = append(os.Environ(), "FELIX_CONTROLPLANE_NODE_ID=cp7")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "FELIX_CONTROLPLANE_NODE_ID=cp7\t# env") ||
		!strings.Contains(string(out), "FELIX_CONTROLPLANE_BIND=127.0.0.1:8443\t# default") {
		t.Fatalf("--print-config: %v\n%s", err, out)
	}
	for _, bad := range []string{"FELIX_CONTROLPLANE_PEERS=cp2@127.0.0.1:1", "FELIX_CONTROLPLANE_SNAPSHOT_THRESHOLD=-1",
		"FELIX_CONTROLPLANE_PEERS=cp1@127.0.0.1:1,cp2@127.0.0.1:2",
		"FELIX_AUTH=maybe", "FELIX_CONTROLPLANE_BIND=nope"} {
		cmd := exec.Command(binary, "--print-config")
		cmd.Env = append(os.Environ(), bad)
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Fatalf("%s: %v, want exit 2", bad, err)
		}
	}
}

// adminCommands runs the admin commands against a member where b1 is
// registered without features.
func adminCommands(t *testing.T, base, tok string) {
	t.Helper()
	admin := func(args ...string) (string, int) { return runAdmin(t, base, tok, args...) }
	if out, code := admin("members"); code != 0 || !strings.Contains(out, "cp1") || !strings.Contains(out, "true") {
		t.Fatalf("admin members: %d\n%s", code, out)
	}
	if out, code := admin("brokers"); code != 0 || !strings.Contains(out, "b1") || !strings.Contains(out, "live") ||
		!strings.Contains(out, "FEED CURSOR") || !strings.Contains(out, "4242") {
		t.Fatalf("admin brokers: %d\n%s", code, out)
	}
	if out, code := admin("features"); code != 0 || !strings.Contains(out, "jump_hash_routing") {
		t.Fatalf("admin features: %d\n%s", code, out)
	}
	if out, code := admin("features", "finalize", "jump_hash_routing", "--dry-run"); code != 1 || !strings.Contains(out, "lacking brokers: [b1]") {
		t.Fatalf("dry run with a lacking broker: %d\n%s", code, out)
	}
	if out, code := admin("placement", "acme/prod/orders"); code != 0 || strings.Count(out, "acme/prod/orders") != 3 || !strings.Contains(out, "b1") {
		t.Fatalf("admin placement: %d\n%s", code, out)
	}
	if out, code := admin("features", "finalize"); code != 2 {
		t.Fatalf("finalize without a name: %d\n%s", code, out)
	}
}

// runAdmin runs `felix-controlplane admin --url base --token tok args...`
// and gives its output and exit code.
func runAdmin(t *testing.T, base, tok string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"admin", "--url", base, "--token", tok}, args...)...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

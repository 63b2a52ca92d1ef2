package conformance

// The Go SDK's conformance suite runs against the real broker: TestMain builds
// ./cmd/felix-broker once; each scenario starts what it needs on 127.0.0.1 (random or
// below-ephemeral ports, a temp data dir, a fixed certificate so restarts keep the pin)
// and kills it at cleanup. Flags (after -args): -results PATH writes the results document
// (also FELIX_CONFORMANCE_RESULTS); -verify PATH runs no scenario and checks that file
// against the catalogue instead (docs/client-conformance.md).

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"felix/client"
	"felix/internal/testmain"
	"felix/internal/testwait"
	"felix/testbed/scenario"
)

var (
	resultsFlag = flag.String("results", os.Getenv("FELIX_CONFORMANCE_RESULTS"), "write the results document (JSON) here")
	verifyFlag  = flag.String("verify", "", "verify this results document against the catalogue and run nothing else")

	brokerBin      string
	brokerBuildErr error
	recorded       = recorder{res: Results{Client: "felix/client (Go SDK)", Scenarios: map[string]Result{}}}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if *verifyFlag != "" {
		os.Exit(verifyFile(*verifyFlag))
	}
	if testmain.FuzzOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "felix-conformance")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "felix-broker")
	build := exec.Command("go", "build", "-o", brokerBin, "felix/cmd/felix-broker")
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		brokerBuildErr = fmt.Errorf("go build ./cmd/felix-broker: %v\n%s", err, out.String())
	}
	code := m.Run()
	os.RemoveAll(dir)
	if *resultsFlag != "" {
		if err := WriteResults(*resultsFlag, recorded.results()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// verifyFile is the -verify mode: 0 when path's results pass Verify, else 1 (the report
// and the problems on stderr).
func verifyFile(path string) int {
	cat, err := Catalogue()
	if err == nil {
		var res Results
		if res, err = ReadResults(path); err == nil {
			fmt.Print(Report(cat, res))
			err = Verify(cat, res)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("conformance: %s: every required scenario passes\n", path)
	return 0
}

// recorder collects the suite's results (scenarios run one at a time, but safe anyway).
type recorder struct {
	mu  sync.Mutex
	res Results
}

func (r *recorder) set(id string, res Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.res.Scenarios[id] = res
}

func (r *recorder) results() Results {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := Results{Client: r.res.Client, Scenarios: map[string]Result{}}
	for k, v := range r.res.Scenarios {
		out.Scenarios[k] = v
	}
	return out
}

// broker is one felix-broker process of a scenario.
type broker struct {
	t       testing.TB
	env     []string
	dataDir string
	quic    string // 127.0.0.1:port, fixed across restarts
	http    string
	fp      string
	token   string
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string // stdout and stderr of every start, appended
}

// logs returns what the broker wrote so far (for failure output).
func (b *broker) logs() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return err.Error()
	}
	return string(data)
}

// startBroker runs a single-node broker with extra FELIX_* settings on fixed free ports
// and a fixed certificate (so restart keeps address and pin); killed at cleanup, its log
// printed when the test failed.
func startBroker(t testing.TB, env ...string) *broker {
	t.Helper()
	dir := t.TempDir()
	cert, err := scenario.WriteCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := newBroker(t, dir, cert, env...)
	b.start()
	return b
}

// newBroker prepares (does not start) a broker on free ports with its data under dir,
// serving cert, with extra FELIX_* settings; it is killed at cleanup.
func newBroker(t testing.TB, dir string, cert scenario.Cert, env ...string) *broker {
	t.Helper()
	if brokerBuildErr != nil {
		t.Fatalf("the broker binary does not build: %v", brokerBuildErr)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b := &broker{t: t, dataDir: filepath.Join(dir, "data"), fp: cert.Fingerprint, logPath: filepath.Join(dir, "broker.log"),
		quic: freeAddr(t), http: freeAddr(t)}
	b.env = append([]string{"FELIX_QUIC_BIND=" + b.quic, "FELIX_BROKER_METRICS_BIND=" + b.http,
		"FELIX_DURABLE_STORAGE_DIR=" + b.dataDir, "FELIX_CORE_SHARDS=1", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000",
		"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT=", "FELIX_TLS_CERT=" + cert.CertFile, "FELIX_TLS_KEY=" + cert.KeyFile}, env...)
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker %s logs:\n%s", b.quic, b.logs())
		}
	})
	return b
}

// freeAddr is a 127.0.0.1 address whose port was free for UDP and TCP a moment ago, below
// the ephemeral range (scenario.FreePort), so a restart on it does not race ":0" sockets.
func freeAddr(t testing.TB) string {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// start runs the process and waits (at most 60 s) for its ready file.
func (b *broker) start() {
	b.t.Helper()
	ready := filepath.Join(b.t.TempDir(), "ready.json")
	b.cmd = exec.Command(brokerBin)
	b.cmd.Env = append(append(os.Environ(), b.env...), "FELIX_READY_FILE="+ready)
	logf, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	b.exited = make(chan struct{})
	if err := b.cmd.Start(); err != nil {
		b.t.Fatal(err)
	}
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(b.cmd, b.exited)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var info struct {
			QUICAddr string `json:"quic_addr"`
		}
		if data, err := os.ReadFile(ready); err == nil && json.Unmarshal(data, &info) == nil && info.QUICAddr != "" {
			break
		}
		select {
		case <-b.exited:
			b.t.Fatalf("broker exited before ready:\n%s", b.logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("broker not ready after 60 s:\n%s", b.logs())
		}
	}
	tok, err := os.ReadFile(filepath.Join(b.dataDir, "admin.token"))
	if err != nil {
		b.t.Fatalf("admin token: %v", err)
	}
	b.token = strings.TrimSpace(string(tok))
}

// kill SIGKILLs the process (after a SIGCONT, so a stopped broker dies too) and waits.
func (b *broker) kill() {
	if b.cmd == nil {
		return
	}
	select {
	case <-b.exited:
	default:
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// signal sends sig (SIGSTOP, SIGCONT) to the running process and, since delivery is
// asynchronous, waits (at most 10 s) until the kernel shows it stopped or running again:
// a publish sent right after a SIGSTOP could otherwise still be answered.
func (b *broker) signal(sig syscall.Signal) {
	b.t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		b.t.Fatalf("signal %v: %v", sig, err)
	}
	want := sig == syscall.SIGSTOP
	waitFor(b.t, 10*time.Second, fmt.Sprintf("broker %s after %v", b.quic, sig), func() bool { return b.stopped() == want })
}

// stopped reports whether the process is in the stopped state ('T' in /proc/PID/stat).
func (b *broker) stopped() bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.cmd.Process.Pid))
	if err != nil {
		b.t.Fatalf("broker state: %v", err)
	}
	i := bytes.LastIndexByte(data, ')') // the command name may hold spaces; the state follows it
	return i >= 0 && i+2 < len(data) && data[i+2] == 'T'
}

// dial connects a client pinned to the broker's certificate with the admin token.
func (b *broker) dial(opts ...client.Option) *client.Client {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, b.quic, append([]client.Option{client.WithFingerprint(b.fp), client.WithToken(b.token)}, opts...)...)
	if err != nil {
		b.t.Fatalf("Dial: %v\n%s", err, b.logs())
	}
	b.t.Cleanup(func() { c.Close() })
	return c
}

func (b *broker) admin() *client.Admin {
	b.t.Helper()
	a, err := client.NewAdmin(b.http, client.AdminToken(b.token))
	if err != nil {
		b.t.Fatal(err)
	}
	return a
}

func (b *broker) createStream(info client.StreamInfo) {
	b.t.Helper()
	if _, err := b.admin().CreateStream(stepCtx(b.t), info); err != nil {
		b.t.Fatalf("create stream %s: %v", info.Name, err)
	}
}

func (b *broker) createCache(name string) {
	b.t.Helper()
	if _, err := b.admin().CreateCache(stepCtx(b.t), client.CacheInfo{Name: name}); err != nil {
		b.t.Fatalf("create cache %s: %v", name, err)
	}
}

// stepCtx bounds one scenario step (generous: the machine is shared).
func stepCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond every 10 ms until it holds or the deadline passes (then Fatal).
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.Until(t, within, what, cond)
}

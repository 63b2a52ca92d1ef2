package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"felix/bench"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// buildBinaries go-builds felix-broker and felix into dir and returns their paths.
func buildBinaries(ctx context.Context, t *testing.T, dir string) (brokerBin, cliBin string) {
	t.Helper()
	root := repoRoot(t)
	brokerBin, cliBin = filepath.Join(dir, "felix-broker"), filepath.Join(dir, "felix")
	for bin, pkg := range map[string]string{brokerBin: "./cmd/felix-broker", cliBin: "./cmd/felix"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return brokerBin, cliBin
}

// repoRoot is the module's root (bench.RepoRoot from the working directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := bench.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// freePorts picks one port of 127.0.0.1 free for UDP (QUIC) and TCP (HTTP), below the
// kernel's ephemeral range (scenario.FreePort says why: a restart found its port taken by a
// ":0" socket in a CI-sized run). The broker is restarted on the same ports.
func freePorts(t *testing.T) (quicAddr, httpAddr string) {
	t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", p)
	return addr, addr
}

// writeCert writes the broker's fixed certificate into dir (scenario.WriteCert: the pin
// every client uses stays valid across restarts) and returns its files and fingerprint.
func writeCert(t *testing.T, dir string) (certFile, keyFile, fingerprint string) {
	t.Helper()
	c, err := scenario.WriteCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c.CertFile, c.KeyFile, c.Fingerprint
}

// tailBuffer keeps the last max bytes of the broker logs for failure messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// segmentBytes is the brokers' FELIX_DURABLE_SEGMENT_BYTES.
const segmentBytes = 8 << 20

// diskUsage returns the bytes allocated to the files under dir (st_blocks, so preallocated
// space counts and holes do not).
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) == nil {
			n += st.Blocks * 512
		}
		return nil
	})
	return n
}

// broker runs felix-broker processes one after another on one data dir and fixed ports.
type broker struct {
	t         *testing.T
	bin       string
	dataDir   string
	quicAddr  string
	httpAddr  string
	env       []string
	logs      *tailBuffer
	token     string
	fp        string
	readyFile string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{}
	starts   int
	kills    int
	peakRSS  int64 // bytes, max VmHWM over every process
	downTime time.Duration
}

// newBroker prepares (does not start) a broker on a fresh data dir under dir; extraEnv is
// added to every process's environment (e.g. FELIX_IO_BACKEND=syscall).
func newBroker(t *testing.T, bin, dir string, extraEnv ...string) *broker {
	t.Helper()
	cert, key, fp := writeCert(t, dir)
	q, h := freePorts(t)
	b := &broker{t: t, bin: bin, dataDir: filepath.Join(dir, "data"), quicAddr: q, httpAddr: h, fp: fp,
		logs: &tailBuffer{max: 64 << 10}, readyFile: filepath.Join(dir, "ready.json")}
	b.env = append(os.Environ(),
		"FELIX_QUIC_BIND="+q, "FELIX_BROKER_METRICS_BIND="+h,
		"FELIX_DURABLE_STORAGE_DIR="+b.dataDir, "FELIX_READY_FILE="+b.readyFile,
		"FELIX_TLS_CERT="+cert, "FELIX_TLS_KEY="+key, "FELIX_LOG_LEVEL=warn", "FELIX_CORE_SHARDS=2",
		// Small segments: the crashes also meet segment rollovers, and the shared disk is spared.
		"FELIX_DURABLE_SEGMENT_BYTES="+strconv.Itoa(segmentBytes))
	b.env = append(b.env, extraEnv...)
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker log tail:\n%s", b.logs.String())
		}
	})
	return b
}

// start runs a new broker process and waits (bounded by ctx) for its ready file.
func (b *broker) start(ctx context.Context) error {
	os.Remove(b.readyFile)
	cmd := exec.Command(b.bin)
	cmd.Env = b.env
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.mu.Lock()
	b.cmd, b.exited = cmd, exited
	b.starts++
	b.mu.Unlock()
	go b.sampleRSS(cmd.Process.Pid, exited)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(b.readyFile); err == nil && len(data) > 0 {
			var info struct {
				PID int `json:"pid"`
			}
			if json.Unmarshal(data, &info) == nil && info.PID == cmd.Process.Pid {
				break
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("broker exited before ready (start %d): %s", b.starts, cmd.ProcessState)
		case <-ctx.Done():
			return fmt.Errorf("broker not ready (start %d): %w", b.starts, ctx.Err())
		case <-tick.C:
		}
	}
	if b.token == "" {
		tok, err := os.ReadFile(filepath.Join(b.dataDir, "admin.token"))
		if err != nil {
			return err
		}
		b.token = strings.TrimSpace(string(tok))
	}
	return nil
}

// kill SIGKILLs the running process (if any) and waits for it to be gone.
func (b *broker) kill() {
	b.signal(syscall.SIGKILL, true)
}

// stop sends SIGTERM and waits for the drain (bounded by ctx); it reports the exit error.
func (b *broker) stop(ctx context.Context) error {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-ctx.Done():
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("broker did not drain: %w", ctx.Err())
	}
	b.mu.Lock()
	b.cmd = nil
	b.mu.Unlock()
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("broker drain exit: %s", cmd.ProcessState)
	}
	return nil
}

func (b *broker) signal(sig syscall.Signal, count bool) {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.cmd = nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	// One last VmHWM read before the process disappears.
	b.noteRSS(cmd.Process.Pid)
	cmd.Process.Signal(sig)
	<-exited
	if count {
		b.mu.Lock()
		b.kills++
		b.mu.Unlock()
	}
}

// sampleRSS reads VmHWM of pid every 25 ms until the process exits.
func (b *broker) sampleRSS(pid int, exited chan struct{}) {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		b.noteRSS(pid)
		select {
		case <-exited:
			return
		case <-tick.C:
		}
	}
}

func (b *broker) noteRSS(pid int) {
	v, err := supervisor.PeakRSS(pid)
	if err != nil {
		return
	}
	b.mu.Lock()
	b.peakRSS = max(b.peakRSS, v)
	b.mu.Unlock()
}

func (b *broker) stats() (starts, kills int, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.starts, b.kills, b.peakRSS
}

// meanDown is the mean time from a SIGKILL to the next process being ready.
func (b *broker) meanDown() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kills == 0 {
		return 0
	}
	return (b.downTime / time.Duration(b.kills)).Round(time.Millisecond)
}

// progressLog logs line() every 30 s until the returned stop is called (stop waits for the
// logger to end, so no log outlives the test).
func progressLog(t *testing.T, line func() string) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				t.Log(line())
			}
		}
	}()
	return func() { close(done); <-ended }
}

package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
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

// repoRoot walks up from the working directory to go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// freePorts picks a UDP port (QUIC) and a TCP port (HTTP) on 127.0.0.1 that are free now
// and lie below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
// default). The broker is restarted on the same ports so the SDK's reconnects find it again;
// a port from the ephemeral range (what ":0" hands out) can be taken between two starts by
// any socket bound to ":0" — another phase's client, another package's test under `go test
// ./...` — and the restart then fails with "address already in use" (seen in a CI-sized
// run). Ports are never handed out twice by one test process.
func freePorts(t *testing.T) (quicAddr, httpAddr string) {
	t.Helper()
	portMu.Lock()
	defer portMu.Unlock()
	low, high := portRange()
	for range 1000 {
		p := low + mrand.IntN(high-low)
		if portsTaken[p] {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		u.Close()
		if err != nil {
			continue
		}
		l.Close()
		portsTaken[p] = true
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		return addr, addr
	}
	t.Fatalf("no free port in [%d, %d) after 1000 tries", low, high)
	return "", ""
}

// portRange is where freePorts picks: the 12000 ports below the ephemeral range's start
// (from /proc/sys/net/ipv4/ip_local_port_range; 32768 when unreadable), never below 1024.
func portRange() (low, high int) {
	high = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				high = n
			}
		}
	}
	return max(1024, high-12000), high
}

var (
	portMu     sync.Mutex
	portsTaken = map[int]bool{}
)

// writeCert makes a self-signed ECDSA certificate for 127.0.0.1 and returns the PEM file
// paths and the SHA-256 fingerprint of its DER (the pin every client uses). A fixed
// certificate keeps the pin valid across restarts; the broker's own default makes a new
// one at every start.
func writeCert(t *testing.T, dir string) (certFile, keyFile, fingerprint string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "felix-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	return certFile, keyFile, hex.EncodeToString(sum[:])
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
	v, err := vmHWM(pid)
	if err != nil {
		return
	}
	b.mu.Lock()
	b.peakRSS = max(b.peakRSS, v)
	b.mu.Unlock()
}

// vmHWM returns the peak resident set size of pid in bytes (/proc/<pid>/status VmHWM).
func vmHWM(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			fields := strings.Fields(rest)
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("VmHWM line %q", line)
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
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

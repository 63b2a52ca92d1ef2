package client

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"felix/internal/testmain"
	"felix/netq"
)

// The SDK tests run against the real broker: TestMain builds ./cmd/felix-broker into a
// temp dir once, and each test starts it on 127.0.0.1 with random ports and a temp data
// dir, reading the bound addresses from FELIX_READY_FILE (docs/operations.md).

var (
	brokerBin      string
	brokerBuildErr error
)

func TestMain(m *testing.M) {
	if testmain.FuzzOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "felix-client-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "felix-broker")
	args := []string{"build", "-o", brokerBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "felix/cmd/felix-broker")...)
	var out bytes.Buffer
	build.Stdout, build.Stderr = &out, &out
	if err := build.Run(); err != nil {
		brokerBuildErr = fmt.Errorf("go build ./cmd/felix-broker: %v\n%s", err, out.String())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// readyInfo mirrors the broker's FELIX_READY_FILE JSON.
type readyInfo struct {
	QUICAddr    string `json:"quic_addr"`
	HTTPAddr    string `json:"http_addr"`
	Fingerprint string `json:"fingerprint"`
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testBroker struct {
	t       testing.TB
	cmd     *exec.Cmd
	info    readyInfo
	dataDir string
	token   string
	exited  chan struct{}
	logs    *lockedBuffer
}

// startBroker runs the broker on dataDir ("" = fresh) with extra FELIX_* settings. It
// skips the test when the broker binary did not build.
func startBroker(t testing.TB, dataDir string, env ...string) *testBroker {
	t.Helper()
	if brokerBuildErr != nil {
		t.Skipf("the broker binary does not build yet, so the SDK cannot be tested against it: %v", brokerBuildErr)
	}
	if dataDir == "" {
		dataDir = filepath.Join(t.TempDir(), "data")
	}
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(brokerBin)
	cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+dataDir, "FELIX_READY_FILE="+ready, "FELIX_CORE_SHARDS=1",
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT=")
	cmd.Env = append(cmd.Env, env...)
	b := &testBroker{t: t, cmd: cmd, dataDir: dataDir, exited: make(chan struct{}), logs: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = b.logs, b.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("broker logs:\n%s", b.logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, err := os.ReadFile(ready)
		if err == nil && json.Unmarshal(data, &b.info) == nil && b.info.QUICAddr != "" {
			break
		}
		select {
		case <-b.exited:
			t.Fatalf("broker exited before ready:\n%s", b.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready after 60 s:\n%s", b.logs.String())
		}
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatalf("admin token: %v", err)
	}
	b.token = strings.TrimSpace(string(tok))
	return b
}

func (b *testBroker) kill() {
	select {
	case <-b.exited:
	default:
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// stop drains the broker with SIGTERM and waits for it to exit.
func (b *testBroker) stop() {
	b.t.Helper()
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		b.t.Fatal("broker did not exit after SIGTERM")
	}
}

// dial connects a client pinned to the broker's certificate with the admin token.
func (b *testBroker) dial(opts ...Option) *Client {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all := append([]Option{WithFingerprint(b.info.Fingerprint), WithToken(b.token)}, opts...)
	c, err := Dial(ctx, b.info.QUICAddr, all...)
	if err != nil {
		b.t.Fatalf("Dial: %v\n%s", err, b.logs.String())
	}
	b.t.Cleanup(func() { c.Close() })
	return c
}

func (b *testBroker) admin() *Admin {
	b.t.Helper()
	a, err := NewAdmin(b.info.HTTPAddr, AdminToken(b.token))
	if err != nil {
		b.t.Fatal(err)
	}
	return a
}

func (b *testBroker) createStream(name string, durable bool) {
	b.t.Helper()
	if _, err := b.admin().CreateStream(testCtx(b.t), StreamInfo{Name: name, Durable: durable}); err != nil {
		b.t.Fatalf("create stream %s: %v", name, err)
	}
}

func (b *testBroker) createCache(name string) {
	b.t.Helper()
	if _, err := b.admin().CreateCache(testCtx(b.t), CacheInfo{Name: name}); err != nil {
		b.t.Fatalf("create cache %s: %v", name, err)
	}
}

// testCtx bounds one test step (generous: the machine is shared and -race is slow).
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// freeUDPAddr returns a 127.0.0.1 UDP address that was free a moment ago (for restarting a
// broker on the same port).
func freeUDPAddr(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	return addr
}

// writeCert writes a self-signed certificate and key (PEM) so restarts keep one
// fingerprint; returns the env settings.
func writeCert(t *testing.T) []string {
	t.Helper()
	cert, err := netq.SelfSigned([]string{"localhost", "127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	keyDER, err := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"FELIX_TLS_CERT=" + certPath, "FELIX_TLS_KEY=" + keyPath}
}

func mustErrIs(t *testing.T, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %v (%T) does not match %v", err, err, target)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/broker"
	"felix/internal/testmain"
	"felix/netq"
	"felix/proto"
)

// The end-to-end tests build the real binary once (TestMain) and start it on 127.0.0.1
// with random ports, reading the bound addresses from FELIX_READY_FILE.

var brokerBin string

func TestMain(m *testing.M) {
	if testmain.FuzzOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "felix-broker-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "felix-broker")
	args := []string{"build", "-o", brokerBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building felix-broker:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lockedBuffer collects the broker's logs for failure messages.
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

type brokerProc struct {
	t       *testing.T
	cmd     *exec.Cmd
	info    broker.ReadyInfo
	dataDir string
	token   string
	logs    *lockedBuffer
	exited  chan struct{}
	exitErr error
}

// startBroker runs the binary on dataDir ("" = a fresh temp dir) with extra FELIX_* env.
func startBroker(t *testing.T, dataDir string, env ...string) *brokerProc {
	t.Helper()
	if dataDir == "" {
		dataDir = filepath.Join(t.TempDir(), "data")
	}
	ready := filepath.Join(t.TempDir(), "ready.json")
	cmd := exec.Command(brokerBin)
	cmd.Env = append(os.Environ(),
		"FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+dataDir, "FELIX_READY_FILE="+ready, "FELIX_CORE_SHARDS=2",
		// Small segments: quick rollovers (logs reserve disk 8 MiB at a time, not a segment).
		"FELIX_DURABLE_SEGMENT_BYTES=1048576")
	cmd.Env = append(cmd.Env, env...)
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b := &brokerProc{t: t, cmd: cmd, dataDir: dataDir, logs: logs, exited: make(chan struct{})}
	go func() { b.exitErr = cmd.Wait(); close(b.exited) }()
	t.Cleanup(func() {
		select {
		case <-b.exited:
		default:
			cmd.Process.Kill()
			<-b.exited
		}
		if t.Failed() {
			t.Logf("broker logs:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		data, err := os.ReadFile(ready)
		if err == nil && json.Unmarshal(data, &b.info) == nil {
			break
		}
		select {
		case <-b.exited:
			t.Fatalf("broker exited before ready: %v\n%s", b.exitErr, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker not ready after 60 s\n%s", logs.String())
		}
	}
	if tok, err := os.ReadFile(filepath.Join(dataDir, "admin.token")); err == nil {
		b.token = strings.TrimSpace(string(tok))
	}
	return b
}

// stop sends sig and waits for the exit code.
func (b *brokerProc) stop(sig syscall.Signal) int {
	b.t.Helper()
	b.cmd.Process.Signal(sig)
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		b.t.Fatalf("broker did not exit after %v", sig)
	}
	var ee *exec.ExitError
	if errors.As(b.exitErr, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// admin calls the admin API with the bootstrap admin token (or token when non-empty).
func (b *brokerProc) admin(method, path, token string, body any) (int, []byte) {
	b.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://"+b.info.HTTPAddr+path, rd)
	if token == "" {
		token = b.token
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (b *brokerProc) createStream(tenant, ns, name string, durable bool) {
	b.t.Helper()
	code, out := b.admin("POST", "/v1/tenants/"+tenant+"/namespaces/"+ns+"/streams", "",
		map[string]any{"stream": name, "durable": durable, "shards": 1})
	if code != http.StatusCreated {
		b.t.Fatalf("create stream %s: %d %s", name, code, out)
	}
}

// dial opens a QUIC connection to the broker pinning its certificate.
func (b *brokerProc) dial() *quic.Conn {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := quic.DialAddr(ctx, b.info.QUICAddr, netq.PinnedClientTLS(b.info.Fingerprint), &quic.Config{MaxIncomingUniStreams: 1000})
	if err != nil {
		b.t.Fatalf("dial: %v", err)
	}
	b.t.Cleanup(func() { c.CloseWithError(0, "") })
	return c
}

// frameStream reads and writes FLX1 frames on one stream with a deadline per read.
type frameStream struct {
	t  *testing.T
	st interface {
		io.ReadWriter
		SetReadDeadline(time.Time) error
	}
	fr *netq.FrameReader
}

func openStream(t *testing.T, c *quic.Conn) *frameStream {
	t.Helper()
	st, err := c.OpenStreamSync(context.Background())
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	return &frameStream{t: t, st: st, fr: netq.NewFrameReader(st, proto.DefaultMaxFrameBytes)}
}

func (f *frameStream) send(m proto.Message) {
	f.t.Helper()
	f.raw(proto.AppendMessage(nil, m))
}

func (f *frameStream) raw(b []byte) {
	f.t.Helper()
	if _, err := f.st.Write(b); err != nil {
		f.t.Fatalf("write: %v", err)
	}
}

// next reads one frame; the error is returned (stream reset, EOF) rather than fatal.
func (f *frameStream) next() (proto.Header, []byte, error) {
	f.st.SetReadDeadline(time.Now().Add(20 * time.Second))
	h, err := f.fr.ReadHeader()
	if err != nil {
		return h, nil, err
	}
	body, err := f.fr.ReadBody(h, nil)
	return h, body, err
}

// msg reads one JSON message.
func (f *frameStream) msg() proto.Message {
	f.t.Helper()
	h, body, err := f.next()
	if err != nil {
		f.t.Fatalf("read: %v", err)
	}
	if h.Flags != 0 {
		f.t.Fatalf("expected a JSON frame, got flags %#x", h.Flags)
	}
	m, err := proto.DecodeMessage(body)
	if err != nil {
		f.t.Fatalf("decode %s: %v", body, err)
	}
	return m
}

// auth authenticates with client_flags (nil = legacy) and returns the answer.
func (f *frameStream) auth(tenant, token string, flags *uint16, features ...string) proto.Message {
	f.t.Helper()
	f.send(&proto.Auth{TenantID: tenant, Token: token, ClientFlags: flags, Features: features})
	return f.msg()
}

func expectError(t *testing.T, m proto.Message, code proto.ErrorCode, text string) {
	t.Helper()
	e, ok := m.(*proto.Error)
	if !ok {
		t.Fatalf("got %T %+v, want error %s", m, m, code)
	}
	if e.Code != code || (text != "" && !strings.Contains(e.Message, text)) {
		t.Fatalf("error %q code %q, want %q code %q", e.Message, e.Code, text, code)
	}
}

func flagsPtr(v uint16) *uint16 { return &v }

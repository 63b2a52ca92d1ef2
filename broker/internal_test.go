package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/cluster/transport"
	"felix/netq"
	"felix/proto"
	"felix/testbed/scenario"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// internalBroker is a broker running in this process on 127.0.0.1 ports chosen by the kernel.
type internalBroker struct {
	srv   *Server
	logs  *syncBuffer
	ready ReadyInfo
	stop  func() error // cancels Run and returns its error (bounded wait)
}

// startInternal runs a broker with env over the test defaults and waits for its ready file.
func startInternal(t *testing.T, env map[string]string) *internalBroker {
	t.Helper()
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"), map[string]string{"FELIX_READY_FILE": filepath.Join(dir, "ready.json")}, env)
	logs := &syncBuffer{}
	srv, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	b := &internalBroker{srv: srv, logs: logs}
	var once sync.Once
	var runErr error
	b.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20 s")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = b.stop() })
	waitUntil(t, 20*time.Second, "the ready file", func() bool {
		data, err := os.ReadFile(cfg.ReadyFile)
		return err == nil && json.Unmarshal(data, &b.ready) == nil
	})
	return b
}

// metricsText fetches the broker's /metrics.
func (b *internalBroker) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + b.srv.HTTPAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// testPeer is another broker's side of the internal transport: a Pool dialling as node-id peer-1.
func testPeer(t *testing.T) *transport.Pool {
	t.Helper()
	return peerPool(t, "peer-1", transport.TLSFiles{})
}

func forward(gen uint64) *proto.AuthorizedForwardPublish {
	return &proto.AuthorizedForwardPublish{ForwardPublish: proto.ForwardPublish{
		Shard: proto.ShardRef{Tenant: []byte("default"), Namespace: []byte("default"), Name: []byte("s")}, Generation: gen,
		Payloads: [][]byte{[]byte("x")}}, Credential: []byte("token")}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var internalEnv = map[string]string{"FELIX_INTERNAL_BIND": "127.0.0.1:0", "FELIX_NODE_ID": "broker-1.felix.test"}

// With FELIX_INTERNAL_BIND the broker serves peers on felix-internal/1: a Pool's Hello is
// answered and a handler registered on the Dispatcher answers; the address is in the ready
// file, the start is logged with the unauthenticated-mode warning once, and the listener's
// series are on /metrics.
func TestInternalTransportServesPeers(t *testing.T) {
	b := startInternal(t, internalEnv)
	in := b.srv.Internal()
	if in == nil || in.NodeID != "broker-1.felix.test" || in.Mutual || in.Addr() == nil {
		t.Fatalf("Internal() = %+v", in)
	}
	if in.AdvertisedAddr != b.srv.InternalAddr().String() {
		t.Fatalf("advertised %q with FELIX_INTERNAL_BIND=127.0.0.1:0, want the bound %v", in.AdvertisedAddr, b.srv.InternalAddr())
	}
	if b.ready.InternalAddr != b.srv.InternalAddr().String() || b.ready.NodeID != in.NodeID {
		t.Fatalf("ready file %+v, internal listener on %v", b.ready, b.srv.InternalAddr())
	}
	in.Dispatcher.Register(proto.KindAuthorizedForwardPublish, func(_ context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
		m := req.(*proto.AuthorizedForwardPublish)
		if peer != "peer-1" {
			return transport.Refusal(req.Kind(), req.Correlation(), proto.InternalUnauthorized)
		}
		return &proto.ForwardPublishOk{FirstOffset: m.Generation, LastOffset: m.Generation + 1}
	})
	ctx := testCtx(t)
	p := testPeer(t)
	to := transport.Peer{NodeID: in.NodeID, Addr: b.srv.InternalAddr().String()}
	ans, err := p.Request(ctx, to, forward(7))
	if ok, isOk := ans.(*proto.ForwardPublishOk); err != nil || !isOk || ok.FirstOffset != 7 {
		t.Fatalf("registered handler: %#v %v", ans, err)
	}
	ans, err = p.Request(ctx, to, &proto.ReplicateOk{DurableOffset: 1}) // every Replicate* request kind is replication's (replicate_logs.go)
	if u, ok := ans.(*proto.UnsupportedKind); err != nil || !ok || u.RefusedKind != proto.KindReplicateOk {
		t.Fatalf("unregistered kind: %#v %v, want UnsupportedKind", ans, err)
	}
	logs := b.logs.String()
	if n := strings.Count(logs, "internal transport unauthenticated"); n != 1 {
		t.Errorf("unauthenticated-mode warning logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "internal transport listening") || !strings.Contains(logs, b.ready.InternalAddr) {
		t.Errorf("the internal listener's address is not logged:\n%s", logs)
	}
	text := b.metricsText(t)
	for _, want := range []string{
		"felix_internal_listener_connections_accepted_total 1",
		`felix_internal_listener_requests_total{kind="AuthorizedForwardPublish"} 1`,
		`felix_internal_listener_requests_total{kind="ReplicateOk"} 1`,
		"felix_internal_listener_unsupported_kind_total 1",
		"felix_internal_listener_connections_active 1",
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := b.stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// The roles do not mix on a broker: a client ALPN at the internal port and the internal ALPN
// at the client port both fail in the TLS handshake; the refusal is counted by reason.
func TestInternalTransportRefusesTheClientRole(t *testing.T) {
	b := startInternal(t, internalEnv)
	ctx := testCtx(t)
	conf := &tls.Config{InsecureSkipVerify: true, NextProtos: []string{netq.ALPNClient}, MinVersion: tls.VersionTLS13}
	c, err := quic.DialAddr(ctx, b.srv.InternalAddr().String(), conf, &quic.Config{HandshakeIdleTimeout: 5 * time.Second})
	if err == nil {
		c.CloseWithError(0, "")
		t.Fatal("the client ALPN completed a handshake with the internal listener")
	}
	var te *quic.TransportError
	if !errors.As(err, &te) || !te.ErrorCode.IsCryptoError() {
		t.Fatalf("client ALPN at the internal port: %v, want a TLS handshake failure", err)
	}
	p := testPeer(t)
	_, err = p.Request(ctx, transport.Peer{NodeID: "broker-1.felix.test", Addr: b.srv.QUICAddr().String()}, forward(1))
	if !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("a peer at the client port: %v, want ErrUnreachable (handshake refused)", err)
	}
	waitUntil(t, 20*time.Second, "the refusals on /metrics", func() bool {
		return strings.Contains(b.metricsText(t), `felix_internal_listener_connections_refused_total{reason="alpn"} 1`+"\n")
	})
	if text := b.metricsText(t); !strings.Contains(text, "felix_internal_listener_connections_accepted_total 0\n") {
		t.Error("a refused handshake was counted as accepted")
	}
}

// Without FELIX_INTERNAL_BIND nothing internal starts: no Internal, no address in the ready
// file, no felix_internal_* series.
func TestNoInternalTransportWithoutTheSetting(t *testing.T) {
	b := startInternal(t, nil)
	if b.srv.Internal() != nil || b.srv.InternalAddr() != nil || b.ready.InternalAddr != "" || b.ready.NodeID != "" {
		t.Fatalf("single node started an internal transport: %+v %v %+v", b.srv.Internal(), b.srv.InternalAddr(), b.ready)
	}
	if text := b.metricsText(t); strings.Contains(text, "felix_internal_") {
		t.Fatal("single node exports felix_internal_* series")
	}
	if strings.Contains(b.logs.String(), "internal transport") {
		t.Fatalf("single node logs an internal transport:\n%s", b.logs.String())
	}
	if err := b.stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

// The server refuses an internal bind on the client port even with a Config that did not
// go through LoadConfig's check (here another loopback host, which the kernel would allow).
func TestInternalBindOnTheClientPortRefused(t *testing.T) {
	port, err := scenario.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_QUIC_BIND": fmt.Sprintf("127.0.0.1:%d", port),
		"FELIX_BROKER_METRICS_BIND": "127.0.0.1:0", "FELIX_DURABLE_STORAGE_DIR": t.TempDir(), "FELIX_AUTH": "off",
		"FELIX_CORE_SHARDS": "1", "FELIX_NODE_ID": "broker-1", "FELIX_INTERNAL_BIND": "127.0.0.1:0"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadConfig(nil, envOf(map[string]string{"FELIX_QUIC_BIND": cfg.QUICBind, "FELIX_NODE_ID": "broker-1",
		"FELIX_INTERNAL_BIND": cfg.QUICBind})); !errors.Is(err, ErrConfig) {
		t.Fatalf("LoadConfig with the internal bind on the client port: %v, want ErrConfig", err)
	}
	cfg.InternalBind = fmt.Sprintf("127.0.0.2:%d", port)
	srv, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		srv.closeAll()
		t.Fatal("New accepted an internal bind on the client port")
	}
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "FELIX_INTERNAL_BIND") || !strings.Contains(err.Error(), "FELIX_QUIC_BIND") {
		t.Fatalf("New: %v, want ErrConfig naming both settings", err)
	}
	// Everything New opened was released: the same data dir and ports start a broker.
	cfg.InternalBind = "127.0.0.1:0"
	srv, err = New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("restart after the refusal: %v", err)
	}
	srv.closeAll()
}

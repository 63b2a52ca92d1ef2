package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/auth"
	"felix/netq"
	"felix/proto"
	"felix/seglog"
)

func reqID(v uint64) *uint64 { return &v }

// A bad setting is a usage/config error (exit 2) found before the data dir is touched: no
// keys, admin token or run-state are written, so the next start is not "unclean".
func TestBadConfigExits2BeforeTouchingDataDir(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"FELIX_QUIC_BIND":                 "127.0.0.1:99999",
		"FELIX_IO_BACKEND":                "bogus",
		"FELIX_CORES":                     "abc",
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS": "0",
		"FELIX_MAX_FRAME_BYTES":           "100",
		"FELIX_READY_FILE":                filepath.Join(notDir, "ready.json"),
	}
	for env, value := range cases {
		t.Run(env, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(brokerBin)
			cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
				"FELIX_DURABLE_STORAGE_DIR="+data, env+"="+value)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("%s=%s: exit %v, want 2\n%s", env, value, err, out)
			}
			if !strings.Contains(string(out), env) {
				t.Errorf("message does not name %s: %s", env, out)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("data dir touched by a failed start: %v", err)
			}
		})
	}
}

// Connections that never authenticate lose their slot after FELIX_AUTH_TIMEOUT_MS (QUIC
// application error 0x103), so idle keep-alive connections cannot lock out a real client;
// an authenticated connection outlives the deadline.
func TestUnauthenticatedConnectionsAreClosed(t *testing.T) {
	b := startBroker(t, "", "FELIX_MAX_CONNECTIONS=2", "FELIX_AUTH_TIMEOUT_MS=300")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var idle []*quic.Conn
	for i := 0; i < 2; i++ {
		c, err := quic.DialAddr(ctx, b.info.QUICAddr, netq.PinnedClientTLS(b.info.Fingerprint), &quic.Config{KeepAlivePeriod: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseWithError(0, "") })
		idle = append(idle, c)
	}
	// One of them opens a stream and sends half a frame header, never an auth.
	st, err := idle[1].OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("FLX"))
	for i, c := range idle {
		select {
		case <-c.Context().Done():
		case <-ctx.Done():
			t.Fatalf("unauthenticated connection %d still open after 20 s", i)
		}
		var ae *quic.ApplicationError
		if err := context.Cause(c.Context()); !errors.As(err, &ae) || ae.ErrorCode != netq.CodeAuthTimeout || !ae.Remote {
			t.Fatalf("connection %d closed with %v, want remote application error %#x", i, err, netq.CodeAuthTimeout)
		}
	}
	// The slots are free: a real client gets in, authenticates and outlives the deadline.
	c := b.dial()
	fs := openStream(t, c)
	if _, ok := fs.auth("default", b.token, flagsPtr(v1Flags)).(*proto.AuthOK); !ok {
		t.Fatal("auth failed")
	}
	select {
	case <-c.Context().Done():
		t.Fatalf("authenticated connection closed: %v", context.Cause(c.Context()))
	case <-time.After(time.Second): // more than three auth deadlines
	}
	fs.send(&proto.CounterGet{TenantID: "default", Namespace: "default", Cache: "nope", Key: "k", RequestID: reqID(1)})
	expectError(t, fs.msg(), proto.CodeNotFound, "")
}

// A failed auth keeps the v1 text and code unauthorized; a client that lists error_codes
// also gets the verifier's fixed reason ("auth required: <reason>").
func TestAuthFailureCarriesReason(t *testing.T) {
	b := startBroker(t, "")
	other := t.TempDir()
	if _, err := auth.Bootstrap(auth.BootstrapOptions{DataDir: other, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	foreign, err := auth.IssueToken(other, "default", "x", []string{"stream.publish:stream:default/default/*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := b.dial()
	for _, token := range []string{"garbage", foreign} {
		legacy := openStream(t, c)
		m := legacy.auth("default", token, flagsPtr(v1Flags))
		expectError(t, m, proto.CodeUnauthorized, "auth required")
		if msg := m.(*proto.Error).Message; msg != "auth required" {
			t.Errorf("client without error_codes got %q, want the exact v1 text", msg)
		}
		coded := openStream(t, c)
		m = coded.auth("default", token, flagsPtr(v1Flags), proto.FeatureErrorCodes)
		expectError(t, m, proto.CodeUnauthorized, "auth required: ")
		if msg := m.(*proto.Error).Message; len(msg) <= len("auth required: ") || strings.Contains(msg, token) {
			t.Errorf("reason %q: empty or echoes the token", msg)
		}
	}
}

// A JSON frame that does not decode but whose request_id is readable is answered with that
// request_id (code malformed), so a pipelined call fails at once instead of timing out; an
// overflowing counter_add is refused as malformed, not as a retryable code.
func TestUndecodableRequestsAreCorrelated(t *testing.T) {
	b := startBroker(t, "", "FELIX_AUTO_CREATE=true")
	s := openStream(t, b.dial())
	s.auth("default", b.token, flagsPtr(v1Flags), proto.FeatureErrorCodes, proto.FeatureCounters)
	rawJSON := func(body string) { s.raw(append(proto.AppendHeader(nil, 0, uint32(len(body))), body...)) }

	rawJSON(`{"type":"counter_add","tenant_id":"default","namespace":"default","cache":"c","key":"k","delta":9223372036854775808,"request_id":7}`)
	m := s.msg()
	expectError(t, m, proto.CodeMalformed, "")
	if e := m.(*proto.Error); e.RequestID == nil || *e.RequestID != 7 {
		t.Fatalf("counter_add with delta 2^63: error not correlated: %+v", e)
	}
	rawJSON(`{"type":"publish","tenant_id":"default","namespace":"default","stream":"s","payload":"!!not base64","request_id":8}`)
	if pe, ok := s.msg().(*proto.PublishError); !ok || pe.RequestID != 8 || pe.Code != proto.CodeMalformed {
		t.Fatalf("undecodable publish: %+v", pe)
	}

	// Counter overflow: a definite refusal (malformed), never shard_unavailable.
	s.send(&proto.CounterAdd{TenantID: "default", Namespace: "default", Cache: "c", Key: "k", Delta: 1<<63 - 1, RequestID: reqID(9)})
	if cv, ok := s.msg().(*proto.CounterValue); !ok || cv.Value != 1<<63-1 {
		t.Fatalf("counter_add max: %+v", cv)
	}
	s.send(&proto.CounterAdd{TenantID: "default", Namespace: "default", Cache: "c", Key: "k", Delta: 1, RequestID: reqID(10)})
	m = s.msg()
	expectError(t, m, proto.CodeMalformed, "overflow")
	if e := m.(*proto.Error); e.RequestID == nil || *e.RequestID != 10 {
		t.Fatalf("overflow not correlated: %+v", e)
	}
}

// A start that fails on a port in use exits 1 without marking the data dir's run-state
// running (the next start must not report an unclean stop).
func TestPortInUseLeavesNoRunState(t *testing.T) {
	a := startBroker(t, "")
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(brokerBin)
	cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND="+a.info.QUICAddr, "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+data)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "FELIX_QUIC_BIND") {
		t.Fatalf("second broker on a used port: %v\n%s", err, out)
	}
	st, err := seglog.ReadRunState(seglog.OSFS{}, data)
	if err != nil || st.Found {
		t.Fatalf("run-state after a failed start: %+v %v", st, err)
	}
	if _, err := os.Stat(filepath.Join(data, "admin.token")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("admin token written by a failed start: %v", err)
	}
}

// A ready file that cannot be written stops the broker (exit 1, clean drain) instead of
// leaving tools waiting for a file that never comes.
func TestUnwritableReadyFileStopsTheBroker(t *testing.T) {
	ready := t.TempDir() // a directory: the rename over it fails
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(brokerBin)
	cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+data, "FELIX_READY_FILE="+ready)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "FELIX_READY_FILE") {
		t.Fatalf("unwritable ready file: %v\n%s", err, out)
	}
	if st, err := seglog.ReadRunState(seglog.OSFS{}, data); err != nil || !st.CleanStop {
		t.Fatalf("run-state after the stop: %+v %v", st, err)
	}
}

// A binary acked publish whose request_id is readable is refused with a 0x0010 error ack for
// that request_id (bad ack_mode or bad body), and the stream carries on.
func TestBinaryAckedPublishRefusalsAreCorrelated(t *testing.T) {
	b := startBroker(t, "")
	s := openStream(t, b.dial())
	s.auth("default", b.token, flagsPtr(v1Flags), proto.FeatureErrorCodes)
	flags := proto.FlagBinaryPublishBatch | proto.FlagBinaryPublishAcked
	for id, body := range map[uint64][]byte{
		77: {0, 0, 0, 0, 0, 0, 0, 77, 9},                // ack_mode 9
		78: {0, 0, 0, 0, 0, 0, 0, 78, 1, 0xff, 0xff, 1}, // body truncated after the prefix
	} {
		s.raw(append(proto.AppendHeader(nil, flags, uint32(len(body))), body...))
		h, ack, err := s.next()
		if err != nil || h.Flags != proto.FlagBinaryPublishAck {
			t.Fatalf("request %d: flags %#x err %v, want a 0x0010 ack", id, h.Flags, err)
		}
		var pa proto.PublishAck
		if err := proto.DecodePublishAck(ack, &pa); err != nil || pa.RequestID != id || pa.Status != proto.AckStatusError {
			t.Fatalf("request %d: ack %+v err %v", id, pa, err)
		}
		if code, _ := proto.SplitErrorText(string(pa.Message)); code != proto.CodeMalformed {
			t.Fatalf("request %d: %q, want code malformed", id, pa.Message)
		}
	}
	s.send(&proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "none", Key: "k", RequestID: reqID(79)})
	expectError(t, s.msg(), proto.CodeNotFound, "")
}

// At FELIX_MAX_CONNECTIONS a new connection evicts the oldest unauthenticated one (0x103)
// instead of being refused; authenticated connections are never evicted.
func TestConnectionLimitEvictsUnauthenticated(t *testing.T) {
	b := startBroker(t, "", "FELIX_MAX_CONNECTIONS=2", "FELIX_AUTH_TIMEOUT_MS=600000")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	idle, err := quic.DialAddr(ctx, b.info.QUICAddr, netq.PinnedClientTLS(b.info.Fingerprint), &quic.Config{KeepAlivePeriod: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer idle.CloseWithError(0, "")
	var authed []*frameStream
	for i := 0; i < 2; i++ { // both fit: the first evicts nobody, the second evicts idle
		fs := openStream(t, b.dial())
		if _, ok := fs.auth("default", b.token, flagsPtr(v1Flags)).(*proto.AuthOK); !ok {
			t.Fatalf("client %d refused", i)
		}
		authed = append(authed, fs)
	}
	select {
	case <-idle.Context().Done():
	case <-ctx.Done():
		t.Fatal("unauthenticated connection not evicted")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(idle.Context()); !errors.As(err, &ae) || ae.ErrorCode != netq.CodeAuthTimeout {
		t.Fatalf("idle connection closed with %v, want %#x", err, netq.CodeAuthTimeout)
	}
	// Both slots hold authenticated connections: a third is refused, nobody is evicted.
	third, err := quic.DialAddr(ctx, b.info.QUICAddr, netq.PinnedClientTLS(b.info.Fingerprint), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-third.Context().Done():
	case <-ctx.Done():
		t.Fatal("third connection not refused")
	}
	if err := context.Cause(third.Context()); !errors.As(err, &ae) || ae.ErrorCode != netq.CodeConnectionLimit {
		t.Fatalf("third connection closed with %v, want %#x", err, netq.CodeConnectionLimit)
	}
	for i, fs := range authed {
		fs.send(&proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "none", Key: "k", RequestID: reqID(uint64(i))})
		expectError(t, fs.msg(), proto.CodeNotFound, "")
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/auth"
	"felix/broker"
	"felix/netq"
	"felix/proto"
)

// eventReader reads one subscription's event uni stream.
type eventReader struct {
	t  *testing.T
	st *quic.ReceiveStream
	fr *netq.FrameReader
	id uint64
}

func acceptEvents(t *testing.T, c *quic.Conn) *eventReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.AcceptUniStream(ctx)
	if err != nil {
		t.Fatalf("accept event stream: %v", err)
	}
	r := &eventReader{t: t, st: st, fr: netq.NewFrameReader(st, proto.DefaultMaxFrameBytes)}
	h, body := r.frame()
	if h.Flags != 0 {
		t.Fatalf("first event frame flags %#x, want event_stream_hello", h.Flags)
	}
	m, err := proto.DecodeMessage(body)
	hello, ok := m.(*proto.EventStreamHello)
	if err != nil || !ok {
		t.Fatalf("first event frame %s: %v", body, err)
	}
	r.id = hello.SubscriptionID
	return r
}

func (r *eventReader) frame() (proto.Header, []byte) {
	r.t.Helper()
	r.st.SetReadDeadline(time.Now().Add(20 * time.Second))
	h, err := r.fr.ReadHeader()
	if err != nil {
		r.t.Fatalf("event header: %v", err)
	}
	body, err := r.fr.ReadBody(h, nil)
	if err != nil {
		r.t.Fatalf("event body: %v", err)
	}
	return h, body
}

// records reads event batches until n records arrived; returns offset → payload.
func (r *eventReader) records(n int) map[uint64]string {
	r.t.Helper()
	got := map[uint64]string{}
	for len(got) < n {
		h, body := r.frame()
		var b proto.EventBatch
		if err := proto.DecodeEventBatch(h.Flags, body, &b); err != nil {
			r.t.Fatalf("event batch flags %#x: %v", h.Flags, err)
		}
		if !b.WithOffsets {
			r.t.Fatalf("batch without offsets (flags %#x)", h.Flags)
		}
		for i, p := range b.Payloads {
			off := b.BaseOffset + uint64(i)
			if _, dup := got[off]; dup {
				r.t.Fatalf("offset %d delivered twice", off)
			}
			got[off] = string(p)
		}
	}
	return got
}

const v1Flags = uint16(0x003F)

func TestPublishSubscribeReplay(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("default", "default", "orders", true)
	c := b.dial()
	ctl := openStream(t, c)
	ok, isOK := ctl.auth("default", b.token, flagsPtr(v1Flags), "error_codes").(*proto.AuthOK)
	if !isOK || ok.ServerFlags != broker.ServerFlags {
		t.Fatalf("auth answer %+v", ok)
	}
	// Five acked JSON publishes.
	for i := 0; i < 5; i++ {
		id := uint64(100 + i)
		ctl.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte(fmt.Sprintf("json-%d", i)), RequestID: &id})
		m := ctl.msg()
		pok, isOK := m.(*proto.PublishOK)
		if !isOK || pok.RequestID != id || pok.FirstOffset == nil || *pok.FirstOffset != uint64(i) {
			t.Fatalf("publish %d answer %T %+v", i, m, m)
		}
	}
	// One acked binary batch of five.
	batch := &proto.PublishBatch{Acked: true, RequestID: 7, AckMode: proto.AckPerBatch,
		TenantID: []byte("default"), Namespace: []byte("default"), Stream: []byte("orders")}
	for i := 0; i < 5; i++ {
		batch.Payloads = append(batch.Payloads, []byte(fmt.Sprintf("bin-%d", i)))
	}
	frame, err := proto.AppendPublishBatch(nil, batch)
	if err != nil {
		t.Fatal(err)
	}
	ctl.raw(frame)
	h, body, err := ctl.next()
	var ack proto.PublishAck
	if err != nil || h.Flags != proto.FlagBinaryPublishAck || proto.DecodePublishAck(body, &ack) != nil || ack.Status != proto.AckStatusOK || ack.RequestID != 7 {
		t.Fatalf("binary ack: flags %#x %+v %v", h.Flags, ack, err)
	}

	// Replay from the start, then live.
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders", Start: &proto.Start{Kind: proto.StartEarliest}})
	events := acceptEvents(t, c)
	sub, isSub := ctl.msg().(*proto.Subscribed)
	if !isSub || sub.SubscriptionID != events.id {
		t.Fatalf("subscribed %+v, hello id %d", sub, events.id)
	}
	got := events.records(10)
	for i := 0; i < 5; i++ {
		if got[uint64(i)] != fmt.Sprintf("json-%d", i) || got[uint64(5+i)] != fmt.Sprintf("bin-%d", i) {
			t.Fatalf("replayed %v", got)
		}
	}
	live := uint64(200)
	ctl.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte("live"), RequestID: &live})
	if _, ok := ctl.msg().(*proto.PublishOK); !ok {
		t.Fatal("live publish not acked")
	}
	if got := events.records(1); got[10] != "live" {
		t.Fatalf("live record %v", got)
	}

	// Cursor errors: in_future and a second subscription from an exact offset.
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders", Start: &proto.Start{Kind: proto.StartOffset, Offset: 99}})
	ce, isCE := ctl.msg().(*proto.SubscribeCursorError)
	if !isCE || ce.Reason != proto.CursorInFuture || ce.Available != 11 {
		t.Fatalf("in_future answer %+v", ce)
	}
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders", Start: &proto.Start{Kind: proto.StartOffset, Offset: 8}})
	ev2 := acceptEvents(t, c)
	if _, ok := ctl.msg().(*proto.Subscribed); !ok {
		t.Fatal("second subscribe not confirmed")
	}
	if got := ev2.records(3); got[8] != "bin-3" || got[10] != "live" {
		t.Fatalf("resume from 8: %v", got)
	}
	// Unknown stream: not_found (no auto-create by default), for subscribe and publish.
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "nope"})
	expectError(t, ctl.msg(), proto.CodeNotFound, "")
	ctl.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "nope", Payload: []byte("x"), RequestID: &live})
	if pe, ok := ctl.msg().(*proto.PublishError); !ok || pe.Code != proto.CodeNotFound || pe.RequestID != live {
		t.Fatalf("publish to an unknown stream: %+v", pe)
	}
}

func TestLegacyClientGetsPlainOK(t *testing.T) {
	b := startBroker(t, "")
	ctl := openStream(t, b.dial())
	if _, ok := ctl.auth("default", b.token, nil).(*proto.OK); !ok {
		t.Fatal("legacy auth (no client_flags) not answered with ok")
	}
	ctl.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "x", Payload: []byte("p")})
	expectError(t, ctl.msg(), proto.CodeMalformed, "missing request_id for acked publish")
	expectError(t, ctl.auth("default", b.token, nil), proto.CodeUnauthorized, "auth already established")
}

func TestAuthEndToEnd(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("default", "default", "orders", true)
	if code, out := b.admin("POST", "/v1/tenants", "", map[string]any{"tenant_id": "other"}); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", code, out)
	}
	otherAdmin, err := auth.IssueToken(b.dataDir, "other", "ops", auth.AdminPermissions("other"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	readOnly, err := auth.IssueToken(b.dataDir, "default", "reader", []string{"stream.subscribe:stream:default/default/*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := b.dial()

	// No token / bad token: refused, and the stream stays unauthenticated.
	s1 := openStream(t, c)
	expectError(t, s1.auth("default", "", flagsPtr(v1Flags)), proto.CodeUnauthorized, "")
	id := uint64(1)
	s1.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte("x"), RequestID: &id})
	expectError(t, s1.msg(), proto.CodeUnauthorized, "auth required")

	// Tenant other's token cannot touch tenant default.
	s2 := openStream(t, c)
	expectError(t, s2.auth("default", otherAdmin, flagsPtr(v1Flags)), proto.CodeUnauthorized, "tenant mismatch")
	s3 := openStream(t, c)
	if _, ok := s3.auth("other", otherAdmin, flagsPtr(v1Flags)).(*proto.AuthOK); !ok {
		t.Fatal("other's admin refused in its own tenant")
	}
	s3.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte("x"), RequestID: &id})
	if pe, ok := s3.msg().(*proto.PublishError); !ok || pe.Message != "tenant mismatch" || pe.RequestID != 1 {
		t.Fatalf("cross-tenant publish: %+v", pe)
	}
	s3.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders"})
	expectError(t, s3.msg(), proto.CodeUnauthorized, "tenant mismatch")

	// Missing permission: forbidden, before existence (unknown stream says forbidden too).
	s4 := openStream(t, c)
	s4.auth("default", readOnly, flagsPtr(v1Flags))
	for _, stream := range []string{"orders", "does-not-exist"} {
		s4.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: stream, Payload: []byte("x"), RequestID: &id})
		if pe, ok := s4.msg().(*proto.PublishError); !ok || pe.Message != "forbidden" || pe.Code != proto.CodeUnauthorized {
			t.Fatalf("publish without permission to %s: %+v", stream, pe)
		}
	}

	// Admin API: no token 401, other tenant 403, unknown stream 404 for a permitted caller.
	if code, _ := b.admin("GET", "/v1/tenants/default/namespaces/default/streams", "-", nil); code != http.StatusUnauthorized {
		t.Fatalf("admin without token: %d", code)
	}
	if code, _ := b.admin("GET", "/v1/tenants/default/namespaces/default/streams", otherAdmin, nil); code != http.StatusForbidden {
		t.Fatalf("admin with other tenant's token: %d", code)
	}
	if code, _ := b.admin("POST", "/v1/tenants/default/namespaces/default/streams", readOnly, map[string]any{"stream": "s"}); code != http.StatusForbidden {
		t.Fatalf("create stream without stream.manage: %d", code)
	}
	if code, _ := b.admin("GET", "/v1/tenants/default/namespaces/default/streams/nope", "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown stream: %d", code)
	}
	code, out := b.admin("GET", "/v1/tenants/other/.well-known/jwks.json", "-", nil)
	var jwks auth.JWKS
	if code != http.StatusOK || json.Unmarshal(out, &jwks) != nil || len(jwks.Keys) == 0 {
		t.Fatalf("jwks: %d %s", code, out)
	}
}

func TestBadFramesGetTypedAnswers(t *testing.T) {
	b := startBroker(t, "", "FELIX_MAX_STREAMS_PER_CONN=8", "FELIX_MAX_FRAME_BYTES=65536")
	b.createStream("default", "default", "orders", false)
	c := b.dial()
	healthy := openStream(t, c)
	healthy.auth("default", b.token, flagsPtr(v1Flags))
	checkHealthy := func(step string) {
		t.Helper()
		id := uint64(42)
		healthy.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte(step), RequestID: &id})
		if _, ok := healthy.msg().(*proto.PublishOK); !ok {
			t.Fatalf("after %s the healthy stream stopped working", step)
		}
	}

	expectReset := func(f *frameStream, step string) {
		t.Helper()
		expectError(t, f.msg(), proto.CodeMalformed, "")
		_, _, err := f.next()
		var se *quic.StreamError
		if !errors.As(err, &se) && !errors.Is(err, io.EOF) {
			t.Fatalf("%s: stream not ended after the error: %v", step, err)
		}
	}

	// Unknown flag bit.
	s := openStream(t, c)
	s.auth("default", b.token, flagsPtr(v1Flags))
	s.raw(proto.AppendHeader(nil, 0x0040, 0))
	expectReset(s, "unknown flag")
	checkHealthy("unknown flag")

	// Oversize length (over FELIX_MAX_FRAME_BYTES): refused before the body is read.
	s = openStream(t, c)
	s.raw(proto.AppendHeader(nil, 0, 1<<20))
	expectReset(s, "oversize")
	checkHealthy("oversize")

	// Garbage after auth: typed error, and the stream carries on.
	s = openStream(t, c)
	s.auth("default", b.token, flagsPtr(v1Flags))
	s.raw(append(proto.AppendHeader(nil, 0, 9), []byte("{garbage!")...))
	expectError(t, s.msg(), proto.CodeMalformed, "")
	bad := proto.AppendHeader(nil, proto.FlagBinaryPublishBatch, 4)
	s.raw(append(bad, 0, 9, 0, 0))
	expectError(t, s.msg(), proto.CodeMalformed, "")
	id := uint64(5)
	s.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders", Payload: []byte("after"), RequestID: &id})
	if _, ok := s.msg().(*proto.PublishOK); !ok {
		t.Fatal("stream unusable after a malformed frame")
	}
	// A B→C layout sent by a client.
	s.raw(proto.AppendPublishAckOK(nil, 1))
	expectError(t, s.msg(), proto.CodeMalformed, "")
	checkHealthy("garbage")

	// A flood of streams: QUIC grants at most FELIX_MAX_STREAMS_PER_CONN; the rest are refused
	// by flow control, never by a crash, and the connection keeps working.
	var opened []*quic.Stream
	var limitErr error
	for i := 0; i < 64; i++ {
		st, err := c.OpenStream()
		if err != nil {
			limitErr = err
			break
		}
		st.Write(proto.AppendHeader(nil, 0, 0)[:6]) // half a header: the stream stays open
		opened = append(opened, st)
	}
	var sl *quic.StreamLimitReachedError
	if !errors.As(limitErr, &sl) || len(opened) > 8 {
		t.Fatalf("stream flood: opened %d, err %v", len(opened), limitErr)
	}
	for _, st := range opened {
		st.CancelWrite(0)
		st.CancelRead(0)
	}
	checkHealthy("flood")

	// Another connection is unaffected throughout.
	other := openStream(t, b.dial())
	if _, ok := other.auth("default", b.token, flagsPtr(v1Flags)).(*proto.AuthOK); !ok {
		t.Fatal("second connection refused")
	}
}

func TestOpsEndpointsAndPrintConfig(t *testing.T) {
	b := startBroker(t, "", "FELIX_LOG_FORMAT=json")
	for _, line := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry["msg"] == nil || entry["service"] != "felix-broker" {
			t.Fatalf("log line is not slog JSON: %q (%v)", line, err)
		}
	}
	for path, want := range map[string]string{"/live": "ok", "/ready": "ok", "/replication/halted": "[]", "/metrics": "felix_broker_connections_active"} {
		resp, err := http.Get("http://" + b.info.HTTPAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	if resp, err := http.Get("http://" + b.info.HTTPAddr + "/debug/pprof/"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("pprof without FELIX_PPROF: %v, want 404", err) // issue 23 item 7: off by default
	}

	cmd := exec.Command(brokerBin, "--print-config", "--quic-bind", "127.0.0.1:7001")
	cmd.Env = append(cmd.Environ(), "FELIX_LOG_FORMAT=json")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("--print-config: %v", err)
	}
	for _, line := range []string{"FELIX_QUIC_BIND", "127.0.0.1:7001", "flag", "FELIX_LOG_FORMAT", "json", "env", "FELIX_DURABLE_FSYNC_MODE", "on_commit", "default"} {
		if !bytes.Contains(out, []byte(line)) {
			t.Fatalf("--print-config lacks %q:\n%s", line, out)
		}
	}
	bad := exec.Command(brokerBin, "--print-config")
	bad.Env = append(bad.Environ(), "FELIX_DURABLE_FSYNC_MODE=sometimes")
	out, err = bad.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("FELIX_DURABLE_FSYNC_MODE")) {
		t.Fatalf("invalid value accepted or unnamed: %v %s", err, out)
	}
}

func TestCacheOperations(t *testing.T) {
	b := startBroker(t, "")
	if code, out := b.admin("POST", "/v1/tenants/default/namespaces/default/caches", "", map[string]any{"cache": "primary"}); code != http.StatusCreated {
		t.Fatalf("create cache: %d %s", code, out)
	}
	c := b.dial()
	cs := openStream(t, c)
	cs.auth("default", b.token, flagsPtr(v1Flags), "cache_delete", "counters", "error_codes")
	id := func(v uint64) *uint64 { return &v }
	ttl := uint64(60_000)
	// Pipelined requests; answers correlate by request_id.
	cs.send(&proto.CachePut{TenantID: "default", Namespace: "default", Cache: "primary", Key: "k", Value: []byte("v1"), RequestID: id(1), TTLMs: &ttl})
	cs.send(&proto.CachePut{TenantID: "default", Namespace: "default", Cache: "primary", Key: "empty", Value: []byte{}, RequestID: id(2)})
	cs.send(&proto.CounterAdd{TenantID: "default", Namespace: "default", Cache: "primary", Key: "hits", Delta: 5, RequestID: id(3)})
	answers := map[uint64]proto.Message{}
	for len(answers) < 3 {
		m := cs.msg()
		switch m := m.(type) {
		case *proto.CacheOK:
			answers[m.RequestID] = m
		case *proto.CounterValue:
			if m.Value != 5 {
				t.Fatalf("counter after +5: %d", m.Value)
			}
			answers[*m.RequestID] = m
		default:
			t.Fatalf("unexpected %T %+v", m, m)
		}
	}
	get := func(key string, rid uint64) *proto.CacheValue {
		cs.send(&proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "primary", Key: key, RequestID: id(rid)})
		v, ok := cs.msg().(*proto.CacheValue)
		if !ok || v.RequestID == nil || *v.RequestID != rid {
			t.Fatalf("cache_get %s: %+v", key, v)
		}
		return v
	}
	if v := get("k", 4); string(v.Value) != "v1" {
		t.Fatalf("get k: %q", v.Value)
	}
	if v := get("empty", 5); v.Value == nil || len(v.Value) != 0 {
		t.Fatalf("empty value must be present and empty: %#v", v.Value)
	}
	if v := get("missing", 6); v.Value != nil {
		t.Fatalf("missing key must be null: %#v", v.Value)
	}
	cs.send(&proto.CacheDelete{TenantID: "default", Namespace: "default", Cache: "primary", Key: "k", RequestID: id(7)})
	if d, ok := cs.msg().(*proto.CacheDeleted); !ok || string(d.Value) != "v1" {
		t.Fatalf("delete: %+v", d)
	}
	cs.send(&proto.CounterGet{TenantID: "default", Namespace: "default", Cache: "primary", Key: "hits", RequestID: id(8)})
	if cv, ok := cs.msg().(*proto.CounterValue); !ok || cv.Value != 5 {
		t.Fatalf("counter_get: %+v", cv)
	}
	// Unknown cache: a correlatable not_found.
	cs.send(&proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "nope", Key: "k", RequestID: id(9)})
	m := cs.msg()
	expectError(t, m, proto.CodeNotFound, "")
	if e := m.(*proto.Error); e.RequestID == nil || *e.RequestID != 9 {
		t.Fatalf("error not correlated: %+v", e)
	}
	// Read-only token cannot write.
	ro, err := auth.IssueToken(b.dataDir, "default", "ro", []string{"cache.read:cache:default/default/*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rs := openStream(t, c)
	rs.auth("default", ro, flagsPtr(v1Flags))
	rs.send(&proto.CachePut{TenantID: "default", Namespace: "default", Cache: "primary", Key: "k", Value: []byte("x"), RequestID: id(10)})
	expectError(t, rs.msg(), proto.CodeUnauthorized, "forbidden")

	// Values survive a clean restart (durable cache).
	if code := b.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	b2 := startBroker(t, b.dataDir)
	cs2 := openStream(t, b2.dial())
	cs2.auth("default", b2.token, flagsPtr(v1Flags))
	cs2.send(&proto.CacheGet{TenantID: "default", Namespace: "default", Cache: "primary", Key: "empty", RequestID: id(11)})
	if v, ok := cs2.msg().(*proto.CacheValue); !ok || v.Value == nil {
		t.Fatalf("after restart: %+v", v)
	}
}

func TestPublishOnlyUniStream(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("default", "default", "logs", true)
	c := b.dial()
	uni, err := c.OpenUniStreamSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var frames []byte
	frames = proto.AppendMessage(frames, &proto.Auth{TenantID: "default", Token: b.token})
	for i := 0; i < 3; i++ {
		batch := &proto.PublishBatch{TenantID: []byte("default"), Namespace: []byte("default"), Stream: []byte("logs"), Payloads: [][]byte{[]byte(fmt.Sprintf("u%d", i))}}
		frames, _ = proto.AppendPublishBatch(frames, batch)
	}
	uni.Write(frames)
	uni.Close()
	ctl := openStream(t, c)
	ctl.auth("default", b.token, flagsPtr(v1Flags))
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "logs", Start: &proto.Start{Kind: proto.StartEarliest}})
	events := acceptEvents(t, c)
	ctl.msg()
	got := events.records(3)
	if got[0] != "u0" || got[2] != "u2" {
		t.Fatalf("uni publishes: %v", got)
	}

	// Anything but a publish on a publish-only stream ends it (STOP_SENDING from the broker).
	bad, err := c.OpenUniStreamSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bad.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", Token: b.token}))
	bad.Write(proto.AppendMessage(nil, &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "logs"}))
	select {
	case <-bad.Context().Done():
	case <-time.After(20 * time.Second):
		t.Fatal("a subscribe on a publish-only stream did not end it")
	}
	var se *quic.StreamError
	if _, err := bad.Write([]byte{0}); !errors.As(err, &se) || se.ErrorCode != netq.CodeProtocol {
		t.Fatalf("write after the broker ended the stream: %v, want stream error %#x", err, netq.CodeProtocol)
	}
}

func TestConsumerGroups(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("default", "default", "jobs", true)
	c := b.dial()
	s := openStream(t, c)
	ok, _ := s.auth("default", b.token, flagsPtr(v1Flags), "groups").(*proto.AuthOK)
	if ok == nil || !strings.Contains(strings.Join(ok.Features, ","), "groups") {
		t.Fatalf("groups feature not advertised: %+v", ok)
	}
	for i := 0; i < 3; i++ {
		id := uint64(i)
		s.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "jobs", Payload: []byte(fmt.Sprintf("job-%d", i)), RequestID: &id})
		if _, ok := s.msg().(*proto.PublishOK); !ok {
			t.Fatal("publish")
		}
	}
	poll := func(rid uint64) *proto.GroupRecords {
		t.Helper()
		s.send(&proto.GroupPoll{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "billing", MaxRecords: 10, MaxWaitMs: 2000, RequestID: rid})
		m := s.msg()
		r, ok := m.(*proto.GroupRecords)
		if !ok || r.RequestID != rid {
			t.Fatalf("group_poll answer %T %+v", m, m)
		}
		return r
	}
	r := poll(10)
	if len(r.Records) != 3 || string(r.Records[0].Payload) != "job-0" || r.Records[0].Delivery != 1 {
		t.Fatalf("first poll %+v", r)
	}
	s.send(&proto.GroupAck{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "billing", Offsets: []uint64{0, 1}, RequestID: 11})
	if g, ok := s.msg().(*proto.GroupOK); !ok || g.RequestID != 11 {
		t.Fatalf("ack answer %+v", g)
	}
	zero := uint64(0)
	s.send(&proto.GroupNack{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "billing", Offsets: []uint64{2}, RedeliverAfterMs: &zero, RequestID: 12})
	if g, ok := s.msg().(*proto.GroupOK); !ok || g.RequestID != 12 {
		t.Fatalf("nack answer %+v", g)
	}
	r = poll(13)
	if len(r.Records) != 1 || r.Records[0].Offset != 2 || r.Records[0].Delivery != 2 {
		t.Fatalf("redelivery %+v", r)
	}
	s.send(&proto.DeadLettersList{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "billing", Limit: 10, RequestID: 14})
	if d, ok := s.msg().(*proto.DeadLetters); !ok || len(d.Entries) != 0 {
		t.Fatalf("dead letters %+v", d)
	}
	// Acking again is idempotent; an unknown group is not_found.
	s.send(&proto.GroupAck{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "billing", Offsets: []uint64{0}, RequestID: 15})
	if g, ok := s.msg().(*proto.GroupOK); !ok || g.RequestID != 15 {
		t.Fatalf("repeated ack answer %+v", g)
	}
	s.send(&proto.GroupAck{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "nobody", Offsets: []uint64{0}, RequestID: 16})
	expectError(t, s.msg(), proto.CodeNotFound, "")
}

func TestCacheWatch(t *testing.T) {
	b := startBroker(t, "", "FELIX_AUTO_CREATE=true")
	c := b.dial()
	s := openStream(t, c)
	s.auth("default", b.token, flagsPtr(v1Flags), "cache_watch")
	key := "cfg"
	// The cache does not exist yet: auto-create makes it on first use.
	s.send(&proto.CacheWatch{TenantID: "default", Namespace: "default", Cache: "settings", Key: &key, RequestID: 1})
	ev := acceptEvents(t, c)
	w, ok := s.msg().(*proto.CacheWatching)
	if !ok || w.WatchID != ev.id || w.RequestID != 1 {
		t.Fatalf("cache_watching %+v, hello %d", w, ev.id)
	}
	rid := uint64(2)
	s.send(&proto.CachePut{TenantID: "default", Namespace: "default", Cache: "settings", Key: "cfg", Value: []byte("v"), RequestID: &rid})
	s.msg()
	s.send(&proto.CacheDelete{TenantID: "default", Namespace: "default", Cache: "settings", Key: "cfg", RequestID: &rid})
	s.msg()
	for _, want := range []proto.CacheChangeOp{proto.CacheChangePut, proto.CacheChangeDelete} {
		h, body := ev.frame()
		m, err := proto.DecodeMessage(body)
		ch, ok := m.(*proto.CacheChange)
		if err != nil || h.Flags != 0 || !ok || ch.Op != want || ch.Key != "cfg" || ch.WatchID != w.WatchID {
			t.Fatalf("change %s: %+v %v", want, m, err)
		}
	}
	s.send(&proto.CacheUnwatch{WatchID: w.WatchID})
	if _, ok := s.msg().(*proto.OK); !ok {
		t.Fatal("unwatch not answered ok")
	}
	ev.st.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := ev.fr.ReadHeader(); !errors.Is(err, io.EOF) {
		t.Fatalf("event stream after unwatch: %v, want EOF", err)
	}
}

func TestAuthOffAndIdempotentPublish(t *testing.T) {
	b := startBroker(t, "", "FELIX_AUTH=off", "FELIX_AUTO_CREATE=true")
	if !strings.Contains(b.logs.String(), "auth disabled") {
		t.Fatal("FELIX_AUTH=off without a warning")
	}
	s := openStream(t, b.dial())
	if _, ok := s.auth("anything", "no-token", flagsPtr(v1Flags), "idempotent_publish").(*proto.AuthOK); !ok {
		t.Fatal("auth off refused a client")
	}
	id := uint64(77)
	var first *proto.PublishOK
	for attempt := 0; attempt < 2; attempt++ {
		s.send(&proto.Publish{TenantID: "anything", Namespace: "dev", Stream: "events", Payload: []byte("once"),
			RequestID: &id, ProducerID: "0f9b7c1e-producer", Idempotent: true})
		ok, isOK := s.msg().(*proto.PublishOK)
		if !isOK {
			t.Fatalf("attempt %d not acked", attempt)
		}
		if attempt == 0 {
			first = ok
			continue
		}
		if !ok.Duplicate || *ok.FirstOffset != *first.FirstOffset {
			t.Fatalf("retry not deduplicated: first %+v, retry %+v", first, ok)
		}
	}
}

func TestIdempotentBinaryPublish(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("default", "default", "pay", true)
	c := b.dial()
	s := openStream(t, c)
	ok, _ := s.auth("default", b.token, flagsPtr(v1Flags|proto.FlagPublishIdempotent)).(*proto.AuthOK)
	if ok == nil || ok.ServerFlags&proto.FlagPublishIdempotent == 0 {
		t.Fatalf("0x2000 not advertised: %+v", ok)
	}
	batch := &proto.PublishBatch{Acked: true, RequestID: 9, AckMode: proto.AckPerBatch, ProducerID: []byte("producer-1"),
		TenantID: []byte("default"), Namespace: []byte("default"), Stream: []byte("pay"), Payloads: [][]byte{[]byte("charge")}}
	frame, err := proto.AppendPublishBatch(nil, batch)
	if err != nil || frame[7] != 0x09 || frame[6] != 0x20 {
		t.Fatalf("frame flags %x %v", frame[6:8], err)
	}
	for attempt := 0; attempt < 2; attempt++ { // a retry after an indeterminate answer
		s.raw(frame)
		h, body, err := s.next()
		var ack proto.PublishAck
		if err != nil || h.Flags != proto.FlagBinaryPublishAck || proto.DecodePublishAck(body, &ack) != nil || ack.Status != proto.AckStatusOK || ack.RequestID != 9 {
			t.Fatalf("attempt %d: %+v %v", attempt, ack, err)
		}
	}
	id := uint64(10)
	s.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "pay", Payload: []byte("next"), RequestID: &id})
	if pok, ok := s.msg().(*proto.PublishOK); !ok || *pok.FirstOffset != 1 {
		t.Fatalf("the retry was appended twice: next record at %+v", pok)
	}
}

// A subscriber that stops reading is bounded by its queue (drop_new): the publisher keeps
// being acknowledged, and the subscriber later sees a gap, not unbounded buffering.
func TestSlowSubscriberIsBounded(t *testing.T) {
	b := startBroker(t, "", "FELIX_SUBSCRIBER_QUEUE_CAPACITY=4")
	b.createStream("default", "default", "firehose", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sc, err := quic.DialAddr(ctx, b.info.QUICAddr, netq.PinnedClientTLS(b.info.Fingerprint),
		&quic.Config{InitialStreamReceiveWindow: 32 << 10, MaxStreamReceiveWindow: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.CloseWithError(0, "")
	sub := openStream(t, sc)
	sub.auth("default", b.token, flagsPtr(v1Flags))
	sub.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "firehose"})
	events := acceptEvents(t, sc)
	sub.msg()

	pub := openStream(t, b.dial())
	pub.auth("default", b.token, flagsPtr(v1Flags))
	const n = 400
	payload := bytes.Repeat([]byte("x"), 4096) // 1.6 MB in all, far past the 32 KiB window
	for i := 0; i < n; i++ {
		id := uint64(i)
		pub.send(&proto.Publish{TenantID: "default", Namespace: "default", Stream: "firehose", Payload: payload, RequestID: &id})
		if _, ok := pub.msg().(*proto.PublishOK); !ok {
			t.Fatalf("publish %d not acked while a subscriber stalls", i)
		}
	}
	// Now drain the subscriber: it gets what fit in its window and queue, then a gap.
	received := 0
	var batch proto.EventBatch
	for received < n {
		events.st.SetReadDeadline(time.Now().Add(2 * time.Second))
		h, err := events.fr.ReadHeader()
		if err != nil {
			break // nothing more queued: the rest was dropped
		}
		body, err := events.fr.ReadBody(h, nil)
		if err != nil || proto.DecodeEventBatch(h.Flags, body, &batch) != nil {
			t.Fatalf("event frame: %v", err)
		}
		received += len(batch.Payloads)
	}
	if received == 0 || received >= n {
		t.Fatalf("stalled subscriber received %d of %d records; want a bounded, non-empty prefix", received, n)
	}
	t.Logf("stalled subscriber kept %d of %d records", received, n)
}

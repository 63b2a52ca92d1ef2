package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/core"
	"felix/netq"
	"felix/proto"
)

// The options a single node cannot honour are refused when the stream is created or
// patched, each naming its field, instead of being stored and doing nothing.
func TestStreamOptionsRefusedWithoutDurableStorage(t *testing.T) {
	f := newAdminFixture(t)
	base := "/v1/tenants/default/namespaces/default/streams"
	age := int64(60)
	for field, body := range map[string]map[string]any{
		"kind Queue":           {"kind": "Queue"},
		"consistency Quorum":   {"consistency": "Quorum"},
		"delivery AtLeastOnce": {"delivery": "AtLeastOnce"},
		"retention":            {"retention": Retention{MaxAgeSeconds: &age}},
	} {
		body["stream"], body["durable"] = "volatile", false
		code, e, _ := f.do("POST", base, f.admin, body)
		if code != http.StatusBadRequest || e.Code != "malformed" || !strings.Contains(e.Message, field+" needs a durable stream") {
			t.Errorf("in-memory stream with %s: %d %+v", field, code, e)
		}
	}
	huge := maxRetentionSeconds + 1
	if code, e, _ := f.do("POST", base, f.admin, map[string]any{"stream": "x", "retention": Retention{MaxAgeSeconds: &huge}}); code != http.StatusBadRequest || !strings.Contains(e.Message, "retention.max_age_seconds") {
		t.Errorf("max_age_seconds past a Duration: %d %+v", code, e)
	}
	if code, _, out := f.do("POST", base, f.admin, map[string]any{"stream": "mem", "durable": false}); code != http.StatusCreated {
		t.Fatalf("in-memory stream: %d %s", code, out)
	}
	if code, e, _ := f.do("PATCH", base+"/mem", f.admin, map[string]any{"delivery": "AtLeastOnce"}); code != http.StatusBadRequest || !strings.Contains(e.Message, "delivery AtLeastOnce needs a durable stream") {
		t.Errorf("PATCH an in-memory stream to AtLeastOnce: %d %+v", code, e)
	}
	if code, _, out := f.do("POST", base, f.admin, map[string]any{"stream": "q", "kind": "Queue", "consistency": "Quorum", "delivery": "AtLeastOnce"}); code != http.StatusCreated {
		t.Fatalf("durable Queue/Quorum/AtLeastOnce stream: %d %s", code, out)
	}
	if code, e, _ := f.do("PATCH", base+"/q", f.admin, map[string]any{"consistency": "Leader"}); code != http.StatusBadRequest || !strings.Contains(e.Message, "consistency cannot change") {
		t.Errorf("PATCH consistency: %d %+v", code, e)
	}
	if code, _, out := f.do("PATCH", base+"/q", f.admin, map[string]any{"consistency": "Quorum", "delivery": "AtMostOnce"}); code != http.StatusOK {
		t.Errorf("PATCH repeating consistency, changing delivery: %d %s", code, out)
	}
}

// adminPost POSTs body to the in-process broker's admin API (auth off) and returns the
// status and answer.
func adminPost(t *testing.T, srv *Server, method, path string, body any) (int, string) {
	t.Helper()
	return adminRequest(t, srv, method, path, "", body)
}

// adminRequest sends body as JSON with method to path on srv's admin API, with token as
// its bearer credential (none when empty), and returns the status and answer.
func adminRequest(t *testing.T, srv *Server, method, path, token string, body any) (int, string) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, "http://"+srv.HTTPAddr().String()+path, bytes.NewReader(data))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// A stream created through the admin API takes its retention and consistency into the
// engine, and the broker enforces that retention: with 4 KiB segments and a 1 s retention
// interval, a stream limited to 8 KiB loses its head while its neighbour keeps everything.
func TestStreamOptionsReachTheEngine(t *testing.T) {
	srv, stop := startInProcess(t, map[string]string{"FELIX_DURABLE_SEGMENT_BYTES": "4096", "FELIX_DURABLE_RETENTION_INTERVAL_SECONDS": "1"})
	defer stop()
	base := "/v1/tenants/default/namespaces/default/streams"
	age, size := int64(3600), int64(8192)
	if code, out := adminPost(t, srv, "POST", base, map[string]any{"stream": "bounded", "consistency": "Quorum",
		"retention": Retention{MaxAgeSeconds: &age, MaxSizeBytes: &size}}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, out := adminPost(t, srv, "POST", base, map[string]any{"stream": "open"}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	bounded := core.StreamName{Tenant: "default", Namespace: "default", Stream: "bounded"}
	open := core.StreamName{Tenant: "default", Namespace: "default", Stream: "open"}
	info, err := srv.engine.StreamInfo(bounded)
	if err != nil {
		t.Fatal(err)
	}
	if s := info.Spec; s.RetentionAge != time.Hour || s.RetentionBytes != 8192 || !s.SyncOnCommit {
		t.Fatalf("engine spec of the bounded stream: %+v", s)
	}
	if info, _ := srv.engine.StreamInfo(open); info.Spec.RetentionAge != 0 || info.Spec.RetentionBytes != 0 || info.Spec.SyncOnCommit {
		t.Fatalf("engine spec of the open stream: %+v", info.Spec)
	}
	record := make([]byte, 1000)
	for _, name := range []core.StreamName{bounded, open} {
		for range 40 {
			ch := make(chan error, 1)
			if err := srv.engine.Publish(&core.PublishRequest{Stream: name, Payloads: [][]byte{record}}, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
				t.Fatal(err)
			}
			if err := <-ch; err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 20*time.Second, "retention of 8 KiB to drop a segment of a 40 KB stream", func() bool {
		info, err := srv.engine.StreamInfo(bounded)
		return err == nil && info.EarliestOffsets[0] > 0
	})
	if info, _ := srv.engine.StreamInfo(open); info.EarliestOffsets[0] != 0 {
		t.Fatalf("stream without retention lost its head: %v", info.EarliestOffsets)
	}
}

// rawStream is one authenticated client bi stream to an in-process broker.
type rawStream struct {
	t   *testing.T
	st  *quic.Stream
	buf []byte
}

// dialRaw opens a client stream to srv authenticated as tenant default with error codes.
func dialRaw(t *testing.T, srv *Server) *rawStream {
	t.Helper()
	flags := uint16(0x003F)
	return authedStream(t, srv, &proto.Auth{TenantID: "default", ClientFlags: &flags, Features: []string{proto.FeatureErrorCodes}})
}

// authedStream opens a client stream to srv, sends auth and fails the test unless the
// answer is auth_ok.
func authedStream(t *testing.T, srv *Server, auth *proto.Auth) *rawStream {
	t.Helper()
	r := &rawStream{t: t, st: clientStream(t, srv, &quic.Config{})}
	r.send(auth)
	if m, ok := r.next().(*proto.AuthOK); !ok {
		t.Fatalf("auth: no auth_ok but %#v", m)
	}
	return r
}

// clientStream dials srv's client listener (TLS pinned to its certificate; conf nil is
// quic-go's defaults) within 20 s and opens one bi stream; the connection is closed when
// the test ends.
func clientStream(tb testing.TB, srv *Server, conf *quic.Config) *quic.Stream {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(ctx, srv.QUICAddr().String(), netq.PinnedClientTLS(netq.Fingerprint(srv.cert.Certificate[0])), conf)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.CloseWithError(0, "") })
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

func (r *rawStream) send(m proto.Message) {
	r.t.Helper()
	if _, err := r.st.Write(proto.AppendMessage(nil, m)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rawStream) next() proto.Message {
	r.t.Helper()
	_ = r.st.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, body, err := proto.ReadFrame(r.st, r.buf, 1<<24)
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := proto.DecodeMessage(body)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// publish sends one JSON publish (acked with id, or ack none when id is 0).
func (r *rawStream) publish(stream string, id uint64) {
	m := &proto.JSONPublishBatch{TenantID: "default", Namespace: "default", Stream: stream, Payloads: [][]byte{[]byte("x")}, Ack: proto.JSONAckNone}
	if id != 0 {
		m.RequestID, m.Ack = &id, proto.JSONAckPerBatch
	}
	r.send(m)
}

// wantOffset reads the publish_ok of request id and checks its first offset.
func (r *rawStream) wantOffset(id, offset uint64) {
	r.t.Helper()
	ok, isOK := r.next().(*proto.PublishOK)
	if !isOK || ok.RequestID != id || ok.FirstOffset == nil || *ok.FirstOffset != offset {
		r.t.Fatalf("publish %d: %+v, want first offset %d", id, ok, offset)
	}
}

// Delivery AtLeastOnce refuses un-acked publishes (nothing is stored) and keeps acked
// ones; PATCHing the stream to AtMostOnce takes effect on an open session at once.
// Kind Queue refuses a plain subscribe.
func TestAtLeastOnceAndQueueOnTheWire(t *testing.T) {
	srv, stop := startInProcess(t, nil)
	defer stop()
	base := "/v1/tenants/default/namespaces/default/streams"
	for _, body := range []map[string]any{{"stream": "alo", "delivery": "AtLeastOnce"}, {"stream": "jobs", "kind": "Queue"}} {
		if code, out := adminPost(t, srv, "POST", base, body); code != http.StatusCreated {
			t.Fatalf("create %v: %d %s", body, code, out)
		}
	}
	r := dialRaw(t, srv)
	r.publish("alo", 0)
	if e, ok := r.next().(*proto.Error); !ok || e.Code != proto.CodeMalformed || !strings.Contains(e.Message, "delivery AtLeastOnce") {
		t.Fatalf("un-acked publish to an AtLeastOnce stream: %+v", e)
	}
	r.publish("alo", 1)
	r.wantOffset(1, 0) // the refused publish stored nothing

	if code, out := adminPost(t, srv, "PATCH", base+"/alo", map[string]any{"delivery": "AtMostOnce"}); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, out)
	}
	r.publish("alo", 0)
	r.publish("alo", 2)
	r.wantOffset(2, 2) // offset 1 is the un-acked publish, now accepted

	r.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "jobs"})
	if e, ok := r.next().(*proto.Error); !ok || e.Code != proto.CodeMalformed || !strings.Contains(e.Message, "kind Queue") {
		t.Fatalf("subscribe to a Queue: %+v", e)
	}
	r.publish("jobs", 3)
	r.wantOffset(3, 0)
}

package broker

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"felix/core"
	"felix/netq"
	"felix/proto"

	"github.com/quic-go/quic-go"
)

// A stream outliving its token is refused with "token expired" and may authenticate again.
func TestExpiredTokenOnLongStream(t *testing.T) {
	srv, stop := startInProcess(t, map[string]string{"FELIX_AUTH": "on"})
	defer stop()
	token, err := srv.authRes.Issuer.Issue("default", "short", []string{"stream.publish:stream:default/default/*"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := srv.authRes.Issuer.Issue("default", "fresh", []string{"stream.publish:stream:default/default/*"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	st := clientStream(t, srv, nil)
	st.SetReadDeadline(time.Now().Add(20 * time.Second))
	fr := netq.NewFrameReader(st, 1<<20)
	read := func() proto.Message {
		t.Helper()
		h, err := fr.ReadHeader()
		if err != nil {
			t.Fatal(err)
		}
		body, err := fr.ReadBody(h, nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := proto.DecodeMessage(body)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", Token: token}))
	if _, ok := read().(*proto.OK); !ok {
		t.Fatal("auth refused")
	}
	srv.clockSkew.Store(int64(2 * time.Hour)) // past exp + leeway
	st.Write(proto.AppendMessage(nil, &proto.Publish{TenantID: "default", Namespace: "default", Stream: "s", Payload: []byte("x"), Ack: proto.JSONAckNone}))
	if e, ok := read().(*proto.Error); !ok || e.Message != "token expired" || e.Code != proto.CodeUnauthorized {
		t.Fatalf("expired token answer %+v", e)
	}
	st.Write(proto.AppendMessage(nil, &proto.Auth{TenantID: "default", Token: fresh}))
	if _, ok := read().(*proto.OK); !ok {
		t.Fatal("re-auth with a fresh token refused")
	}
}

// A live subscription outlives its token by at most the leeway: once exp + leeway has
// passed, the next event is not delivered; the event stream carries
// error{unauthorized, "token expired"} and ends (found by a new-user trial: an expired
// token kept receiving). Events before the expiry are delivered.
func TestExpiredTokenEndsItsSubscription(t *testing.T) {
	srv, stop := startInProcess(t, map[string]string{"FELIX_AUTH": "on"})
	defer stop()
	if _, err := srv.catalog.CreateStream(Stream{TenantID: "default", Namespace: "default", Stream: "s"}, srv.ApplyCreate); err != nil {
		t.Fatal(err)
	}
	token, err := srv.authRes.Issuer.Issue("default", "short", []string{"stream.subscribe:stream:default/default/*"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	frame := subscribeWithToken(t, srv, token, "s")
	publishOne(t, srv, "s")
	if flags, _, err := frame(); err != nil || flags == 0 {
		t.Fatalf("event before the expiry: flags %#x, %v", flags, err)
	}
	srv.clockSkew.Store(int64(2 * time.Hour)) // past exp + leeway
	publishOne(t, srv, "s")
	flags, body, err := frame()
	if err != nil || flags != 0 {
		t.Fatalf("after the expiry: flags %#x, %v; want the error frame", flags, err)
	}
	if m, err := proto.DecodeMessage(body); err != nil {
		t.Fatal(err)
	} else if e, ok := m.(*proto.Error); !ok || e.Code != proto.CodeUnauthorized || e.Message != "token expired" {
		t.Fatalf("after the expiry: %#v", m)
	}
	if _, _, err := frame(); !errors.Is(err, io.EOF) {
		t.Fatalf("the event stream must end after the error: %v", err)
	}
}

// subscribeWithToken authenticates a new connection to srv with token, subscribes to stream
// (tenant and namespace default) and returns a reader of the event stream's frames after
// its event_stream_hello (flags, body, error), each read bounded by 20 s.
func subscribeWithToken(t *testing.T, srv *Server, token, stream string) func() (uint16, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, r := dialStream(ctx, t, srv)
	r.send(&proto.Auth{TenantID: "default", Token: token})
	if _, ok := r.next().(*proto.OK); !ok {
		t.Fatal("auth refused")
	}
	return subscribeEvents(ctx, t, conn, r, &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: stream})
}

// dialStream dials srv's client listener within ctx and opens one bi stream (not yet
// authenticated); the connection is closed when the test ends.
func dialStream(ctx context.Context, t *testing.T, srv *Server) (*quic.Conn, *rawStream) {
	t.Helper()
	conn, err := quic.DialAddr(ctx, srv.QUICAddr().String(), netq.PinnedClientTLS(netq.Fingerprint(srv.cert.Certificate[0])), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	r := &rawStream{t: t}
	if r.st, err = conn.OpenStreamSync(ctx); err != nil {
		t.Fatal(err)
	}
	return conn, r
}

// subscribeEvents sends sub on r (an authenticated stream of conn), waits for subscribed
// and the event stream, and returns a reader of its frames (flags, body, error) after its
// event_stream_hello, each read bounded by 20 s.
func subscribeEvents(ctx context.Context, t *testing.T, conn *quic.Conn, r *rawStream, sub *proto.Subscribe) func() (uint16, []byte, error) {
	t.Helper()
	r.send(sub)
	ev, err := conn.AcceptUniStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := r.next().(*proto.Subscribed); !ok {
		t.Fatalf("subscribe refused: %#v", m)
	}
	_ = ev.SetReadDeadline(time.Now().Add(20 * time.Second))
	er := netq.NewFrameReader(ev, 1<<20)
	frame := func() (uint16, []byte, error) {
		h, err := er.ReadHeader()
		if err != nil {
			return 0, nil, err
		}
		body, err := er.ReadBody(h, nil)
		return h.Flags, body, err
	}
	if _, _, err := frame(); err != nil { // event_stream_hello
		t.Fatal(err)
	}
	return frame
}

// publishOne appends one record to stream (tenant and namespace default) through srv's
// engine and waits for its commit.
func publishOne(t *testing.T, srv *Server, stream string) {
	t.Helper()
	done := make(chan error, 1)
	name := core.StreamName{Tenant: "default", Namespace: "default", Stream: stream}
	if err := srv.engine.Publish(&core.PublishRequest{Stream: name, Payloads: [][]byte{[]byte("x")}},
		func(_ core.PublishResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

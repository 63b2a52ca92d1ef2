package broker

import (
	"testing"
	"time"

	"felix/netq"
	"felix/proto"
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

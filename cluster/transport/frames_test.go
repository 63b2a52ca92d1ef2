package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// rawPeer dials l as node-a (unauthenticated mode) and completes Hello by hand.
func rawPeer(t *testing.T, ctx context.Context, l *Listener) (*quic.Conn, *quic.Stream) {
	t.Helper()
	return rawPeerWith(t, ctx, l, creds(t, "node-a", TLSFiles{}))
}

// rawPeerWith dials l as c (its node id in Hello), expecting the listener to be node-b.
func rawPeerWith(t *testing.T, ctx context.Context, l *Listener, c *Credentials) (*quic.Conn, *quic.Stream) {
	t.Helper()
	qc, err := quic.DialAddr(ctx, l.Addr().String(), c.ClientTLS("node-b"), &quic.Config{HandshakeIdleTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { qc.CloseWithError(0, "") })
	s, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeMsg(t, s, &proto.Hello{CorrelationID: 1, NodeID: []byte(c.NodeID())})
	if m := readMsg(t, s); m.Kind() != proto.KindHelloOk {
		t.Fatalf("Hello answered %v", m.Kind())
	}
	return qc, s
}

func writeMsg(t *testing.T, s *quic.Stream, m proto.InternalMessage) {
	t.Helper()
	f, err := proto.AppendInternalFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(f); err != nil {
		t.Fatal(err)
	}
}

func readMsg(t *testing.T, s *quic.Stream) proto.InternalMessage {
	t.Helper()
	_ = s.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, _, _, _, err := readMessage(s, nil, DefaultMaxFrameBytes, "")
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return m
}

// A body that does not decode is refused Malformed in the request's shape and closes that
// stream only; the connection's other streams go on.
func TestMalformedBodyClosesOnlyItsStream(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	ctx := testCtx(t)
	qc, s := rawPeer(t, ctx, l)
	body := binary.BigEndian.AppendUint64(nil, 42)
	bad := append(proto.AppendInternalHeader(nil, proto.KindAuthorizedForwardPublish, uint32(len(body)+3)), append(body, 0, 9, 'x')...)
	if _, err := s.Write(bad); err != nil {
		t.Fatal(err)
	}
	m := readMsg(t, s)
	if e, ok := m.(*proto.ForwardPublishError); !ok || e.CorrelationID != 42 || e.Code != proto.InternalMalformed {
		t.Fatalf("malformed publish answered %#v, want ForwardPublishError(42, Malformed)", m)
	}
	if _, _, err := proto.ReadInternalFrame(s, nil, DefaultMaxFrameBytes); !errors.Is(err, io.EOF) {
		t.Fatalf("after the refusal the stream gave %v, want its end", err)
	}
	s2, err := qc.OpenStreamSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := publish(5)
	req.CorrelationID = 43
	writeMsg(t, s2, req)
	if m := readMsg(t, s2); m.Correlation() != 43 || m.Kind() != proto.KindForwardPublishOk {
		t.Fatalf("another stream after the refusal: %#v", m)
	}
}

// A header that is not ours closes the connection with its code; another peer's connection
// is untouched.
func TestFatalHeaderClosesOnlyThatConnection(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{MaxFrameBytes: 4096}, okHandler)
	ctx := testCtx(t)
	cases := map[string]struct {
		frame []byte
		code  quic.ApplicationErrorCode
	}{
		"version 2":  {frame: []byte{'F', 'L', 'X', 'I', 0, 2, 0, 3, 0, 0, 0, 8}, code: CodeProtocolVersion},
		"FLX1 magic": {frame: []byte{'F', 'L', 'X', '1', 0, 1, 0, 3, 0, 0, 0, 8}, code: CodeMalformed},
		"over bound": {frame: proto.AppendInternalHeader(nil, proto.KindForwardPublishOk, 4097), code: CodeMalformed},
	}
	bystander, bs := rawPeer(t, ctx, l)
	for name, tc := range cases {
		qc, s := rawPeer(t, ctx, l)
		if _, err := s.Write(tc.frame); err != nil {
			t.Fatal(err)
		}
		select {
		case <-qc.Context().Done():
		case <-ctx.Done():
			t.Fatalf("%s: connection not closed", name)
		}
		var ae *quic.ApplicationError
		if err := context.Cause(qc.Context()); !errors.As(err, &ae) || ae.ErrorCode != tc.code {
			t.Errorf("%s: closed with %v, want code %#x", name, err, tc.code)
		}
	}
	if bystander.Context().Err() != nil {
		t.Fatal("another peer's connection closed")
	}
	req := publish(9)
	req.CorrelationID = 7
	writeMsg(t, bs, req)
	if m := readMsg(t, bs); m.Correlation() != 7 {
		t.Fatalf("bystander answered %#v", m)
	}
}

func TestFirstFrameMustBeHello(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	ctx := testCtx(t)
	c := creds(t, "node-a", TLSFiles{})
	qc, err := quic.DialAddr(ctx, l.Addr().String(), c.ClientTLS("node-b"), &quic.Config{HandshakeIdleTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer qc.CloseWithError(0, "")
	s, _ := qc.OpenStreamSync(ctx)
	writeMsg(t, s, publish(1))
	select {
	case <-qc.Context().Done():
	case <-ctx.Done():
		t.Fatal("a connection opening without Hello stayed up")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(qc.Context()); !errors.As(err, &ae) || ae.ErrorCode != CodeMalformed {
		t.Fatalf("closed with %v, want CodeMalformed", err)
	}
}

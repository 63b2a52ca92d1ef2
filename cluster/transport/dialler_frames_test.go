package transport

import (
	"context"
	"errors"
	"testing"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// A peer whose answer is not a frame of ours loses its connection, and only it: the waiter
// fails ErrConnectionLost, and the pool's connections to other peers are untouched.
func TestBadAnswerClosesOnlyThatPeersConnection(t *testing.T) {
	ctx := testCtx(t)
	good := serve(t, creds(t, "node-c", TLSFiles{}), Options{}, okHandler)
	ql, err := quic.ListenAddr("127.0.0.1:0", creds(t, "node-b", TLSFiles{}).ServerTLS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ql.Close()
	closed := make(chan error, 1)
	go func() {
		qc, err := ql.Accept(ctx)
		if err != nil {
			return
		}
		s, err := qc.AcceptStream(ctx)
		if err != nil {
			return
		}
		m, _, _, _, err := readMessage(s, nil, DefaultMaxFrameBytes, "")
		if err != nil {
			return
		}
		f, _ := proto.AppendInternalFrame(nil, &proto.HelloOk{CorrelationID: m.Correlation(), NodeID: []byte("node-b")})
		s.Write(f)
		if _, _, _, _, err := readMessage(s, nil, DefaultMaxFrameBytes, ""); err != nil {
			return
		}
		s.Write([]byte{'F', 'L', 'X', 'I', 0, 9, 0, 3, 0, 0, 0, 16}) // version 9
		<-qc.Context().Done()
		closed <- context.Cause(qc.Context())
	}()
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{StreamsPerConn: 1}) // the fake reads the Hello stream only
	if _, err := p.Request(ctx, Peer{NodeID: "node-c", Addr: good.Addr().String()}, publish(1)); err != nil {
		t.Fatal(err)
	}
	_, err = p.Request(ctx, Peer{NodeID: "node-b", Addr: ql.Addr().String()}, publish(1))
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("bad answer: %v, want ErrConnectionLost", err)
	}
	select {
	case err := <-closed:
		var ae *quic.ApplicationError
		if !errors.As(err, &ae) || ae.ErrorCode != CodeProtocolVersion {
			t.Fatalf("the dialler closed with %v, want CodeProtocolVersion", err)
		}
	case <-ctx.Done():
		t.Fatal("the dialler kept the connection of a bad answer")
	}
	if ans, err := p.Request(ctx, Peer{NodeID: "node-c", Addr: good.Addr().String()}, publish(4)); err != nil || ans.(*proto.ForwardPublishOk).FirstOffset != 4 {
		t.Fatalf("the other peer after the bad answer: %#v %v", ans, err)
	}
}

package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"felix/netq"
	"felix/proto"

	"github.com/quic-go/quic-go"
)

func TestRequestAnswerCorrelation(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{})
	ctx := testCtx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(gen uint64) {
			defer wg.Done()
			ans, err := p.Request(ctx, Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(gen))
			if err != nil {
				errs <- err
				return
			}
			ok, isOk := ans.(*proto.ForwardPublishOk)
			if !isOk || ok.FirstOffset != gen {
				errs <- fmt.Errorf("request %d answered %#v", gen, ans)
			}
		}(uint64(i))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := p.Conns(); n != 1 {
		t.Fatalf("64 requests to one peer used %d connections, want 1 (pooled)", n)
	}
}

// The two roles have no protocol in common: a peer dialling the client port and a client
// dialling the internal port both fail in the TLS handshake, before any frame is read.
func TestRolesRefuseEachOtherInTheHandshake(t *testing.T) {
	cert, err := netq.SelfSigned([]string{"localhost"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	client, err := netq.Listen("127.0.0.1:0", cert, netq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	accepted := make(chan struct{}, 1)
	ctx := testCtx(t)
	go func() {
		if c, err := client.Accept(ctx); err == nil {
			accepted <- struct{}{}
			c.Release()
		}
	}()
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{})
	_, err = p.Request(ctx, Peer{NodeID: "localhost", Addr: client.Addr().String()}, publish(1))
	if !errors.Is(err, ErrUnreachable) || !isHandshakeFailure(err) {
		t.Fatalf("peer on the client port: %v, want a TLS handshake failure (ErrUnreachable)", err)
	}

	handled := make(chan struct{}, 1)
	internal := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, func(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
		handled <- struct{}{}
		return okHandler(ctx, peer, req)
	})
	for _, protos := range [][]string{{netq.ALPNClient}, nil} {
		conf := &tls.Config{InsecureSkipVerify: true, NextProtos: protos, MinVersion: tls.VersionTLS13}
		c, err := quic.DialAddr(ctx, internal.Addr().String(), conf, &quic.Config{HandshakeIdleTimeout: 3 * time.Second})
		if err == nil {
			c.CloseWithError(0, "")
			t.Fatalf("a client offering ALPN %v completed the handshake on the internal role", protos)
		}
	}
	select {
	case <-accepted:
		t.Fatal("the client role accepted a connection from a peer")
	case <-handled:
		t.Fatal("the internal role handled a frame from a client")
	default:
	}
}

func isHandshakeFailure(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.ErrorCode.IsCryptoError()
}

func TestHelloNamesTheDialledNode(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{})
	_, err := p.Request(testCtx(t), Peer{NodeID: "node-c", Addr: l.Addr().String()}, publish(1))
	if !errors.Is(err, ErrWrongPeer) {
		t.Fatalf("dialled node-c, reached node-b: %v, want ErrWrongPeer", err)
	}
}

func TestUnknownKindIsRefusedAndTheStreamGoesOn(t *testing.T) {
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{StreamsPerConn: 1})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	ans, err := p.Request(ctx, to, &proto.Unknown{RawKind: 999, Body: make([]byte, 8+5)})
	u, ok := ans.(*proto.UnsupportedKind)
	if err != nil || !ok || u.RefusedKind != 999 {
		t.Fatalf("unknown kind: %#v %v, want UnsupportedKind(999)", ans, err)
	}
	if ans, err := p.Request(ctx, to, publish(7)); err != nil || ans.(*proto.ForwardPublishOk).FirstOffset != 7 {
		t.Fatalf("request after the refusal: %#v %v", ans, err)
	}
}

func TestFrameBoundOnSend(t *testing.T) {
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxFrameBytes: 4096})
	req := publish(1)
	req.Payloads = [][]byte{make([]byte, 5000)}
	_, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: "127.0.0.1:1"}, req)
	if !errors.Is(err, proto.ErrFrameTooLarge) {
		t.Fatalf("oversized request: %v, want proto.ErrFrameTooLarge", err)
	}
}

func TestInflightBoundShedsTimeoutReleasesDropFails(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	entered := make(chan struct{}, 8)
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, func(ctx context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxInflightPerPeer: 1, RequestTimeout: time.Second})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	first := make(chan error, 1)
	go func() { _, err := p.Request(ctx, to, publish(1)); first <- err }()
	<-entered
	if _, err := p.Request(ctx, to, publish(2)); !errors.Is(err, ErrShed) || !Retryable(err) {
		t.Fatalf("second request at the bound: %v, want ErrShed", err)
	}
	if err := <-first; !errors.Is(err, ErrTimeout) || Retryable(err) {
		t.Fatalf("unanswered request: %v, want ErrTimeout (not retryable)", err)
	}

	p2 := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{RequestTimeout: time.Minute})
	go func() { _, err := p2.Request(ctx, to, publish(3)); first <- err }()
	<-entered
	l.Close() // the connection drops with the request outstanding
	select {
	case err := <-first:
		if !errors.Is(err, ErrConnectionLost) || Retryable(err) {
			t.Fatalf("request on a dropped connection: %v, want ErrConnectionLost", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter of a dropped connection was not released")
	}
}

func TestReconnectBackoff(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{Now: clock, Jitter: func() float64 { return 0 },
		HandshakeTimeout: 300 * time.Millisecond, Backoff: Backoff{Min: time.Second, Max: 4 * time.Second}})
	// A bound, silent UDP socket: the handshake times out.
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, okHandler)
	addr := l.Addr().String()
	l.Close()
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: addr}
	if _, err := p.Request(ctx, to, publish(1)); !errors.Is(err, ErrUnreachable) || !Retryable(err) {
		t.Fatalf("dial to nothing: %v, want ErrUnreachable", err)
	}
	if _, err := p.Request(ctx, to, publish(1)); !errors.Is(err, ErrBackoff) || !Retryable(err) {
		t.Fatalf("inside the window: %v, want ErrBackoff", err)
	}
	mu.Lock()
	now = now.Add(500 * time.Millisecond) // Delay(1, 0) = Min/2
	mu.Unlock()
	if _, err := p.Request(ctx, to, publish(1)); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("after the window: %v, want a new dial (ErrUnreachable)", err)
	}
}

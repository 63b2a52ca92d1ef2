package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"felix/cluster/transport"
	"felix/proto"
)

// blockUntilDone is a handler that signals entered and answers only when its ctx ends.
func blockUntilDone(entered chan<- struct{}) transport.Handler {
	return func(ctx context.Context, _ string, _ proto.InternalMessage) proto.InternalMessage {
		entered <- struct{}{}
		<-ctx.Done()
		return nil
	}
}

// result is the outcome of a request made in a goroutine.
type result struct {
	m   proto.InternalMessage
	err error
}

func requestAsync(ctx context.Context, p *transport.Pool, to transport.Peer, req proto.InternalMessage) <-chan result {
	out := make(chan result, 1)
	go func() {
		m, err := p.Request(ctx, to, req)
		out <- result{m, err}
	}()
	return out
}

func awaitLost(t *testing.T, what string, r <-chan result) {
	t.Helper()
	select {
	case got := <-r:
		if !errors.Is(got.err, transport.ErrConnectionLost) {
			t.Errorf("%s: %#v %v, want ErrConnectionLost (outcome unknown)", what, got.m, got.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still waiting 20 s after the drain", what)
	}
}

// The drain stops accepting peers, fails the waiters of the broker's own pool and closes the
// peers' connections: a request the broker sent to a silent peer and a request a peer sent
// to the broker (whose handler never answers by itself) both end ErrConnectionLost, the
// handler's context ends, and the stop is clean.
func TestInternalTransportDrainFailsWaiters(t *testing.T) {
	b := startInternal(t, internalEnv)
	in := b.srv.Internal()
	ctx := testCtx(t)

	peerEntered := make(chan struct{}, 1)
	peerCreds, err := transport.LoadCredentials("peer-2", transport.TLSFiles{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := transport.Listen("127.0.0.1:0", peerCreds, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sctx, scancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); _ = silent.Serve(sctx, blockUntilDone(peerEntered)) }()
	t.Cleanup(func() { scancel(); silent.Close(); <-served })
	outgoing := requestAsync(ctx, in.Pool, transport.Peer{NodeID: "peer-2", Addr: silent.Addr().String()}, forward(1))

	brokerEntered := make(chan struct{}, 1)
	in.Dispatcher.Register(proto.KindAuthorizedForwardPublish, blockUntilDone(brokerEntered))
	incoming := requestAsync(ctx, testPeer(t), transport.Peer{NodeID: in.NodeID, Addr: b.srv.InternalAddr().String()}, forward(2))
	for _, ch := range []chan struct{}{peerEntered, brokerEntered} {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatal("a request did not reach its handler")
		}
	}
	stopped := make(chan error, 1)
	go func() { stopped <- b.stop() }()
	awaitLost(t, "the broker's request to a silent peer", outgoing)
	awaitLost(t, "a peer's request the broker never answered", incoming)
	if err := <-stopped; err != nil {
		t.Fatalf("drain with internal requests outstanding: %v", err)
	}
	if _, err := in.Pool.Request(ctx, transport.Peer{NodeID: "peer-2", Addr: silent.Addr().String()}, forward(3)); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("the pool after the drain: %v, want ErrClosed", err)
	}
}

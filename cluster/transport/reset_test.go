package transport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/proto"
)

// crashAndRelisten ends l the way SIGKILL ends a process (the socket closes, no
// CONNECTION_CLOSE reaches the peers) and listens again on the same address with opts,
// serving okHandler until the test ends.
func crashAndRelisten(t *testing.T, l *Listener, c *Credentials, opts Options) {
	t.Helper()
	addr := l.Addr().String()
	_ = l.udp.Close() // the read loop fails: connections end without a packet
	l2, err := Listen(addr, c, opts)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l2.Serve(ctx, okHandler) }()
	t.Cleanup(func() {
		cancel()
		l2.Close()
		<-done
	})
}

// A peer killed and restarted on the same address with the same stateless-reset key:
// the pool's next request on the connection that outlived the old process fails
// ErrConnectionLost at once (the reset), not ErrTimeout, and the one after it redials
// and is answered. Without the key the same request waits out the request timeout:
// the connection to the dead process looks alive until the idle timeout (the leader
// of a restarted follower went on sending into it).
func TestStatelessResetAfterPeerRestart(t *testing.T) {
	for _, withKey := range []bool{true, false} {
		t.Run(map[bool]string{true: "key", false: "no-key"}[withKey], func(t *testing.T) {
			var opts Options
			if withKey {
				opts.StatelessResetKey = &quic.StatelessResetKey{1, 2, 3}
			}
			cb := creds(t, "node-b", TLSFiles{})
			l := serve(t, cb, opts, okHandler)
			const timeout = 1500 * time.Millisecond
			p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{RequestTimeout: timeout})
			peer := Peer{NodeID: "node-b", Addr: l.Addr().String()}
			if _, err := p.Request(testCtx(t), peer, publish(1)); err != nil {
				t.Fatal(err)
			}
			crashAndRelisten(t, l, cb, opts)
			_, err := p.Request(testCtx(t), peer, publish(2))
			if !withKey {
				if !errors.Is(err, ErrTimeout) {
					t.Fatalf("without a reset key the request after the restart answered %v, want ErrTimeout", err)
				}
				return
			}
			if !errors.Is(err, ErrConnectionLost) {
				t.Fatalf("the request after the restart answered %v, want ErrConnectionLost (a stateless reset)", err)
			}
			ans, err := p.Request(testCtx(t), peer, publish(3))
			if ok, isOk := ans.(*proto.ForwardPublishOk); err != nil || !isOk || ok.FirstOffset != 3 {
				t.Fatalf("the request after the reset answered %#v, %v", ans, err)
			}
		})
	}
}

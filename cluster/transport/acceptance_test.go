package transport

import (
	"context"
	"crypto/x509"
	"errors"
	"sync"
	"testing"
	"time"

	"felix/proto"
)

// blockingHandler never answers until the listener stops serving.
func blockingHandler(entered chan<- struct{}) Handler {
	return func(ctx context.Context, _ string, _ proto.InternalMessage) proto.InternalMessage {
		if entered != nil {
			entered <- struct{}{}
		}
		<-ctx.Done()
		return nil
	}
}

func (p *Pool) conn(t *testing.T, nodeID string) *clientConn {
	t.Helper()
	p.mu.Lock()
	ps := p.peers[nodeID]
	p.mu.Unlock()
	if ps == nil {
		t.Fatalf("no pool entry for %s", nodeID)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.conn
}

func (c *clientConn) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// waitFor polls cond until it holds or ctx ends (a condition, not a sleep that must be long enough).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// 10 000 requests outstanding on one connection all fail ErrConnectionLost (outcome unknown,
// not retryable) as soon as the connection drops.
func TestTenThousandWaitersFailWhenTheConnectionDrops(t *testing.T) {
	const n = 10000
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, blockingHandler(nil))
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxInflightPerPeer: n, RequestTimeout: time.Hour})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { _, err := p.Request(ctx, to, publish(1)); errs <- err }()
	}
	waitFor(t, ctx, "10 000 waiters", func() bool { c := p.conn(t, "node-b"); return c != nil && c.waiting() == n })
	l.Close()
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if !errors.Is(err, ErrConnectionLost) || Retryable(err) {
				t.Fatalf("waiter %d: %v, want ErrConnectionLost", i, err)
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d waiters were released", i, n)
		}
	}
}

// The request timeout, driven by a fake clock, releases the waiter of a peer that never
// answers: ErrTimeout, the waiter forgotten, the in-flight slot returned.
func TestTimeoutReleasesTheWaiterOfASilentPeer(t *testing.T) {
	entered := make(chan struct{}, 1)
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, blockingHandler(entered))
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxInflightPerPeer: 1, RequestTimeout: 7 * time.Second})
	fire := make(chan time.Time)
	asked := make(chan time.Duration, 1)
	p.after = func(d time.Duration) (<-chan time.Time, func() bool) {
		asked <- d
		return fire, func() bool { return true }
	}
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	done := make(chan error, 1)
	go func() { _, err := p.Request(ctx, to, publish(1)); done <- err }()
	if d := <-asked; d != 7*time.Second {
		t.Fatalf("timeout armed for %v, want RequestTimeout", d)
	}
	<-entered // the peer has the request and stays silent
	select {
	case err := <-done:
		t.Fatalf("request ended before its timeout: %v", err)
	default:
	}
	fire <- time.Now()
	if err := <-done; !errors.Is(err, ErrTimeout) || Retryable(err) {
		t.Fatalf("silent peer: %v, want ErrTimeout", err)
	}
	ps := p.peers["node-b"]
	if w := p.conn(t, "node-b").waiting(); w != 0 || ps.m.timeouts.Get() != 1 || ps.m.inflight.Get() != 0 {
		t.Fatalf("after the timeout: %d waiters, %d timeouts, %v in flight", w, ps.m.timeouts.Get(), ps.m.inflight.Get())
	}
	if !ps.acquire() {
		t.Fatal("the in-flight slot was not released")
	}
	ps.release()
}

// At the in-flight bound a request is shed before anything is written; inside the backoff
// window a request fails before any dial.
func TestShedSendsNothingAndBackoffDialsNothing(t *testing.T) {
	entered := make(chan struct{}, 4)
	l := serve(t, creds(t, "node-b", TLSFiles{}), Options{}, blockingHandler(entered))
	p := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{MaxInflightPerPeer: 1, RequestTimeout: time.Hour})
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	go p.Request(ctx, to, publish(1))
	<-entered
	ps := p.peers["node-b"]
	sent, dials := ps.m.sent.Get(), p.dials.Load()
	for i := 0; i < 100; i++ {
		if _, err := p.Request(ctx, to, publish(2)); !errors.Is(err, ErrShed) {
			t.Fatalf("at the bound: %v, want ErrShed", err)
		}
	}
	if ps.m.sent.Get() != sent || p.dials.Load() != dials || ps.m.shed.Get() != 100 {
		t.Fatalf("shed requests wrote %d bytes and dialled %d times (%d shed)", ps.m.sent.Get()-sent, p.dials.Load()-dials, ps.m.shed.Get())
	}

	now := time.Unix(1000, 0)
	q := newPool(t, creds(t, "node-a", TLSFiles{}), PoolOptions{Now: func() time.Time { return now },
		HandshakeTimeout: 200 * time.Millisecond, Backoff: Backoff{Min: time.Minute}})
	gone := Peer{NodeID: "node-c", Addr: "127.0.0.1:9"} // the discard port: nobody answers
	if _, err := q.Request(ctx, gone, publish(1)); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("dial to nothing: %v", err)
	}
	for i := 0; i < 100; i++ {
		if _, err := q.Request(ctx, gone, publish(1)); !errors.Is(err, ErrBackoff) {
			t.Fatalf("inside the window: %v, want ErrBackoff", err)
		}
	}
	if d := q.dials.Load(); d != 1 {
		t.Fatalf("%d dials, want 1: the backoff window dialled", d)
	}
}

// The dialler refuses a listener whose certificate chains to another CA or has expired.
func TestMutualTLSDiallerRefusesBadListenerCertificates(t *testing.T) {
	b := newBed(t)
	other := b.bad.leaf(t, b.dir, "ob", "node-b", time.Now().Add(-time.Hour))
	other.CA = b.ca.file // the listener trusts our CA, but its own certificate is not from it
	expired := b.ca.leaf(t, b.dir, "eb", "node-b", time.Now().Add(-48*time.Hour))
	for name, files := range map[string]TLSFiles{"other CA": other, "expired": expired} {
		l := serve(t, creds(t, "node-b", files), Options{}, okHandler)
		p := newPool(t, creds(t, "node-a", b.files(t, "a", "node-a")), PoolOptions{})
		_, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(1))
		var ua x509.UnknownAuthorityError
		var inv x509.CertificateInvalidError
		if !errors.Is(err, ErrUnreachable) || !(errors.As(err, &ua) || errors.As(err, &inv)) {
			t.Errorf("%s: %v, want a certificate verification failure in the handshake", name, err)
		}
	}
}

// Rotation under live traffic: requests keep flowing on the established connection while
// the listener's pair is swapped and re-read; a new handshake gets the new certificate; no
// request fails.
func TestRotationUnderLiveTrafficDropsNoRequest(t *testing.T) {
	b := newBed(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	lc, err := LoadCredentials("node-b", b.files(t, "b", "node-b"), clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, lc, Options{}, okHandler)
	ctx := testCtx(t)
	to := Peer{NodeID: "node-b", Addr: l.Addr().String()}
	p := newPool(t, creds(t, "node-a", b.files(t, "a", "node-a")), PoolOptions{})
	const workers, each = 4, 200
	halfway := make(chan struct{}, workers)
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if i == each/2 {
					halfway <- struct{}{}
				}
				if _, err := p.Request(ctx, to, publish(uint64(i))); err != nil {
					errs <- err
				}
			}
		}()
	}
	for w := 0; w < workers; w++ {
		<-halfway
	}
	serialOf := func(q *Pool) string {
		return q.conn(t, "node-b").qc.ConnectionState().TLS.PeerCertificates[0].SerialNumber.String()
	}
	before := serialOf(p)
	b.ca.leaf(t, b.dir, "b", "node-b", time.Now().Add(-time.Hour)) // the file swap
	mu.Lock()
	now = now.Add(ReloadInterval)
	mu.Unlock()
	fresh := newPool(t, creds(t, "node-a", b.files(t, "a2", "node-a")), PoolOptions{})
	if _, err := fresh.Request(ctx, to, publish(1)); err != nil {
		t.Fatalf("handshake after the swap: %v", err)
	}
	if serialOf(fresh) == before {
		t.Fatal("the handshake after the swap presented the old certificate")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request during the rotation: %v", err)
	}
	if serialOf(p) != before || p.Conns() != 1 {
		t.Fatal("the live connection was replaced by the rotation")
	}
}

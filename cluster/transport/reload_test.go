package transport

import (
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// End to end: after the file swap and ReloadInterval, the next handshake presents the new
// certificate while the connection made before keeps serving.
func TestRotatedCertificateServesTheNextHandshake(t *testing.T) {
	b := newBed(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	files := b.files(t, "b", "node-b")
	lc, err := LoadCredentials("node-b", files, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := serve(t, lc, Options{}, okHandler)
	ctx := testCtx(t)
	dialer := creds(t, "node-a", b.files(t, "a", "node-a"))
	serialOf := func(qc *quic.Conn) *big.Int { return qc.ConnectionState().TLS.PeerCertificates[0].SerialNumber }

	old, oldStream := rawPeerWith(t, ctx, l, dialer)
	before := serialOf(old)
	b.ca.leaf(t, b.dir, "b", "node-b", time.Now().Add(-time.Hour)) // the file swap
	mu.Lock()
	now = now.Add(ReloadInterval)
	mu.Unlock()
	fresh, _ := rawPeerWith(t, ctx, l, dialer)
	if serialOf(fresh).Cmp(before) == 0 {
		t.Fatal("the handshake after the swap presented the old certificate")
	}
	req := publish(3)
	req.CorrelationID = 5
	writeMsg(t, oldStream, req)
	if m := readMsg(t, oldStream); m.Correlation() != 5 || serialOf(old).Cmp(before) != 0 {
		t.Fatalf("the connection made before the swap: %#v", m)
	}
}

package transport

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/netq"

	"github.com/quic-go/quic-go"
)

type mtlsBed struct {
	dir     string
	ca, bad *testCA
}

func newBed(t *testing.T) *mtlsBed {
	dir := t.TempDir()
	return &mtlsBed{dir: dir, ca: newCA(t, dir, "felix"), bad: newCA(t, dir, "other")}
}

func (b *mtlsBed) files(t *testing.T, stem, name string) TLSFiles {
	return b.ca.leaf(t, b.dir, stem, name, time.Now().Add(-time.Hour))
}

func TestMutualTLSPeersTalk(t *testing.T) {
	b := newBed(t)
	l := serve(t, creds(t, "node-b", b.files(t, "b", "node-b")), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", b.files(t, "a", "node-a")), PoolOptions{})
	if _, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(1)); err != nil {
		t.Fatalf("mTLS request: %v", err)
	}
}

// The dialler checks the listener's certificate against the node id it meant to reach.
func TestMutualTLSDiallerChecksTheListenerName(t *testing.T) {
	b := newBed(t)
	l := serve(t, creds(t, "node-c", b.files(t, "c", "node-c")), Options{}, okHandler)
	p := newPool(t, creds(t, "node-a", b.files(t, "a", "node-a")), PoolOptions{})
	_, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(1))
	var hn x509.HostnameError
	if !errors.Is(err, ErrUnreachable) || !errors.As(err, &hn) {
		t.Fatalf("dialled node-b, certificate of node-c: %v, want a host name failure in the handshake", err)
	}
}

// A peer without a certificate, with one from another CA, or an expired one is refused in
// the handshake.
func TestMutualTLSRefusesBadPeerCertificates(t *testing.T) {
	b := newBed(t)
	l := serve(t, creds(t, "node-b", b.files(t, "b", "node-b")), Options{}, okHandler)
	ctx := testCtx(t)
	other := b.bad.leaf(t, b.dir, "x", "node-a", time.Now().Add(-time.Hour))
	expired := b.ca.leaf(t, b.dir, "old", "node-a", time.Now().Add(-48*time.Hour))
	roots := x509.NewCertPool()
	roots.AddCert(b.ca.cert)
	for name, files := range map[string]*TLSFiles{"no certificate": nil, "other CA": &other, "expired": &expired} {
		conf := &tls.Config{RootCAs: roots, ServerName: "node-b", NextProtos: []string{netq.ALPNInternal}, MinVersion: tls.VersionTLS13}
		if files != nil {
			pair, err := tls.LoadX509KeyPair(files.Cert, files.Key)
			if err != nil {
				t.Fatal(err)
			}
			conf.Certificates = []tls.Certificate{pair}
		}
		c, err := quic.DialAddr(ctx, l.Addr().String(), conf, &quic.Config{HandshakeIdleTimeout: 3 * time.Second})
		if err == nil {
			// TLS 1.3: the server's verdict on the client certificate may arrive after the
			// client's handshake completed; the connection must then close before any stream.
			_, err = c.AcceptStream(ctx)
		}
		if err == nil || !isHandshakeFailure(err) {
			t.Errorf("%s: %v, want a TLS handshake failure", name, err)
		}
	}
}

// The listener checks the Hello's node id against the certificate: a valid certificate for
// node-a cannot speak as node-x.
func TestMutualTLSHelloClaimMustMatchTheCertificate(t *testing.T) {
	b := newBed(t)
	l := serve(t, creds(t, "node-b", b.files(t, "b", "node-b")), Options{}, okHandler)
	impostor := creds(t, "node-x", b.files(t, "a", "node-a"))
	p := newPool(t, impostor, PoolOptions{})
	_, err := p.Request(testCtx(t), Peer{NodeID: "node-b", Addr: l.Addr().String()}, publish(1))
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("node-a's certificate claiming node-x: %v, want ErrUnauthorized", err)
	}
}

// Rotation: the pair is re-read for the next handshake once ReloadInterval passed; a live
// connection keeps its identity.
func TestCertificateReloadForTheNextHandshake(t *testing.T) {
	b := newBed(t)
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	files := b.files(t, "b", "node-b")
	c, err := LoadCredentials("node-b", files, clock, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Certificate().Leaf
	b.ca.leaf(t, b.dir, "b", "node-b", time.Now().Add(-time.Hour)) // the file swap
	mu.Lock()
	now = now.Add(ReloadInterval - time.Second)
	mu.Unlock()
	if !sameCert(c.Certificate(), before) {
		t.Fatal("re-read before ReloadInterval")
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if sameCert(c.Certificate(), before) {
		t.Fatal("not re-read after ReloadInterval")
	}
	if err := os.WriteFile(files.Key, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	kept := c.Certificate()
	mu.Lock()
	now = now.Add(ReloadInterval)
	mu.Unlock()
	if c.Certificate() != kept {
		t.Fatal("a failed re-read replaced the working pair")
	}
}

func sameCert(c *tls.Certificate, leaf *x509.Certificate) bool {
	got, err := x509.ParseCertificate(c.Certificate[0])
	return err == nil && leaf != nil && got.SerialNumber.Cmp(leaf.SerialNumber) == 0
}

func TestLoadFailureNamesVariableAndPathNeverKey(t *testing.T) {
	b := newBed(t)
	files := b.files(t, "a", "node-a")
	keyPEM, _ := os.ReadFile(files.Key)
	broken := files
	broken.Cert = files.Key // a key where the certificate should be
	_, err := LoadCredentials("node-a", broken, nil, nil)
	if !errors.Is(err, ErrTLSConfig) || !strings.Contains(err.Error(), "FELIX_INTERNAL_TLS_CERT="+files.Key) {
		t.Fatalf("load failure: %v, want the variable and the path", err)
	}
	body := strings.Split(string(keyPEM), "\n")[1]
	if strings.Contains(err.Error(), body[:16]) {
		t.Fatal("the error carries key material")
	}
	missingCA := files
	missingCA.CA = files.CA + ".missing"
	if _, err := LoadCredentials("node-a", missingCA, nil, nil); err == nil || !strings.Contains(err.Error(), "FELIX_INTERNAL_TLS_CA="+missingCA.CA) {
		t.Fatalf("missing CA: %v", err)
	}
	var logs bytes.Buffer
	c, err := LoadCredentials("node-a", files, func() time.Time { return time.Now().Add(time.Hour) }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(files.Key, []byte("-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n"), 0o600)
	c.loadedAt = time.Time{}
	c.Certificate()
	if !strings.Contains(logs.String(), "FELIX_INTERNAL_TLS_KEY="+files.Key) || strings.Contains(logs.String(), "c2VjcmV0") {
		t.Fatalf("reload failure log: %s", logs.String())
	}
}

func TestTLSFilesAllOrNone(t *testing.T) {
	if err := (TLSFiles{}).Check(); err != nil {
		t.Fatal(err)
	}
	err := TLSFiles{Cert: "c"}.Check()
	if !errors.Is(err, ErrTLSConfig) || !strings.Contains(err.Error(), "FELIX_INTERNAL_TLS_KEY, FELIX_INTERNAL_TLS_CA missing") {
		t.Fatalf("cert alone: %v", err)
	}
	var logs bytes.Buffer
	l, err := Listen("127.0.0.1:0", creds(t, "node-a", TLSFiles{}), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "unauthenticated") {
		t.Fatalf("unauthenticated listener without a startup warning: %q", logs.String())
	}
	b := newBed(t)
	logs.Reset()
	l, err = Listen("127.0.0.1:0", creds(t, "node-a", b.files(t, "a", "node-a")), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if logs.Len() != 0 {
		t.Fatalf("mTLS listener logged %q", logs.String())
	}
}

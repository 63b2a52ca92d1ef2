package netq

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func startListener(t *testing.T, opts Options) (*Listener, string) {
	t.Helper()
	cert, generated, err := LoadCertificate("", "", testNow)
	if err != nil || !generated {
		t.Fatalf("LoadCertificate: generated=%v err=%v", generated, err)
	}
	l, err := Listen("127.0.0.1:0", cert, opts)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, Fingerprint(cert.Certificate[0])
}

func dial(ctx context.Context, l *Listener, tlsConf *tls.Config) (*quic.Conn, error) {
	return quic.DialAddr(ctx, l.Addr().String(), tlsConf, &quic.Config{HandshakeIdleTimeout: 5 * time.Second})
}

// echoServer accepts connections and echoes every bi stream until ctx ends.
func echoServer(ctx context.Context, l *Listener) {
	for {
		c, err := l.Accept(ctx)
		if err != nil {
			return
		}
		go func() {
			defer c.Release()
			for {
				s, err := c.AcceptStream(ctx)
				if err != nil {
					return
				}
				go func() { io.Copy(s, s); s.Close() }()
			}
		}()
	}
}

func TestALPNSelection(t *testing.T) {
	l, fp := startListener(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go echoServer(ctx, l)

	c, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatalf("felix/1 client refused: %v", err)
	}
	if got := c.ConnectionState().TLS.NegotiatedProtocol; got != ALPNClient {
		t.Fatalf("negotiated %q, want %q", got, ALPNClient)
	}
	c.CloseWithError(0, "")

	internal := PinnedClientTLS(fp)
	internal.NextProtos = []string{ALPNInternal}
	if c, err := dial(ctx, l, internal); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("a client offering felix-internal/1 completed the handshake on the client role")
	}
}

func TestNoALPNHelloGetsNoProtocol(t *testing.T) {
	cert, err := SelfSigned([]string{"localhost"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	conf := ClientRoleTLS(cert)
	none, err := conf.GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || len(none.NextProtos) != 0 {
		t.Fatalf("no-ALPN hello: NextProtos=%v err=%v", none.NextProtos, err)
	}
	other, _ := conf.GetConfigForClient(&tls.ClientHelloInfo{SupportedProtos: []string{ALPNInternal}})
	if len(other.NextProtos) != 1 || other.NextProtos[0] != ALPNClient {
		t.Fatalf("internal hello: NextProtos=%v", other.NextProtos)
	}
}

func TestFingerprintPinMismatch(t *testing.T) {
	l, _ := startListener(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go echoServer(ctx, l)
	wrong := "00" + Fingerprint([]byte("other"))[2:]
	_, err := dial(ctx, l, PinnedClientTLS(wrong))
	if err == nil {
		t.Fatal("handshake succeeded with a wrong pin")
	}
}

func TestFingerprintFormat(t *testing.T) {
	fp := Fingerprint([]byte("abc"))
	if fp != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Fatalf("Fingerprint(abc) = %s", fp)
	}
	if normalizeFingerprint("BA:78:16") != "ba7816" {
		t.Fatal("normalizeFingerprint does not strip separators / case")
	}
}

func TestLoadCertificateHalfSet(t *testing.T) {
	if _, _, err := LoadCertificate("cert.pem", "", testNow); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("cert without key: %v", err)
	}
	if _, _, err := LoadCertificate("/nonexistent/c", "/nonexistent/k", testNow); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("unreadable pair: %v", err)
	}
}

func TestConnectionLimit(t *testing.T) {
	l, fp := startListener(t, Options{MaxConnections: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go echoServer(ctx, l)

	first, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseWithError(0, "")
	// Make sure the first connection was accepted before the second arrives.
	echo(t, ctx, first)

	second, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatalf("dial: %v", err) // the handshake completes; the close follows
	}
	<-second.Context().Done()
	var appErr *quic.ApplicationError
	if !errors.As(context.Cause(second.Context()), &appErr) || appErr.ErrorCode != CodeConnectionLimit {
		t.Fatalf("second connection closed with %v, want code %#x", context.Cause(second.Context()), CodeConnectionLimit)
	}
	if l.Refused() != 1 {
		t.Fatalf("Refused() = %d", l.Refused())
	}
	// The first connection carries on.
	echo(t, ctx, first)
}

func echo(t *testing.T, ctx context.Context, c *quic.Conn) {
	t.Helper()
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	if _, err := s.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != "ping" {
		t.Fatalf("echo got %q err=%v", got, err)
	}
}

func TestStreamLimitPerConnection(t *testing.T) {
	l, fp := startListener(t, Options{MaxBidiStreamsPerConn: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Accept the connection but never accept streams: they all stay open.
	go func() {
		c, err := l.Accept(ctx)
		if err == nil {
			<-ctx.Done()
			c.Release()
		}
	}()
	c, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	for i := 0; i < 2; i++ {
		s, err := c.OpenStream()
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		s.Write([]byte{1})
	}
	_, err = c.OpenStream()
	var limitErr *quic.StreamLimitReachedError
	if !errors.As(err, &limitErr) {
		t.Fatalf("third stream: %v, want StreamLimitReachedError", err)
	}
}

// The v1 Rust client offers no ALPN; quic-go lets a client do the same, so the whole path
// (GetConfigForClient choosing the no-ALPN config) is exercised over a real handshake.
func TestNoALPNClientAccepted(t *testing.T) {
	l, fp := startListener(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go echoServer(ctx, l)
	conf := PinnedClientTLS(fp)
	conf.NextProtos = nil
	c, err := dial(ctx, l, conf)
	if err != nil {
		t.Fatalf("client offering no ALPN refused: %v", err)
	}
	defer c.CloseWithError(0, "")
	if got := c.ConnectionState().TLS.NegotiatedProtocol; got != "" {
		t.Fatalf("negotiated %q, want none", got)
	}
	echo(t, ctx, c)
}

func TestLoadCertificateFromFiles(t *testing.T) {
	cert, err := SelfSigned([]string{"broker.example"}, testNow)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	loaded, generated, err := LoadCertificate(certFile, keyFile, testNow)
	if err != nil || generated {
		t.Fatalf("load: generated=%v err=%v", generated, err)
	}
	if Fingerprint(loaded.Certificate[0]) != Fingerprint(cert.Certificate[0]) {
		t.Fatal("loaded a different certificate")
	}
}

// At the limit, Options.Evict may free a slot for the new connection.
func TestConnectionLimitEvict(t *testing.T) {
	var victim atomic.Pointer[Conn] // set by the test goroutine, read by Accept's
	evicted := 0
	opts := Options{MaxConnections: 1, Evict: func() bool {
		v := victim.Swap(nil)
		if v == nil {
			return false
		}
		evicted++
		v.CloseWithError(CodeAuthTimeout, "evicted")
		v.Release()
		return true
	}}
	l, fp := startListener(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	accepted := make(chan *Conn, 2)
	go func() {
		for {
			c, err := l.Accept(ctx)
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	first, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatal(err)
	}
	defer first.CloseWithError(0, "")
	victim.Store(<-accepted)
	second, err := dial(ctx, l, PinnedClientTLS(fp))
	if err != nil {
		t.Fatal(err)
	}
	defer second.CloseWithError(0, "")
	c := <-accepted
	defer c.Release()
	<-first.Context().Done()
	var appErr *quic.ApplicationError
	if !errors.As(context.Cause(first.Context()), &appErr) || appErr.ErrorCode != CodeAuthTimeout {
		t.Fatalf("first connection closed with %v, want the evict code", context.Cause(first.Context()))
	}
	if evicted != 1 || l.Refused() != 0 || l.Active() != 1 {
		t.Fatalf("evicted %d refused %d active %d", evicted, l.Refused(), l.Active())
	}
}

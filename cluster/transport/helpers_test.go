package transport

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"felix/proto"
)

// testCA is a CA generated in the test; leaf writes PEM files of certificates it signs.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+"-ca.pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

var serial struct {
	sync.Mutex
	n int64
}

// leaf writes a certificate for dnsName (valid from notBefore for 24 h) and its key under
// dir/file-stem, returning the TLSFiles with this CA.
func (ca *testCA) leaf(t *testing.T, dir, stem, dnsName string, notBefore time.Time) TLSFiles {
	t.Helper()
	serial.Lock()
	serial.n++
	sn := serial.n + 100
	serial.Unlock()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(sn), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, NotBefore: notBefore, NotAfter: notBefore.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	f := TLSFiles{Cert: filepath.Join(dir, stem+".crt"), Key: filepath.Join(dir, stem+".key"), CA: ca.file}
	writePEM(t, f.Cert, "CERTIFICATE", der)
	writePEM(t, f.Key, "PRIVATE KEY", kder)
	return f
}

func creds(t *testing.T, nodeID string, files TLSFiles) *Credentials {
	t.Helper()
	c, err := LoadCredentials(nodeID, files, nil, nil)
	if err != nil {
		t.Fatalf("LoadCredentials(%s): %v", nodeID, err)
	}
	return c
}

// okHandler answers every forwarded publish with first_offset = its generation.
func okHandler(_ context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
	switch m := req.(type) {
	case *proto.AuthorizedForwardPublish:
		return &proto.ForwardPublishOk{FirstOffset: m.Generation, LastOffset: m.Generation + uint64(len(m.Payloads))}
	}
	return Refusal(req.Kind(), req.Correlation(), proto.InternalUnavailable)
}

// serve starts a listener for c on 127.0.0.1:0 serving h until the test ends.
func serve(t *testing.T, c *Credentials, opts Options, h Handler) *Listener {
	t.Helper()
	l, err := Listen("127.0.0.1:0", c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, l, h)
}

// serveOn serves l with h until the test ends.
func serveOn(t *testing.T, l *Listener, h Handler) *Listener {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Serve(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		l.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10 s")
		}
	})
	return l
}

func newPool(t *testing.T, c *Credentials, opts PoolOptions) *Pool {
	t.Helper()
	opts.LocalAddr = "127.0.0.1:0"
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = 3 * time.Second
	}
	p, err := NewPool(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func publish(gen uint64) *proto.AuthorizedForwardPublish {
	return &proto.AuthorizedForwardPublish{
		ForwardPublish: proto.ForwardPublish{Shard: proto.ShardRef{Tenant: []byte("t"), Namespace: []byte("n"), Name: []byte("s")},
			Generation: gen, Payloads: [][]byte{[]byte("x")}},
		Credential: []byte("token"),
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

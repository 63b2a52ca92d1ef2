package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/cluster/transport"
	"felix/proto"
)

// testCA signs the internal certificates of a test (ECDSA P-256, valid from an hour ago for a day).
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
	next int64
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "felix-internal-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: dir, cert: cert, key: key, file: filepath.Join(dir, "ca.pem"), next: 2}
	writeTestPEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

func writeTestPEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// leaf writes a certificate and key for dnsName and returns the three FELIX_INTERNAL_TLS_* paths.
func (ca *testCA) leaf(t *testing.T, dnsName string) transport.TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca.next++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: dnsName},
		DNSNames: []string{dnsName}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	f := transport.TLSFiles{Cert: filepath.Join(ca.dir, dnsName+".crt"), Key: filepath.Join(ca.dir, dnsName+".key"), CA: ca.file}
	writeTestPEM(t, f.Cert, "CERTIFICATE", der)
	writeTestPEM(t, f.Key, "PRIVATE KEY", kder)
	return f
}

// peerPool is a Pool dialling as nodeID with files (mTLS), or self-signed with empty files.
func peerPool(t *testing.T, nodeID string, files transport.TLSFiles) *transport.Pool {
	t.Helper()
	creds, err := transport.LoadCredentials(nodeID, files, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := transport.NewPool(creds, transport.PoolOptions{LocalAddr: "127.0.0.1:0", HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// With the three FELIX_INTERNAL_TLS_* files the broker runs mTLS: no unauthenticated warning,
// a peer with a certificate of the CA is served, a peer claiming a node id its certificate
// does not carry is refused Unauthorized (counted), and a self-signed peer fails the handshake.
func TestInternalTransportMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	files := ca.leaf(t, "broker-1.felix.test")
	b := startInternal(t, map[string]string{"FELIX_INTERNAL_BIND": "127.0.0.1:0", "FELIX_NODE_ID": "broker-1.felix.test",
		"FELIX_INTERNAL_TLS_CERT": files.Cert, "FELIX_INTERNAL_TLS_KEY": files.Key, "FELIX_INTERNAL_TLS_CA": files.CA})
	in := b.srv.Internal()
	if !in.Mutual || strings.Contains(b.logs.String(), "internal transport unauthenticated") || !strings.Contains(b.logs.String(), "mtls=true") {
		t.Fatalf("mTLS broker: Mutual=%v, logs:\n%s", in.Mutual, b.logs.String())
	}
	in.Dispatcher.Register(proto.KindAuthorizedForwardPublish, func(_ context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
		return &proto.ForwardPublishOk{FirstOffset: req.(*proto.AuthorizedForwardPublish).Generation}
	})
	ctx := testCtx(t)
	to := transport.Peer{NodeID: in.NodeID, Addr: b.srv.InternalAddr().String()}
	peerFiles := ca.leaf(t, "peer-1")
	if ans, err := peerPool(t, "peer-1", peerFiles).Request(ctx, to, forward(5)); err != nil || ans.Kind() != proto.KindForwardPublishOk {
		t.Fatalf("peer with a certificate of the CA: %#v %v", ans, err)
	}
	if _, err := peerPool(t, "peer-2", peerFiles).Request(ctx, to, forward(6)); !errors.Is(err, transport.ErrUnauthorized) {
		t.Fatalf("peer-2 with peer-1's certificate: %v, want ErrUnauthorized", err)
	}
	if _, err := peerPool(t, "peer-3", transport.TLSFiles{}).Request(ctx, to, forward(7)); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("self-signed peer: %v, want ErrUnreachable (handshake refused)", err)
	}
	text := b.metricsText(t)
	for _, want := range []string{"felix_internal_listener_connections_accepted_total 1\n",
		`felix_internal_listener_connections_refused_total{reason="unauthorized"} 1` + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

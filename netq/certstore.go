package netq

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"felix/internal/vfs"
)

// SelfSignedFile is the file in the broker's data dir that keeps the self-signed
// development certificate and its private key (PEM: CERTIFICATE then EC PRIVATE KEY, mode
// 0600), so the fingerprint clients pin survives restarts (issue 23 item 8).
const SelfSignedFile = "tls-selfsigned.pem"

// CertOrigin says where a BrokerCertificate came from.
type CertOrigin int

// Certificate origins.
const (
	CertFromFiles CertOrigin = iota // FELIX_TLS_CERT / FELIX_TLS_KEY
	CertKept                        // the self-signed one kept in the data dir
	CertMade                        // a new self-signed one; Keep writes it to the data dir
)

// BrokerCertificate is the client-role certificate with where it came from.
type BrokerCertificate struct {
	tls.Certificate
	Origin CertOrigin
	path   string // SelfSignedFile in the data dir; "" for CertFromFiles
	pem    []byte // the file's contents when Origin is CertMade
}

// Path is the data-dir file holding a self-signed certificate ("" when loaded from
// FELIX_TLS_CERT / FELIX_TLS_KEY).
func (c *BrokerCertificate) Path() string { return c.path }

// LoadBrokerCertificate returns the client-role certificate. With certFile and keyFile
// (FELIX_TLS_CERT / FELIX_TLS_KEY) it loads them (CertFromFiles). With neither it reads
// dir/SelfSignedFile (CertKept) or, when that file does not exist, makes a self-signed
// certificate for localhost, 127.0.0.1 and ::1 (CertMade) that the caller writes with
// Keep once the listeners are bound, so a start that fails on a port in use leaves no
// file behind. A kept file that does not parse, or whose key does not match its
// certificate, is refused (never silently replaced: clients pinned its fingerprint;
// delete the file to make a new one). Errors wrap ErrTLSConfig and name the path.
func LoadBrokerCertificate(certFile, keyFile, dir string, now time.Time) (*BrokerCertificate, error) {
	if certFile != "" || keyFile != "" {
		cert, _, err := LoadCertificate(certFile, keyFile, now)
		if err != nil {
			return nil, err
		}
		return &BrokerCertificate{Certificate: cert, Origin: CertFromFiles}, nil
	}
	path := filepath.Join(dir, SelfSignedFile)
	data, err := vfs.ReadFile(vfs.OSFS{}, path)
	switch {
	case err == nil:
		cert, err := tls.X509KeyPair(data, data)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v (delete it to make a new self-signed certificate; pinned clients then need the new fingerprint)", ErrTLSConfig, path, err)
		}
		return &BrokerCertificate{Certificate: cert, Origin: CertKept, path: path}, nil
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: read %s: %v", ErrTLSConfig, path, err)
	}
	cert, err := SelfSigned([]string{"localhost", "127.0.0.1", "::1"}, now)
	if err != nil {
		return nil, err
	}
	encoded, err := encodeCertificate(cert)
	if err != nil {
		return nil, err
	}
	return &BrokerCertificate{Certificate: cert, Origin: CertMade, path: path, pem: encoded}, nil
}

// Keep writes a CertMade certificate to the data dir (temporary file, mode 0600, fsync,
// rename, directory fsync); for any other origin it does nothing. Errors name the path.
func (c *BrokerCertificate) Keep() error {
	if c.Origin != CertMade || c.pem == nil {
		return nil
	}
	if err := vfs.WriteFileAtomic(vfs.OSFS{}, c.path, c.pem, 0o600); err != nil {
		return fmt.Errorf("netq: keep the self-signed certificate in %s: %w", c.path, err)
	}
	c.pem = nil
	return nil
}

// encodeCertificate is the SelfSignedFile contents of cert (an ECDSA key).
func encodeCertificate(cert tls.Certificate) ([]byte, error) {
	key, ok := cert.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || len(cert.Certificate) == 0 {
		return nil, fmt.Errorf("%w: self-signed certificate without an ECDSA key", ErrTLSConfig)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: encode key: %v", ErrTLSConfig, err)
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...), nil
}

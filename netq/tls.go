package netq

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// ALPN protocol identifiers (spec/client-protocol.md §1, spec/auth.md §6).
const (
	// ALPNClient is the ALPN a Go client offers on the client role. The client role also
	// accepts a ClientHello that offers no ALPN at all (the v1 Rust client offers none).
	ALPNClient = "felix/1"
	// ALPNInternal is the broker-internal role's ALPN. The client role never selects it,
	// so a peer speaking the internal protocol fails the handshake on the client port.
	ALPNInternal = "felix-internal/1"
)

// Errors from certificate handling. Test with errors.Is.
var (
	// ErrTLSConfig: FELIX_TLS_CERT / FELIX_TLS_KEY are inconsistent or unloadable.
	ErrTLSConfig = errors.New("netq: tls configuration")
	// ErrFingerprintMismatch: a pinned server certificate's SHA-256 did not match.
	ErrFingerprintMismatch = errors.New("netq: server certificate fingerprint mismatch")
)

// Fingerprint returns the pin of a certificate: lowercase hex of SHA-256 over the leaf
// certificate's DER bytes (64 characters). Used by the broker's start-up log line, the
// ready file and the SDK's pinning option.
func Fingerprint(leafDER []byte) string {
	sum := sha256.Sum256(leafDER)
	return hex.EncodeToString(sum[:])
}

// normalizeFingerprint accepts the forms operators paste: hex with or without ':' separators,
// any case.
func normalizeFingerprint(fp string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(fp), ":", ""))
}

// PinnedClientTLS returns a client tls.Config that accepts exactly the server whose leaf
// certificate has the given Fingerprint (hex, ':' separators and case ignored) and offers
// ALPNClient. Chain and host name are not checked: the pin is the trust anchor, which is
// what the development default (a self-signed certificate) needs. A mismatch fails the
// handshake with an error wrapping ErrFingerprintMismatch.
func PinnedClientTLS(fingerprint string) *tls.Config {
	want := normalizeFingerprint(fingerprint)
	return &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin check below
		NextProtos:         []string{ALPNClient},
		MinVersion:         tls.VersionTLS13,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return fmt.Errorf("%w: no certificate presented", ErrFingerprintMismatch)
			}
			if got := Fingerprint(raw[0]); got != want {
				return fmt.Errorf("%w: got %s", ErrFingerprintMismatch, got)
			}
			return nil
		},
	}
}

// LoadCertificate returns the client-role certificate. With both certFile and keyFile set
// (FELIX_TLS_CERT / FELIX_TLS_KEY, PEM) it loads them; with neither it makes a fresh
// self-signed ECDSA P-256 certificate valid for localhost, 127.0.0.1 and ::1 and
// generated=true (the development default; the caller logs its Fingerprint). One set
// without the other, or an unreadable pair, is an error wrapping ErrTLSConfig.
func LoadCertificate(certFile, keyFile string, now time.Time) (cert tls.Certificate, generated bool, err error) {
	switch {
	case certFile != "" && keyFile != "":
		cert, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return tls.Certificate{}, false, fmt.Errorf("%w: FELIX_TLS_CERT=%s FELIX_TLS_KEY=%s: %v", ErrTLSConfig, certFile, keyFile, err)
		}
		return cert, false, nil
	case certFile != "" || keyFile != "":
		return tls.Certificate{}, false, fmt.Errorf("%w: FELIX_TLS_CERT and FELIX_TLS_KEY must be set together", ErrTLSConfig)
	}
	cert, err = SelfSigned([]string{"localhost", "127.0.0.1", "::1"}, now)
	return cert, err == nil, err
}

// SelfSigned makes an ECDSA P-256 certificate for hosts (DNS names or IP literals), valid
// from now-1h for one year. The private key never leaves the returned value.
func SelfSigned(hosts []string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: generate key: %v", ErrTLSConfig, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: serial: %v", ErrTLSConfig, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "felix-broker (self-signed development certificate)"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: create certificate: %v", ErrTLSConfig, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: parse certificate: %v", ErrTLSConfig, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// ClientRoleTLS returns the server tls.Config of the client role. It chooses per
// ClientHello (tls.Config.GetConfigForClient): a hello offering no ALPN gets a config with
// no NextProtos (the v1 Rust client); a hello offering ALPNClient gets NextProtos
// [ALPNClient]; any other offer (including ALPNInternal) gets NextProtos [ALPNClient], so
// TLS answers no_application_protocol and the handshake fails.
// Spec: spec/client-protocol.md §1; NOTES.md "QUIC with quic-go".
func ClientRoleTLS(cert tls.Certificate) *tls.Config {
	noALPN := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	withALPN := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13,
		NextProtos: []string{ALPNClient}}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if len(hello.SupportedProtos) == 0 {
				return noALPN, nil
			}
			return withALPN, nil
		},
	}
}

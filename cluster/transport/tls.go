package transport

// Peer identity: the internal TLS material, its 30 s reload, the node-id rules.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"felix/netq"
)

// ReloadInterval is how old the loaded certificate and key may get before the next handshake
// re-reads them (seed, "The transport": rotation is a file swap, re-read every thirty seconds).
const ReloadInterval = 30 * time.Second

// ErrTLSConfig wraps every internal TLS configuration or load failure; the message names the
// variable(s) and path(s), never key material.
var ErrTLSConfig = errors.New("transport: internal tls configuration")

// ErrInvalidNodeID: a node id that is not a valid DNS name (ValidNodeID).
var ErrInvalidNodeID = errors.New("transport: node id is not a valid DNS name")

// TLSFiles names the PEM files of FELIX_INTERNAL_TLS_CERT, FELIX_INTERNAL_TLS_KEY and
// FELIX_INTERNAL_TLS_CA. All three or none.
type TLSFiles struct {
	Cert string // FELIX_INTERNAL_TLS_CERT: PEM certificate (chain), DNS name = node id
	Key  string // FELIX_INTERNAL_TLS_KEY: PEM private key
	CA   string // FELIX_INTERNAL_TLS_CA: PEM bundle of trusted roots
}

// Mutual reports whether all three are set (mTLS).
func (f TLSFiles) Mutual() bool { return f.Cert != "" && f.Key != "" && f.CA != "" }

// Check refuses some-but-not-all with an error wrapping ErrTLSConfig naming the missing
// variables. Pure.
func (f TLSFiles) Check() error {
	var set, missing []string
	for _, v := range []struct{ name, val string }{
		{"FELIX_INTERNAL_TLS_CERT", f.Cert}, {"FELIX_INTERNAL_TLS_KEY", f.Key}, {"FELIX_INTERNAL_TLS_CA", f.CA}} {
		if v.val == "" {
			missing = append(missing, v.name)
		} else {
			set = append(set, v.name)
		}
	}
	if len(set) > 0 && len(missing) > 0 {
		return fmt.Errorf("%w: %s set but %s missing (all three or none)", ErrTLSConfig,
			strings.Join(set, ", "), strings.Join(missing, ", "))
	}
	return nil
}

// ValidNodeID checks that id is a valid DNS name, the identity a certificate carries: 1..253
// bytes, dot-separated labels of 1..63 letters, digits or '-', no label starting or ending
// with '-', no trailing dot, not an IP literal. Comparisons of node ids ignore case. Errors
// wrap ErrInvalidNodeID. Pure.
func ValidNodeID(id string) error {
	if id == "" || len(id) > 253 || net.ParseIP(id) != nil {
		return fmt.Errorf("%w: %q", ErrInvalidNodeID, id)
	}
	for _, label := range strings.Split(id, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%w: %q (label %q)", ErrInvalidNodeID, id, label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i] | 0x20
			if !(c >= 'a' && c <= 'z' || label[i] >= '0' && label[i] <= '9' || label[i] == '-') {
				return fmt.Errorf("%w: %q (byte %q)", ErrInvalidNodeID, id, label[i])
			}
		}
	}
	return nil
}

// CheckClaim reports whether the node id a peer claims in Hello is a DNS name of its leaf
// certificate (seed, "The transport": a certificate for one name cannot speak as another).
// A nil certificate or a mismatch is an error wrapping ErrUnauthorized. Pure.
func CheckClaim(leaf *x509.Certificate, claimed string) error {
	if err := ValidNodeID(claimed); err != nil {
		return fmt.Errorf("%w: %v", ErrUnauthorized, err)
	}
	if leaf == nil {
		return fmt.Errorf("%w: no certificate presented", ErrUnauthorized)
	}
	for _, n := range leaf.DNSNames {
		if strings.EqualFold(n, claimed) {
			return nil
		}
	}
	return fmt.Errorf("%w: certificate names %v, Hello claims %q", ErrUnauthorized, leaf.DNSNames, claimed)
}

// Credentials is this broker's internal TLS identity. With TLSFiles.Mutual the certificate
// and key are re-read when older than ReloadInterval at the next handshake (a failed re-read
// keeps the previous pair and logs a warning naming the variables and paths); connections
// already up keep theirs. The CA is read once. Without files a self-signed certificate for
// the node id is made once. Safe for concurrent use.
type Credentials struct {
	nodeID string
	files  TLSFiles
	now    func() time.Time
	log    *slog.Logger
	roots  *x509.CertPool

	mu        sync.Mutex
	cert      *tls.Certificate
	loadedAt  time.Time
	storageID StorageID // SetStorageID (storage.go)
}

// LoadCredentials loads the identity of nodeID (checked with ValidNodeID). now is the clock
// of the reload (nil = time.Now); log receives reload failures (nil = slog.Default()).
// Errors wrap ErrTLSConfig (naming the variable and path) or ErrInvalidNodeID.
func LoadCredentials(nodeID string, files TLSFiles, now func() time.Time, log *slog.Logger) (*Credentials, error) {
	if err := ValidNodeID(nodeID); err != nil {
		return nil, err
	}
	if err := files.Check(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	c := &Credentials{nodeID: nodeID, files: files, now: now, log: log}
	if !files.Mutual() {
		cert, err := netq.SelfSigned([]string{nodeID}, now())
		if err != nil {
			return nil, fmt.Errorf("%w: self-signed certificate: %v", ErrTLSConfig, err)
		}
		c.cert, c.loadedAt = &cert, now()
		return c, nil
	}
	pem, err := os.ReadFile(files.CA)
	if err != nil {
		return nil, fmt.Errorf("%w: FELIX_INTERNAL_TLS_CA=%s: %v", ErrTLSConfig, files.CA, err)
	}
	c.roots = x509.NewCertPool()
	if !c.roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: FELIX_INTERNAL_TLS_CA=%s: no PEM certificate in it", ErrTLSConfig, files.CA)
	}
	cert, err := c.readPair()
	if err != nil {
		return nil, err
	}
	c.cert, c.loadedAt = cert, now()
	return c, nil
}

func (c *Credentials) readPair() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.files.Cert, c.files.Key)
	if err != nil {
		// The tls error names the file problem, never key bytes.
		return nil, fmt.Errorf("%w: FELIX_INTERNAL_TLS_CERT=%s FELIX_INTERNAL_TLS_KEY=%s: %v",
			ErrTLSConfig, c.files.Cert, c.files.Key, err)
	}
	return &cert, nil
}

// Mutual reports whether peers are authenticated (all three files set).
func (c *Credentials) Mutual() bool { return c.files.Mutual() }

// NodeID is the node id the credentials were loaded for.
func (c *Credentials) NodeID() string { return c.nodeID }

// Certificate returns the pair for the next handshake, re-reading the files first when the
// loaded pair is ReloadInterval old or older.
func (c *Credentials) Certificate() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.files.Mutual() || c.now().Sub(c.loadedAt) < ReloadInterval {
		return c.cert
	}
	c.loadedAt = c.now()
	cert, err := c.readPair()
	if err != nil {
		c.log.Warn("internal TLS: re-reading the certificate failed; keeping the previous one", "err", err)
		return c.cert
	}
	c.cert = cert
	return c.cert
}

// Warning is the startup warning of the unauthenticated mode ("" under mTLS).
func (c *Credentials) Warning() string {
	if c.Mutual() {
		return ""
	}
	return "internal transport unauthenticated: FELIX_INTERNAL_TLS_CERT, FELIX_INTERNAL_TLS_KEY and FELIX_INTERNAL_TLS_CA " +
		"are unset, so brokers present self-signed certificates and accept any peer; keep the internal listener on a network only brokers can reach"
}

// ServerTLS is the listener's TLS configuration: ALPN felix-internal/1 only (a hello offering
// no ALPN or another one fails the handshake), the current certificate per handshake, and
// under mTLS a client certificate verified against the CA.
func (c *Credentials) ServerTLS() *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{netq.ALPNInternal},
		ClientAuth: tls.RequireAnyClientCert,
	}
	if c.Mutual() {
		base.ClientAuth, base.ClientCAs = tls.RequireAndVerifyClientCert, c.roots
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if !offers(hello.SupportedProtos, netq.ALPNInternal) {
				return nil, fmt.Errorf("transport: ALPN %q not offered (got %v)", netq.ALPNInternal, hello.SupportedProtos)
			}
			conf := base.Clone()
			conf.Certificates = []tls.Certificate{*c.Certificate()}
			return conf, nil
		},
	}
}

func offers(protos []string, want string) bool {
	for _, p := range protos {
		if p == want {
			return true
		}
	}
	return false
}

// ClientTLS is the dialler's TLS configuration for reaching nodeID: ALPN felix-internal/1,
// the current certificate, and under mTLS the listener's chain verified against the CA with
// nodeID as the required DNS name. Without mTLS any certificate is accepted.
func (c *Credentials) ClientTLS(nodeID string) *tls.Config {
	conf := &tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{netq.ALPNInternal},
		ServerName: nodeID,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return c.Certificate(), nil
		},
	}
	if c.Mutual() {
		conf.RootCAs = c.roots
	} else {
		conf.InsecureSkipVerify = true // unauthenticated mode: encrypted, any peer
	}
	return conf
}

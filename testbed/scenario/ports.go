package scenario

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNoFreePort: FreePort found no port free for both UDP and TCP in its range.
var ErrNoFreePort = errors.New("scenario: no free port below the ephemeral range")

// portTries is how many random ports FreePort tries before ErrNoFreePort.
const portTries = 1000

var (
	portMu     sync.Mutex
	portsTaken = map[int]bool{}
)

// FreePort returns a port number of 127.0.0.1 free now for both UDP (QUIC) and TCP
// (HTTP), below the kernel's ephemeral range (PortRange), never the same twice in one
// process. A broker restarted on fixed ports must not pick them from the ephemeral range:
// any socket bound to ":0" (another client, another test) can take such a port between
// two starts and the restart fails with "address already in use" (seen in a CI run of
// e2e, whose freePorts this follows). Errors: ErrNoFreePort after 1000 tries.
func FreePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	low, high := PortRange()
	for range portTries {
		p := low + mrand.IntN(high-low)
		if portsTaken[p] {
			continue
		}
		addr := "127.0.0.1:" + strconv.Itoa(p)
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		l, err := net.Listen("tcp", addr)
		u.Close()
		if err != nil {
			continue
		}
		l.Close()
		portsTaken[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("%w: [%d, %d) after %d tries", ErrNoFreePort, low, high, portTries)
}

// PortRange is where FreePort picks, [low, high): the 12000 ports below the start of the
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range; 32768 when unreadable),
// never below 1024.
func PortRange() (low, high int) {
	high = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				high = n
			}
		}
	}
	return max(1024, high-12000), high
}

// Cert is a TLS certificate written to disk for a broker (FELIX_TLS_CERT, FELIX_TLS_KEY).
type Cert struct {
	CertFile, KeyFile string // PEM files
	Fingerprint       string // hex SHA-256 of the certificate's DER: the pin clients use
}

// WriteCert makes a self-signed ECDSA P-256 certificate for 127.0.0.1 and localhost,
// valid from an hour ago for 7 days, and writes cert.pem and key.pem (0600) into dir.
// A fixed certificate keeps the clients' pinned fingerprint valid across restarts (the
// broker's default makes a new one at every start). Errors: key generation, writes.
func WriteCert(dir string) (Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Cert{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "felix-chaos"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Cert{}, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Cert{}, err
	}
	c := Cert{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem")}
	if err := os.WriteFile(c.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return Cert{}, err
	}
	if err := os.WriteFile(c.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return Cert{}, err
	}
	sum := sha256.Sum256(der)
	c.Fingerprint = hex.EncodeToString(sum[:])
	return c, nil
}

package main

// The TLS and QUIC settings of the broker's client role and of the Go SDK, copied (not
// imported: this module has no dependency on felix) from netq/tls.go, netq/listener.go
// (Options.withDefaults, QUICConfig), broker/config.go's defaults and client/client.go
// (clientTLS, quicConfig). Keep them in step when those change.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"time"

	"github.com/quic-go/quic-go"
)

// alpn is the client role's ALPN (netq.ALPNClient).
const alpn = "felix/1"

// udpBufferBytes is the SO_RCVBUF / SO_SNDBUF the broker requests (FELIX_UDP_RECV_BUFFER,
// FELIX_UDP_SEND_BUFFER defaults).
const udpBufferBytes = 8 << 20

// selfSigned makes the broker's development certificate: ECDSA P-256, self-signed, for
// localhost and 127.0.0.1 (netq.SelfSigned).
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(now.UnixNano()),
		Subject:      pkix.Name{CommonName: "felix-ceilings (self-signed)"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// fingerprint is lowercase hex SHA-256 of the leaf's DER (netq.Fingerprint).
func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// serverTLS is the client role's config for a hello offering felix/1 (netq.ClientRoleTLS).
func serverTLS(cert tls.Certificate) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, NextProtos: []string{alpn}}
}

// clientTLS pins the server's certificate like the SDK's WithFingerprint (TLS 1.3, ALPN felix/1).
func clientTLS(fp string) *tls.Config {
	return &tls.Config{
		NextProtos:         []string{alpn},
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // replaced by the pin check
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || fingerprint(raw[0]) != fp {
				return fmt.Errorf("server certificate does not match the pinned %s", fp)
			}
			return nil
		},
	}
}

// serverQUIC is netq.Options{}.QUICConfig() with the broker's defaults: idle 30 s,
// keep-alive 10 s, stream window 1 MiB growing to 16 MiB, connection window 4 MiB growing
// to 64 MiB, 256 bidi and 256 uni streams per connection, quic-go's packet size and PMTUD.
func serverQUIC() *quic.Config {
	return &quic.Config{
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                10 * time.Second,
		InitialStreamReceiveWindow:     1 << 20,
		MaxStreamReceiveWindow:         16 << 20,
		InitialConnectionReceiveWindow: 4 << 20,
		MaxConnectionReceiveWindow:     64 << 20,
		MaxIncomingStreams:             256,
		MaxIncomingUniStreams:          256,
	}
}

// clientQUIC is the SDK's quicConfig with its default idle timeout (5 s; keep-alive a
// fifth of it); windows are quic-go's defaults, as the SDK leaves them.
func clientQUIC() *quic.Config {
	return &quic.Config{MaxIncomingUniStreams: 4096, MaxIdleTimeout: 5 * time.Second, KeepAlivePeriod: time.Second}
}

// listen binds 127.0.0.1:0 with the broker's UDP buffer requests and starts a QUIC
// listener with its settings.
func listen(cert tls.Certificate) (*quic.Transport, *quic.Listener, error) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, nil, err
	}
	_ = udp.SetReadBuffer(udpBufferBytes)
	_ = udp.SetWriteBuffer(udpBufferBytes)
	tr := &quic.Transport{Conn: udp}
	ln, err := tr.Listen(serverTLS(cert), serverQUIC())
	if err != nil {
		udp.Close()
		return nil, nil, err
	}
	return tr, ln, nil
}

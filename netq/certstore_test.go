package netq

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The self-signed certificate is made once, written only by Keep (mode 0600), and read
// back by the next start with the same fingerprint.
func TestSelfSignedCertificateKeptAcrossStarts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SelfSignedFile)
	first, err := LoadBrokerCertificate("", "", dir, testNow)
	if err != nil || first.Origin != CertMade || first.Path() != path {
		t.Fatalf("first start: %+v %v", first, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("certificate written before Keep: %v", err)
	}
	if err := first.Keep(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kept file: %v mode %v", err, st.Mode())
	}
	second, err := LoadBrokerCertificate("", "", dir, testNow)
	if err != nil || second.Origin != CertKept {
		t.Fatalf("second start: %+v %v", second, err)
	}
	if a, b := Fingerprint(first.Certificate.Certificate[0]), Fingerprint(second.Certificate.Certificate[0]); a != b {
		t.Fatalf("fingerprint changed across starts: %s then %s", a, b)
	}
	if err := second.Keep(); err != nil { // a kept certificate is not rewritten
		t.Fatal(err)
	}
}

// A damaged kept certificate is refused with ErrTLSConfig naming the file, never replaced.
func TestDamagedKeptCertificateIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SelfSignedFile)
	if err := os.WriteFile(path, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadBrokerCertificate("", "", dir, testNow)
	if !errors.Is(err, ErrTLSConfig) || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged file: %v", err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != "not a certificate" {
		t.Fatal("damaged file was replaced")
	}
}

// With FELIX_TLS_CERT / FELIX_TLS_KEY half set the data dir is not consulted.
func TestBrokerCertificateFromFilesHalfSet(t *testing.T) {
	if _, err := LoadBrokerCertificate("c.pem", "", t.TempDir(), testNow); !errors.Is(err, ErrTLSConfig) {
		t.Fatalf("half set: %v", err)
	}
}

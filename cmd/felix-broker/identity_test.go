package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"felix/netq"
)

// The self-signed certificate is made at the first start and kept in the data dir (mode
// 0600), so the fingerprint a client pinned is the one the restarted broker presents
// (issue 23 item 8).
func TestRestartKeepsTheFingerprint(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	first := startBroker(t, data)
	fp := first.info.Fingerprint
	if code := first.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("first broker exited %d", code)
	}
	st, err := os.Stat(filepath.Join(data, netq.SelfSignedFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kept certificate: %v (mode %v)", err, st.Mode())
	}
	second := startBroker(t, data)
	if second.info.Fingerprint != fp {
		t.Fatalf("fingerprint changed across a restart: %s then %s", fp, second.info.Fingerprint)
	}
	second.dial() // pinned to the ready file's fingerprint
}

// A start that fails on a port in use writes no certificate to the data dir: the first
// start that binds makes the one clients will pin.
func TestPortInUseWritesNoCertificate(t *testing.T) {
	a := startBroker(t, "")
	data := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(brokerBin)
	cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND="+a.info.QUICAddr, "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+data)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second broker on a used port: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(data, netq.SelfSignedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("certificate written by a failed start: %v", err)
	}
}

// --version prints the release and commit line and exits 0 without touching a data dir.
func TestVersionFlag(t *testing.T) {
	cmd := exec.Command(brokerBin, "--version")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "felix-broker ") || !strings.Contains(string(out), "(commit ") {
		t.Fatalf("--version: %v %q", err, out)
	}
	if entries, _ := os.ReadDir(cmd.Dir); len(entries) != 0 {
		t.Fatalf("--version wrote %d entries in its directory", len(entries))
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/bench"
)

// Markers around the README's tour; the lines between them (without the ``` fence) are
// a bash script run verbatim.
const (
	tourBegin = "<!-- tour:begin -->"
	tourEnd   = "<!-- tour:end -->"
)

// repoRoot is the module's root (bench.RepoRoot from the working directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := bench.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readmeTour returns the tour's command lines from README.md.
func readmeTour(t *testing.T) string {
	t.Helper()
	return readmeBlock(t, tourBegin, tourEnd) // cluster_tour_test.go
}

// freePort returns a port on 127.0.0.1 that was free a moment ago for network ("udp" or
// "tcp"). Another process could take it before the broker binds; the broker then fails
// to start and the test reports it.
func freePort(t *testing.T, network string) int {
	t.Helper()
	if network == "udp" {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.LocalAddr().(*net.UDPAddr).Port
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestReadmeTour runs the README's two-minute tour verbatim with bash (set -euo
// pipefail) in an empty directory, felix and felix-broker first on PATH, and the ports
// passed through the FELIX_* environment the tour's commands honour.
func TestReadmeTour(t *testing.T) {
	script := readmeTour(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found: the README tour is a bash script")
	}
	quic, http := freePort(t, "udp"), freePort(t, "tcp")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("FELIX_QUIC_BIND=127.0.0.1:%d", quic),
		fmt.Sprintf("FELIX_BROKER_METRICS_BIND=127.0.0.1:%d", http),
		fmt.Sprintf("FELIX_SERVER=127.0.0.1:%d", quic),
		fmt.Sprintf("FELIX_ADMIN_URL=http://127.0.0.1:%d", http),
		"FELIX_CORE_SHARDS=2")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // nothing of the tour outlives it
	}
	if err != nil {
		logs, _ := os.ReadFile(filepath.Join(dir, "broker.log"))
		t.Fatalf("tour failed: %v\n--- script\n%s\n--- output\n%s\n--- broker.log\n%s", err, script, out.String(), logs)
	}
	got := out.String()
	for _, want := range []string{
		"created stream default/default/orders",
		"first order\nsecond order\nthird order\n",
		"stored alice",
		"logged in\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tour output lacks %q:\n%s", want, got)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "felix-data", "admin.token")); err != nil {
		t.Errorf("the tour's broker did not keep its data in ./felix-data: %v", err)
	}
}

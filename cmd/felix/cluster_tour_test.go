package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/internal/devcluster"
)

// Markers around the README's cluster tour (a bash script run verbatim, like the
// single-node tour of tour_test.go).
const (
	clusterTourBegin = "<!-- cluster-tour:begin -->"
	clusterTourEnd   = "<!-- cluster-tour:end -->"
)

// TestReadmeClusterTour runs the README's "Cluster in two minutes" verbatim with bash
// (set -euo pipefail) in an empty directory: felix, felix-broker and felix-controlplane
// first on PATH, the layout on a free base port (FELIX_DEV_CLUSTER_BASE_PORT, which both
// `felix dev cluster` and its --print-env honour). Bounded by 4 minutes; on failure it
// prints the output, cluster.log and every child's log. No process of the cluster may be
// left when the tour ends.
func TestReadmeClusterTour(t *testing.T) {
	script := readmeBlock(t, clusterTourBegin, clusterTourEnd)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found: the README tour is a bash script")
	}
	buildControlPlane(t)
	base, err := devcluster.FreeBasePort(devcluster.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = append(withoutFelixEnv(os.Environ()),
		"PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"FELIX_DEV_CLUSTER_BASE_PORT="+strconv.Itoa(base), "FELIX_CORE_SHARDS=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the tour's own processes
	}
	left := killLeft(t, filepath.Join(dir, devcluster.DefaultDataDir)) // the cluster's children (their own groups)
	if err != nil {
		t.Fatalf("tour failed: %v (seed: base port %d)\n--- script\n%s\n--- output\n%s\n%s", err, base, script, out.String(), clusterLogs(dir))
	}
	if len(left) > 0 {
		t.Errorf("processes of the cluster left after the tour: %v\n%s", left, clusterLogs(dir))
	}
	got := out.String()
	for _, want := range []string{
		"broker at http://127.0.0.1:" + strconv.Itoa(base+100),
		"created stream default/default/orders (1 shard, replication factor 3, Quorum)",
		"published 1 record to orders at offset 0", "published 1 record to orders at offset 1",
		"first order\nsecond order\n",
		"stream/default/default/orders/0  0    broker1  leader",
		"broker3  unreachable",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tour output lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "first order\n"); n != 2 { // sub --count 1 through broker3, then --count 2
		t.Errorf("the first order printed %d times, want 2 (once by each sub):\n%s", n, got)
	}
	if logs, _ := os.ReadFile(filepath.Join(dir, "cluster.log")); !bytes.Contains(logs, []byte("felix dev cluster: stopped")) ||
		!bytes.Contains(logs, []byte("broker3 exited (signal: killed)")) {
		t.Errorf("cluster.log lacks broker3's exit or the clean stop:\n%s", logs)
	}
}

// readmeBlock returns the lines of README.md between begin and end without the fence.
func readmeBlock(t *testing.T, begin, end string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %s ... %s block", begin, end)
	}
	var lines []string
	for _, l := range strings.Split(s[i+len(begin):j], "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "```") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// buildControlPlane builds felix-controlplane into binDir (TestMain builds only the broker).
func buildControlPlane(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(binDir, "felix-controlplane")); err == nil {
		return
	}
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "felix-controlplane"), "felix/cmd/felix-controlplane")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building felix-controlplane: %v\n%s", err, out)
	}
}

// withoutFelixEnv drops FELIX_* variables (the tour's eval sets the ones it needs).
func withoutFelixEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "FELIX_") {
			out = append(out, kv)
		}
	}
	return out
}

// killLeft SIGKILLs every process whose working directory is dir (the cluster's children)
// and returns their pids.
func killLeft(t *testing.T, dir string) []int {
	t.Helper()
	left, err := devcluster.ProcessesIn(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range left {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return left
}

// clusterLogs is cluster.log and the last lines of every child's log under dir.
func clusterLogs(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, devcluster.DefaultDataDir, "*.log"))
	for _, p := range append([]string{filepath.Join(dir, "cluster.log")}, logs...) {
		data, _ := os.ReadFile(p)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", p, strings.Join(lines, "\n"))
	}
	return b.String()
}

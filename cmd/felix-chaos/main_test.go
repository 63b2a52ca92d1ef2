package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"felix/testbed/checker"
	"felix/testbed/history"
)

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errw bytes.Buffer
	code = run(args, &out, &errw)
	return code, out.String(), errw.String()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestSelftestSubcommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "viz")
	code, out, errw := runCLI("selftest", "-viz", dir)
	if code != 0 || errw != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errw, out)
	}
	n := len(checker.SelfTestCases())
	if got, want := lastLine(out), fmt.Sprintf("%d passed, 0 failed", n); got != want {
		t.Fatalf("final line %q, want %q", got, want)
	}
	if lines := strings.Count(out, "\n"); lines != n+1 {
		t.Fatalf("%d lines, want one per case and the final line:\n%s", lines, out)
	}
	if html, _ := filepath.Glob(filepath.Join(dir, "*.html")); len(html) == 0 {
		t.Fatal("no visualization written")
	}
}

func TestSelftestFailureExitsNonZero(t *testing.T) {
	saved := selfTest
	defer func() { selfTest = saved }()
	selfTest = func(w io.Writer, _ string) (int, int) {
		fmt.Fprintln(w, "FAIL planted: 0 passed, 1 failed")
		fmt.Fprintln(w, "0 passed, 1 failed")
		return 0, 1
	}
	if code, _, _ := runCLI("selftest"); code != exitFindings {
		t.Fatalf("exit %d, want %d", code, exitFindings)
	}
}

// writeHistory writes h to a file in a temp dir and returns its path.
func writeHistory(t *testing.T, h *history.History) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := history.Write(f, h); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckFindsPlantedAnomalies(t *testing.T) {
	for _, c := range checker.SelfTestCases() {
		path := writeHistory(t, c.Build(true))
		code, out, _ := runCLI("check", path)
		if code != exitFindings || !strings.Contains(out, string(c.Anomaly)) {
			t.Errorf("%s: exit %d\n%s", c.Name, code, out)
		}
		if !strings.HasSuffix(lastLine(out), " failed") || strings.HasSuffix(lastLine(out), " 0 failed") {
			t.Errorf("%s: final line %q", c.Name, lastLine(out))
		}
		path = writeHistory(t, c.Build(false))
		if code, out, _ := runCLI("check", "-viz", "-", path); code != 0 || lastLine(out) != "4 passed, 0 failed" {
			t.Errorf("%s clean twin: exit %d\n%s", c.Name, code, out)
		}
	}
}

func TestCheckWritesVisualization(t *testing.T) {
	var stale checker.Case
	for _, c := range checker.SelfTestCases() {
		if c.Anomaly == checker.NonLinearCache {
			stale = c
			break
		}
	}
	path := writeHistory(t, stale.Build(true))
	code, out, _ := runCLI("check", path)
	if code != exitFindings || !strings.Contains(out, "linearizability visualization: "+path+".lin.html") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if _, err := os.Stat(path + ".lin.html"); err != nil {
		t.Fatal(err)
	}
}

func TestCheckMalformedHistoryNamesTheLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	good := `{"index":0,"kind":"cache-get","outcome":"ok","in":{"cache":"c"}}`
	if err := os.WriteFile(path, []byte(good+"\n"+`{"index":1,"kind":`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errw := runCLI("check", path)
	if code != exitUsage || !strings.Contains(errw, "history line 2") {
		t.Fatalf("exit %d, stderr %q", code, errw)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"teleport"}, {"check"}, {"check", "a", "b"}, {"selftest", "x"}, {"check", "-nope", "f"}} {
		if code, _, _ := runCLI(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
	if code, out, _ := runCLI("help"); code != 0 || !strings.Contains(out, "selftest") || !strings.Contains(out, "check") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
	if code, _, _ := runCLI("check", "/nonexistent/history.jsonl"); code != exitUsage {
		t.Errorf("missing file: exit %d", code)
	}
}

// TestErrorExit: the mapping the error-returning subcommands (proxy) use.
func TestErrorExit(t *testing.T) {
	var errw bytes.Buffer
	if code := errorExit(&errw, "proxy", nil); code != exitOK || errw.Len() != 0 {
		t.Fatalf("nil: exit %d, %q", code, errw.String())
	}
	if code := errorExit(&errw, "proxy", fmt.Errorf("listen: refused")); code != exitFindings ||
		errw.String() != "felix-chaos proxy: listen: refused\n" {
		t.Fatalf("error: exit %d, %q", code, errw.String())
	}
}

// --version prints the release and commit line and exits 0 (issue 23 item 10).
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut); code != exitOK || !strings.HasPrefix(out.String(), "felix-chaos ") || !strings.Contains(out.String(), "(commit ") {
		t.Fatalf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

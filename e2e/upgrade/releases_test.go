package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPreviousRelease: in a scratch repository of three commits, the release before the
// newest recorded one is found by its commit when the clone has no tag, by its tag when it
// has one that agrees, and refused when the tag names another commit, when FELIX_UPGRADE_FROM
// names an unrecorded tag, and when the recorded commit is not in the clone.
func TestPreviousRelease(t *testing.T) {
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := git(dir, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	run("init", "-q")
	var commits []string
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte{byte(i)}, 0o644); err != nil {
			t.Fatal(err)
		}
		run("add", "f")
		run("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", fmt.Sprint(i))
		commits = append(commits, run("rev-parse", "HEAD"))
	}
	if err := os.MkdirAll(filepath.Join(dir, "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	lines := fmt.Sprintf("# comment\nv1 %s 2026-01-01\nv2 %s 2026-01-02\n", commits[0], commits[1])
	if err := os.WriteFile(filepath.Join(dir, "testdata", "releases.txt"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if r, err := previousRelease(dir, ""); err != nil || r.tag != "v1" || r.commit != commits[0] {
		t.Fatalf("no tags: %+v %v, want v1 at %s", r, err, commits[0])
	}
	if r, err := previousRelease(dir, "v2"); err != nil || r.commit != commits[1] {
		t.Fatalf("FELIX_UPGRADE_FROM=v2: %+v %v", r, err)
	}
	run("-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-a", "v1", commits[0], "-m", "v1")
	if r, err := previousRelease(dir, ""); err != nil || r.commit != commits[0] {
		t.Fatalf("tag v1 agreeing: %+v %v", r, err)
	}
	run("-c", "user.name=t", "-c", "user.email=t@example.com", "tag", "-f", "-a", "v1", commits[2], "-m", "moved")
	if _, err := previousRelease(dir, ""); err == nil || !strings.Contains(err.Error(), "records") {
		t.Fatalf("a moved tag: %v, want a refusal", err)
	}
	if _, err := previousRelease(dir, "v9"); err == nil {
		t.Fatal("an unrecorded FELIX_UPGRADE_FROM accepted")
	}
	missing := strings.Repeat("ab", 20)
	lines = fmt.Sprintf("v0 %s 2026-01-01\nv1 %s 2026-01-01\n", missing, commits[0])
	if err := os.WriteFile(filepath.Join(dir, "testdata", "releases.txt"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := previousRelease(dir, ""); err == nil || !strings.Contains(err.Error(), "unshallow") {
		t.Fatalf("a recorded commit not in the clone: %v, want a refusal naming git fetch --unshallow", err)
	}
}

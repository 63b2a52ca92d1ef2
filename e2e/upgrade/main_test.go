package upgrade

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/testbed/scenario"
)

// The knobs of the package, each an environment variable.
const (
	envGate = "FELIX_UPGRADE_E2E"  // "1" runs the package
	envFrom = "FELIX_UPGRADE_FROM" // the tag of the release to start (default: the one before the newest)
)

// build is one build's binaries.
type build struct {
	name                      string // "v0.1.0" or "current"
	broker, cli, controlPlane string
}

// release is a line of testdata/releases.txt.
type release struct{ tag, commit string }

var (
	oldBuild, newBuild build
	from               release // the previous release the old build is
	repoRoot           string
)

// commands are the binaries built of each side.
var commands = []string{"felix-broker", "felix", "felix-controlplane"}

// TestMain builds the previous release from a git worktree and the current build once,
// unless FELIX_UPGRADE_E2E is not 1 (then every test says so and skips).
func TestMain(m *testing.M) {
	if os.Getenv(envGate) != "1" {
		os.Exit(m.Run())
	}
	code, err := buildBoth(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/upgrade:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// buildBoth builds both sides into a temp dir, runs the tests and removes the worktree and
// the dir. Errors: no release, git, the builds.
func buildBoth(m *testing.M) (int, error) {
	root, err := scenario.ModuleRoot()
	if err != nil {
		return 0, err
	}
	repoRoot = root
	if from, err = previousRelease(root, os.Getenv(envFrom)); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "felix-upgrade-e2e")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	old, err := buildRelease(ctx, root, from, filepath.Join(dir, "worktree"), filepath.Join(dir, "old"))
	if err != nil {
		return 0, err
	}
	paths, err := scenario.BuildCommands(ctx, filepath.Join(dir, "new"), commands...)
	if err != nil {
		return 0, err
	}
	oldBuild = build{name: from.tag, broker: old["felix-broker"], cli: old["felix"], controlPlane: old["felix-controlplane"]}
	newBuild = build{name: "current", broker: paths["felix-broker"], cli: paths["felix"], controlPlane: paths["felix-controlplane"]}
	fmt.Fprintf(os.Stderr, "e2e/upgrade: %s (%s) and the current build built in %v\n", from.tag, from.commit[:12],
		time.Since(start).Round(time.Millisecond))
	return m.Run(), nil
}

// gate skips t, saying why, unless the package was asked to run.
func gate(t *testing.T) {
	t.Helper()
	if os.Getenv(envGate) != "1" {
		t.Skipf("%s=1 runs the upgrade test (make upgrade-e2e, .ci/run): it builds the previous release from git", envGate)
	}
}

// readReleases parses testdata/releases.txt under root: "tag commit date" lines, oldest
// first, '#' comments. Errors: the file, a line that does not parse.
func readReleases(root string) ([]release, error) {
	f, err := os.Open(filepath.Join(root, "testdata", "releases.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []release
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 3 || len(fs[1]) != 40 {
			return nil, fmt.Errorf("testdata/releases.txt:%d: want \"tag commit date\", got %q", n, line)
		}
		out = append(out, release{tag: fs[0], commit: fs[1]})
	}
	return out, sc.Err()
}

// previousRelease picks the release to start: tag when not empty, else the one before the
// newest recorded. Its commit is the tag's when the clone has the tag (it must agree with
// the recorded one), else the recorded one. Errors: unknown tag, fewer than two releases,
// a tag that moved, a commit git does not have.
func previousRelease(root, tag string) (release, error) {
	rs, err := readReleases(root)
	if err != nil {
		return release{}, err
	}
	var r release
	switch {
	case tag != "":
		for _, x := range rs {
			if x.tag == tag {
				r = x
			}
		}
		if r.tag == "" {
			return release{}, fmt.Errorf("%s=%s: not in testdata/releases.txt", envFrom, tag)
		}
	case len(rs) < 2:
		return release{}, fmt.Errorf("testdata/releases.txt: %d releases, need two", len(rs))
	default:
		r = rs[len(rs)-2]
	}
	if out, err := git(root, "rev-parse", "-q", "--verify", r.tag+"^{commit}"); err == nil {
		if out != r.commit {
			return release{}, fmt.Errorf("tag %s is %s, testdata/releases.txt records %s", r.tag, out, r.commit)
		}
		return r, nil
	}
	if _, err := git(root, "cat-file", "-e", r.commit+"^{commit}"); err != nil {
		return release{}, fmt.Errorf("release %s: no tag and no commit %s in this clone (a shallow clone? git fetch --unshallow): %v",
			r.tag, r.commit, err)
	}
	return r, nil
}

// buildRelease adds a detached worktree of r at wt, builds commands there into out with
// the same go command, and removes the worktree. Errors: git's, the build's with output.
func buildRelease(ctx context.Context, root string, r release, wt, out string) (map[string]string, error) {
	if _, err := git(root, "worktree", "add", "--detach", wt, r.commit); err != nil {
		return nil, err
	}
	defer func() {
		_, _ = git(root, "worktree", "remove", "--force", wt)
		_, _ = git(root, "worktree", "prune")
	}()
	// -trimpath: the worktree's path is new every run, and without it the build cache keys
	// every package on it (a cold build of the release each time).
	args := []string{"build", "-trimpath", "-o", out + string(filepath.Separator)}
	paths := map[string]string{}
	for _, c := range commands {
		args = append(args, "./cmd/"+c)
		paths[c] = filepath.Join(out, c)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = wt
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build of %s in %s: %w\n%s", r.tag, wt, err, b)
	}
	return paths, nil
}

// git runs git in dir and returns its trimmed stdout. Errors: git's, with its stderr.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(b)), nil
}

// predates reports whether the previous release lacks commit (the commit that brought a
// piece in), and logs which way it is, so a test says what it covers.
func predates(t *testing.T, commit, piece string) bool {
	t.Helper()
	_, err := git(repoRoot, "merge-base", "--is-ancestor", commit, from.commit)
	if err == nil {
		t.Logf("%s has %s (%s): both builds have it", from.tag, piece, commit)
		return false
	}
	t.Logf("%s predates %s (%s)", from.tag, piece, commit)
	return true
}

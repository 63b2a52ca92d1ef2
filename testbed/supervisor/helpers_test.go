package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"felix/bench"
)

// binDir holds the binaries the tests build once per test process.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "supervisor-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type built struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // package path -> *built

// buildBin go-builds the main package pkg (relative to the module root) once and returns
// the binary's path.
func buildBin(t *testing.T, pkg string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(pkg, &built{})
	b := v.(*built)
	b.once.Do(func() {
		b.path = filepath.Join(binDir, filepath.Base(pkg))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.path, pkg)
		cmd.Dir = moduleRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// helperBin is testdata/helper.
func helperBin(t *testing.T) string { return buildBin(t, "./testbed/supervisor/testdata/helper") }

// moduleRoot is the module's root (bench.RepoRoot from the working directory).
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := bench.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// testCtx is a context bounded by d and by the test's end.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// startHelper starts testdata/helper with args (ready file given) and waits for it.
func startHelper(t *testing.T, s *Supervisor, name string, args ...string) *Process {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	p, err := s.Start(testCtx(t, time.Minute), Spec{Name: name, Path: helperBin(t),
		Args: append([]string{"-ready", ready}, args...), Ready: Ready{File: ready}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

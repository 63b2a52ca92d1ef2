package ring

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// backendCase is one way of building a ring under test.
type backendCase struct {
	name         string
	backend      string
	threadLocked bool
}

var allCases = []backendCase{
	{"syscall", BackendSyscall, false},
	{"uring", BackendUring, false},
	{"uring-locked", BackendUring, true}, // SINGLE_ISSUER|DEFER_TASKRUN
}

// skipRefused skips t because the kernel refused io_uring (err), except under
// CI=true, where the uring cases must run and the refusal fails t. A run with
// FELIX_IO_BACKEND=syscall asked for the syscall backend only: it still skips.
func skipRefused(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" && os.Getenv(EnvBackend) != BackendSyscall {
		t.Fatalf("io_uring refused under CI=true (the uring cases must run): %v", err)
	}
	t.Skipf("io_uring refused here: %v", err)
}

// forEachBackend runs fn once per backend. FELIX_IO_BACKEND=uring|syscall
// restricts the run to that backend (so CI can run each alone); a uring case
// the kernel refuses is skipped (skipRefused: failed under CI=true), unless
// FELIX_IO_BACKEND=uring forced it.
func forEachBackend(t *testing.T, entries uint32, fn func(t *testing.T, r Ring)) {
	t.Helper()
	only := os.Getenv(EnvBackend)
	for _, c := range allCases {
		if only != "" && only != "auto" && only != c.backend {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			if c.threadLocked {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			r, err := New(Options{Backend: c.backend, Entries: entries, ThreadLocked: c.threadLocked})
			if errors.Is(err, ErrUnsupported) && only != BackendUring {
				skipRefused(t, err)
			}
			if err != nil {
				t.Fatalf("New(%s): %v", c.backend, err)
			}
			if got := r.Backend(); got != c.backend {
				t.Fatalf("Backend() = %q, want %q", got, c.backend)
			}
			defer func() {
				if err := r.Close(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			}()
			fn(t, r)
		})
	}
}

// tempFile creates an empty file in a fresh temp dir, opened with flags|O_RDWR.
func tempFile(t *testing.T, flags int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "data"), os.O_CREATE|os.O_RDWR|flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// run prepares ops, submits them and waits for exactly len(ops) completions,
// returned by UserData.
func run(t *testing.T, r Ring, ops ...Op) map[uint64]Completion {
	t.Helper()
	for i := range ops {
		if err := r.Prepare(&ops[i]); err != nil {
			t.Fatalf("Prepare(%s #%d): %v", ops[i].Code, i, err)
		}
	}
	if err := r.Submit(); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return reap(t, r, len(ops))
}

// reap waits for want completions (failing after 10 s without progress).
func reap(t *testing.T, r Ring, want int) map[uint64]Completion {
	t.Helper()
	got := make(map[uint64]Completion, want)
	dst := make([]Completion, 16)
	for len(got) < want {
		n, err := r.Wait(dst, 1, 10*time.Second)
		if err != nil {
			t.Fatalf("Wait: %v", err)
		}
		if n == 0 {
			t.Fatalf("Wait: no completion in 10 s; have %d of %d", len(got), want)
		}
		for _, c := range dst[:n] {
			if _, dup := got[c.UserData]; dup {
				t.Fatalf("duplicate completion for UserData %#x", c.UserData)
			}
			got[c.UserData] = c
		}
	}
	return got
}

// refusalTB records what skipRefused asked of its test.
type refusalTB struct {
	testing.TB
	failed, skipped bool
}

func (r *refusalTB) Helper()               {}
func (r *refusalTB) Fatalf(string, ...any) { r.failed = true }
func (r *refusalTB) Skipf(string, ...any)  { r.skipped = true }

// TestSkipRefusedFailsUnderCI: a refused io_uring fails the test under CI=true
// (unless FELIX_IO_BACKEND=syscall asked for no uring) and skips it elsewhere.
func TestSkipRefusedFailsUnderCI(t *testing.T) {
	for _, c := range []struct {
		ci, backend string
		fail        bool
	}{{"true", "", true}, {"true", BackendUring, true}, {"true", BackendSyscall, false}, {"", "", false}, {"false", BackendUring, false}} {
		t.Setenv("CI", c.ci)
		t.Setenv(EnvBackend, c.backend)
		r := &refusalTB{TB: t}
		skipRefused(r, ErrUnsupported)
		if r.failed != c.fail || !r.failed && !r.skipped {
			t.Errorf("CI=%q %s=%q: failed %v skipped %v, want failed %v", c.ci, EnvBackend, c.backend, r.failed, r.skipped, c.fail)
		}
	}
}

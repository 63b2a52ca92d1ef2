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

// forEachBackend runs fn once per backend. FELIX_IO_BACKEND=uring|syscall
// restricts the run to that backend (so CI can run each alone); a uring case
// the kernel refuses is skipped, unless FELIX_IO_BACKEND=uring forced it.
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
				t.Skipf("io_uring refused here: %v", err)
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

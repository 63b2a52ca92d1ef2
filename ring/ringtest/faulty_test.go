package ringtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/ring"

	"golang.org/x/sys/unix"
)

// skipRefused skips t because the kernel refused io_uring (err), except under
// CI=true, where the uring cases must run and the refusal fails t. A run with
// FELIX_IO_BACKEND=syscall asked for the syscall backend only: it still skips.
func skipRefused(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" && os.Getenv(ring.EnvBackend) != ring.BackendSyscall {
		t.Fatalf("io_uring refused under CI=true (the uring cases must run): %v", err)
	}
	t.Skipf("io_uring refused here: %v", err)
}

func newFaulty(t *testing.T, backend string, fault Fault) (*Faulty, *os.File) {
	t.Helper()
	inner, err := ring.New(ring.Options{Backend: backend, Entries: 16})
	if errors.Is(err, ring.ErrUnsupported) {
		skipRefused(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	r := NewFaulty(inner, fault)
	t.Cleanup(func() {
		r.Close()
		f.Close()
	})
	return r, f
}

func runAll(t *testing.T, r ring.Ring, ops ...ring.Op) map[uint64]int32 {
	t.Helper()
	for i := range ops {
		if err := r.Prepare(&ops[i]); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]int32{}
	dst := make([]ring.Completion, 8)
	for len(got) < len(ops) {
		n, err := r.Wait(dst, 1, 10*time.Second)
		if err != nil || n == 0 {
			t.Fatalf("Wait = %d, %v with %d of %d", n, err, len(got), len(ops))
		}
		for _, c := range dst[:n] {
			if _, dup := got[c.UserData]; dup || c.UserData == FillerUserData {
				t.Fatalf("unexpected completion %+v", c)
			}
			got[c.UserData] = c.Res
		}
	}
	return got
}

func backends(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range []string{ring.BackendSyscall, ring.BackendUring} {
		if only := os.Getenv(ring.EnvBackend); only != "" && only != "auto" && only != b {
			continue
		}
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}

func TestFailCodeFailsFdatasyncOnly(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		r, f := newFaulty(t, backend, FailCode(ring.OpFdatasync, unix.EIO))
		fd := int32(f.Fd())
		got := runAll(t, r,
			ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("abc"), Link: true, UserData: 1},
			ring.Op{Code: ring.OpFdatasync, FD: fd, Link: true, UserData: 2},
			ring.Op{Code: ring.OpNop, UserData: 3},
			ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("d"), Off: 3, UserData: 4})
		want := map[uint64]int32{1: 3, 2: -int32(unix.EIO), 3: -int32(unix.ECANCELED), 4: 1}
		for ud, res := range want {
			if got[ud] != res {
				t.Fatalf("op %d: Res %d, want %d (all: %v)", ud, got[ud], res, got)
			}
		}
		if b, _ := os.ReadFile(f.Name()); string(b) != "abcd" {
			t.Fatalf("file %q: real ops before and after the fault must run", b)
		}
		if r.Injected() != 1 {
			t.Fatalf("Injected() = %d", r.Injected())
		}
	})
}

func TestFailNthSweep(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		for n := range 3 {
			r, f := newFaulty(t, backend, FailNth(n, unix.ENOSPC))
			fd := int32(f.Fd())
			got := runAll(t, r,
				ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("xy"), Link: true, UserData: 10},
				ring.Op{Code: ring.OpFdatasync, FD: fd, UserData: 11},
				ring.Op{Code: ring.OpNop, UserData: 12})
			failed := uint64(10 + n)
			if got[failed] != -int32(unix.ENOSPC) {
				t.Fatalf("n=%d: op %d Res %d, want -ENOSPC (%v)", n, failed, got[failed], got)
			}
			if n == 0 && got[11] != -int32(unix.ECANCELED) {
				t.Fatalf("n=0: fdatasync linked to the failed write: Res %d", got[11])
			}
		}
	})
}

func TestShortWriteInjection(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		short := func(op *ring.Op) (int32, bool) { return 1, op.Code == ring.OpWrite }
		r, f := newFaulty(t, backend, short)
		got := runAll(t, r,
			ring.Op{Code: ring.OpWrite, FD: int32(f.Fd()), Buf: []byte("long"), Link: true, UserData: 1},
			ring.Op{Code: ring.OpFdatasync, FD: int32(f.Fd()), UserData: 2})
		if got[1] != 1 || got[2] != -int32(unix.ECANCELED) {
			t.Fatalf("short write: %v", got)
		}
	})
}

func TestWaitTimesOutAndWakes(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		r, _ := newFaulty(t, backend, FailNth(-1, unix.EIO))
		dst := make([]ring.Completion, 2)
		if n, err := r.Wait(dst, 1, time.Millisecond); n != 0 || err != nil {
			t.Fatalf("Wait = %d, %v", n, err)
		}
		if err := r.Wake(); err != nil {
			t.Fatal(err)
		}
		if n, err := r.Wait(dst, 1, 0); n != 0 || err != nil {
			t.Fatalf("Wait after Wake = %d, %v", n, err)
		}
		if r.Backend() != backend {
			t.Fatalf("Backend() = %q", r.Backend())
		}
	})
}

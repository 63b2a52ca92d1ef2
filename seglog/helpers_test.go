package seglog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/ring"
)

// vectorsDir returns ../shared/vectors relative to the repository root, or
// skips (fails under CI=true) when it is missing.
func vectorsDir(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("go.mod not found above " + wd)
		}
		root = parent
	}
	dir := filepath.Join(root, "..", "shared", "vectors")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("vectors missing at %s", dir)
		}
		t.Skipf("vectors missing at %s", dir)
	}
	return dir
}

// needUring skips a test that needs r to be the io_uring backend when it is not:
// deliberately (FELIX_IO_BACKEND=syscall) or because the kernel refused io_uring, which
// fails the test under CI=true instead (CI must run it).
func needUring(t testing.TB, r ring.Ring, why string) {
	t.Helper()
	if r.Backend() == ring.BackendUring {
		return
	}
	if os.Getenv("FELIX_IO_BACKEND") != "syscall" && os.Getenv("CI") == "true" {
		t.Fatalf("io_uring unavailable under CI=true (backend %s): %s", r.Backend(), why)
	}
	t.Skipf("backend %s: %s", r.Backend(), why)
}

// newRing returns a ring chosen by FELIX_IO_BACKEND, read here (ring reads no
// environment; closed at cleanup).
func newRing(t testing.TB) ring.Ring {
	t.Helper()
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend)})
	if err != nil {
		t.Fatalf("ring.New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

type appendResult struct {
	first, last uint64
	err         error
	done        bool
}

// appendWait appends one batch and drives the disk until its callback ran.
func appendWait(t testing.TB, d *Disk, l *Log, ts int64, payloads ...[]byte) appendResult {
	t.Helper()
	var res appendResult
	if err := l.Append(payloads, ts, func(f, la uint64, err error) { res = appendResult{f, la, err, true} }); err != nil {
		return appendResult{err: err, done: true}
	}
	waitFor(t, d, func() bool { return res.done })
	return res
}

// waitFor drives Flush/Poll until cond holds.
func waitFor(t testing.TB, d *Disk, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 100000 {
			t.Fatal("condition never met")
		}
		if err := d.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if err := d.Poll(10 * time.Millisecond); err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
}

// wantCycleAllocatesNothing fails the test unless one cycle — stage one batch with cb as
// its callback, then Flush and Poll until cb ran and d is idle — allocates nothing once
// warmed by 8 cycles (staging buffers, unit pool, slices); what names the cycle.
func wantCycleAllocatesNothing(t *testing.T, d *Disk, what string, stage func(cb func(first, last uint64, err error)) error) {
	t.Helper()
	done := false
	cb := func(_, _ uint64, err error) {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		done = true
	}
	cycle := func() {
		done = false
		if err := stage(cb); err != nil {
			t.Fatal(err)
		}
		for !done || !d.Idle() {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := d.Poll(time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 8; i++ {
		cycle()
	}
	if a := testing.AllocsPerRun(100, cycle); a != 0 {
		t.Fatalf("%v allocations per %s cycle, want 0", a, what)
	}
}

type rec struct {
	off     uint64
	ts      int64
	payload string
}

// readAll reads every committed record from off.
func readAll(t testing.TB, l *Log, from uint64) []rec {
	t.Helper()
	var out []rec
	for {
		n := 0
		err := l.Read(from, 1<<20, func(off uint64, ts int64, p []byte) bool {
			out = append(out, rec{off, ts, string(p)})
			from = off + 1
			n++
			return true
		})
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		if n == 0 {
			return out
		}
	}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

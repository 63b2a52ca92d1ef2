package seglog

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
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

// newRing returns a ring chosen by FELIX_IO_BACKEND (closed at cleanup).
func newRing(t testing.TB) ring.Ring {
	t.Helper()
	r, err := ring.New(ring.Options{})
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

// faultFS wraps OSFS: files have no descriptor (so writes go through File
// methods) and each operation name can be made to fail.
type faultFS struct {
	OSFS
	mu    sync.Mutex
	fail  map[string]error // op name → error to return ("write", "fdatasync", "fallocate", "truncate", "open")
	after map[string]int   // op name → successful calls to allow first
	count map[string]int
}

func newFaultFS() *faultFS {
	return &faultFS{fail: map[string]error{}, after: map[string]int{}, count: map[string]int{}}
}

// failOn makes op fail with err after n more successful calls.
func (f *faultFS) failOn(op string, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[op], f.after[op], f.count[op] = err, n, 0
}

func (f *faultFS) heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = map[string]error{}
}

func (f *faultFS) check(op string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err, ok := f.fail[op]
	if !ok {
		return nil
	}
	f.count[op]++
	if f.count[op] > f.after[op] {
		return err
	}
	return nil
}

func (f *faultFS) OpenFile(path string, flag int, perm os.FileMode) (File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		if err := f.check("open"); err != nil {
			return nil, err
		}
	}
	inner, err := f.OSFS.OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: inner, fs: f}, nil
}

func (f *faultFS) Rename(a, b string) error {
	if err := f.check("rename"); err != nil {
		return err
	}
	return f.OSFS.Rename(a, b)
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) Fd() int { return -1 }
func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.check("write"); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}
func (f *faultFile) Datasync() error {
	if err := f.fs.check("fdatasync"); err != nil {
		return err
	}
	return f.File.Datasync()
}
func (f *faultFile) Allocate(off, n int64) error {
	if err := f.fs.check("fallocate"); err != nil {
		return err
	}
	return f.File.Allocate(off, n)
}
func (f *faultFile) Truncate(n int64) error {
	if err := f.fs.check("truncate"); err != nil {
		return err
	}
	return f.File.Truncate(n)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

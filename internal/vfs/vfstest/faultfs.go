// Package vfstest holds FaultFS, the one fault-injecting vfs.FS of the tests:
// failing operations with a chosen error (from the next call on, after n
// calls, or the n-th call of any kind), a SIGKILL after N writes (the last
// one possibly cut short), and a power loss (writes not yet fdatasync'd are
// lost). Its files have no descriptor (Fd returns -1), so seglog drives every
// write and fdatasync through them synchronously, like the syscall backend.
package vfstest

import (
	"errors"
	"os"
	"sync"

	"felix/internal/vfs"

	"golang.org/x/sys/unix"
)

// Op names an operation FaultFS can fail (FailAfter).
type Op string

// The operations FaultFS can fail.
const (
	OpOpen     Op = "open"      // OpenFile for writing (O_WRONLY or O_RDWR)
	OpWrite    Op = "write"     // File.WriteAt
	OpDatasync Op = "fdatasync" // File.Datasync
	OpAllocate Op = "fallocate" // File.Allocate
	OpTruncate Op = "truncate"  // File.Truncate
	OpRename   Op = "rename"    // FS.Rename
	OpSyncDir  Op = "fsync-dir" // FS.SyncDir
)

// ErrCrashed is what every write-side operation returns once the process a
// CrashAfterWrites budget models is dead.
var ErrCrashed = errors.New("vfstest: process killed")

// FaultFS wraps an FS (vfs.OSFS when Inner is nil). Set the exported fields
// before the first call; the methods are goroutine-safe.
type FaultFS struct {
	// Inner is the wrapped file system (nil = vfs.OSFS{}).
	Inner vfs.FS
	// NoDirect refuses O_DIRECT opens with EINVAL, so every write is buffered
	// (as on the syscall backend) and any byte count of a cut write can land.
	NoDirect bool
	// TrackSyncs remembers, per file opened for writing, its content as of
	// the last Datasync (or open), for PowerLoss.
	TrackSyncs bool

	mu      sync.Mutex
	calls   int // every FS and File call so far
	nth     int // FailNth's call index + 1; 0 = none
	nthErr  error
	rules   map[Op]rule
	budget  int // writes still allowed to land; 0 = no crash armed
	partial int // bytes of the last allowed write that land (0 = all)
	crashed bool
	writes  int
	synced  map[string][]byte
}

type rule struct {
	err   error
	after int // successful calls allowed first
	count int
}

var _ vfs.FS = (*FaultFS)(nil)

func (f *FaultFS) inner() vfs.FS {
	if f.Inner == nil {
		return vfs.OSFS{}
	}
	return f.Inner
}

// FailAfter makes op fail with err after n more successful calls, and every
// call after that, until Heal (n = 0: from the next call on).
func (f *FaultFS) FailAfter(op Op, n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rules == nil {
		f.rules = map[Op]rule{}
	}
	f.rules[op] = rule{err: err, after: n}
}

// Fail makes op fail with err from the next call on, until Heal.
func (f *FaultFS) Fail(op Op, err error) { f.FailAfter(op, 0, err) }

// Heal removes every FailAfter rule (a crash stays a crash).
func (f *FaultFS) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// CrashAfterWrites models a SIGKILL: the next n writes land (n >= 1), the
// last of them only its first partial bytes when 0 < partial < its length,
// and from then on every write, fdatasync, fallocate, truncate, writable
// open, rename, remove, mkdir and directory fsync fails with ErrCrashed.
func (f *FaultFS) CrashAfterWrites(n, partial int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.budget, f.partial = max(n, 1), partial
}

// Crashed reports whether a CrashAfterWrites budget ran out.
func (f *FaultFS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

// Writes returns the number of writes that landed (whole or cut).
func (f *FaultFS) Writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.writes
}

// FailNth makes the n-th call (0-based, counting every FS and File call from
// now on) fail with err, once; a write failed this way lands the first half
// of its bytes (a torn write). Calls reports how far a workload got, so a
// test can try every failure point in turn.
func (f *FaultFS) FailNth(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.nth, f.nthErr = 0, n+1, err
}

// Calls returns the FS and File calls made since FailNth (or since the start).
func (f *FaultFS) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// counted counts one call and returns FailNth's error when it is the one.
// The caller holds f.mu.
func (f *FaultFS) counted() error {
	f.calls++
	if f.calls == f.nth {
		return f.nthErr
	}
	return nil
}

// call counts a call that only FailNth (or, when write is set, a crash) fails.
func (f *FaultFS) call(write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.counted(); err != nil {
		return err
	}
	if write && f.crashed {
		return ErrCrashed
	}
	return nil
}

// check counts a call of op and returns the error it must fail with, or nil.
func (f *FaultFS) check(op Op) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.counted(); err != nil {
		return err
	}
	if f.crashed {
		return ErrCrashed
	}
	r, ok := f.rules[op]
	if !ok {
		return nil
	}
	r.count++
	f.rules[op] = r
	if r.count > r.after {
		return r.err
	}
	return nil
}

// land reports how many bytes of an n-byte write reach the file, and the
// error the write returns after them.
func (f *FaultFS) land(n int) (int, error) {
	f.mu.Lock()
	nth := f.calls+1 == f.nth
	f.mu.Unlock()
	if err := f.check(OpWrite); err != nil {
		if nth {
			return n / 2, err // FailNth: a torn write
		}
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.budget == 0 {
		return n, nil
	}
	f.budget--
	if f.budget > 0 {
		return n, nil
	}
	f.crashed = true
	if f.partial > 0 && f.partial < n {
		return f.partial, nil
	}
	return n, nil
}

// OpenFile implements vfs.FS.
func (f *FaultFS) OpenFile(path string, flag int, perm os.FileMode) (vfs.File, error) {
	if f.NoDirect && flag&unix.O_DIRECT != 0 {
		return nil, unix.EINVAL
	}
	writable := flag&(os.O_CREATE|os.O_WRONLY|os.O_RDWR) != 0
	if writable {
		if err := f.check(OpOpen); err != nil {
			return nil, err
		}
	} else if err := f.call(false); err != nil {
		return nil, err
	}
	inner, err := f.inner().OpenFile(path, flag, perm)
	if err != nil {
		return nil, err
	}
	if writable && f.TrackSyncs {
		if err := f.track(path, flag); err != nil {
			return nil, errors.Join(err, inner.Close())
		}
	}
	return &file{File: inner, fs: f, path: path}, nil
}

// Rename implements vfs.FS.
func (f *FaultFS) Rename(oldPath, newPath string) error {
	if err := f.check(OpRename); err != nil {
		return err
	}
	if err := f.inner().Rename(oldPath, newPath); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.synced[oldPath]; ok {
		f.synced[newPath] = b
		delete(f.synced, oldPath)
	} else {
		delete(f.synced, newPath)
	}
	return nil
}

// SyncDir implements vfs.FS.
func (f *FaultFS) SyncDir(dir string) error {
	if err := f.check(OpSyncDir); err != nil {
		return err
	}
	return f.inner().SyncDir(dir)
}

// Remove implements vfs.FS.
func (f *FaultFS) Remove(path string) error {
	if err := f.call(true); err != nil {
		return err
	}
	return f.inner().Remove(path)
}

// RemoveAll implements vfs.FS.
func (f *FaultFS) RemoveAll(path string) error {
	if err := f.call(true); err != nil {
		return err
	}
	return f.inner().RemoveAll(path)
}

// MkdirAll implements vfs.FS.
func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.call(true); err != nil {
		return err
	}
	return f.inner().MkdirAll(dir, perm)
}

// ReadDir implements vfs.FS.
func (f *FaultFS) ReadDir(dir string) ([]string, error) {
	if err := f.call(false); err != nil {
		return nil, err
	}
	return f.inner().ReadDir(dir)
}

type file struct {
	vfs.File
	fs   *FaultFS
	path string
}

func (f *file) Fd() int { return -1 }

func (f *file) Close() error {
	err := f.File.Close()
	if cerr := f.fs.call(false); cerr != nil {
		return cerr
	}
	return err
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.call(false); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *file) Size() (int64, error) {
	if err := f.fs.call(false); err != nil {
		return 0, err
	}
	return f.File.Size()
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, ferr := f.fs.land(len(p))
	if ferr != nil && n == 0 {
		return 0, ferr
	}
	w, err := f.File.WriteAt(p[:n], off)
	if ferr != nil {
		return w, ferr
	}
	if err == nil && w < len(p) {
		err = ErrCrashed
	}
	return w, err
}

func (f *file) Datasync() error {
	if err := f.fs.check(OpDatasync); err != nil {
		return err
	}
	if err := f.File.Datasync(); err != nil {
		return err
	}
	if f.fs.TrackSyncs {
		return f.fs.snapshot(f.path)
	}
	return nil
}

func (f *file) Allocate(off, n int64) error {
	if err := f.fs.check(OpAllocate); err != nil {
		return err
	}
	return f.File.Allocate(off, n)
}

func (f *file) Truncate(size int64) error {
	if err := f.fs.check(OpTruncate); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Package vfs is felix's one file-system seam: the FS and File interfaces the
// storage code writes through, OSFS (the operating system), and
// WriteFileAtomic, the one "write temp, fdatasync, rename, fsync the
// directory" helper. Tests inject faults with felix/internal/vfs/vfstest.
// seglog.FS, seglog.File and seglog.OSFS are aliases of these types.
package vfs

import (
	"errors"
	"io"
	"os"
	"sort"

	"golang.org/x/sys/unix"
)

// FS is a file system (common brief, "Fault injection through a file seam").
// OSFS is the production implementation; vfstest.FaultFS wraps it to inject
// faults. Paths are OS paths.
type FS interface {
	// OpenFile opens or creates a file (os.OpenFile flags; unix.O_DIRECT allowed).
	OpenFile(path string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(path string) error
	// RemoveAll deletes a directory tree.
	RemoveAll(path string) error
	// Rename atomically replaces newPath with oldPath.
	Rename(oldPath, newPath string) error
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the directory's entries durable (fsync of the directory).
	SyncDir(dir string) error
}

// File is one open file of an FS.
type File interface {
	io.ReaderAt
	io.WriterAt
	// Datasync is fdatasync(2).
	Datasync() error
	// Truncate sets the file size.
	Truncate(size int64) error
	// Allocate reserves [off, off+n) without changing the size
	// (fallocate FALLOC_FL_KEEP_SIZE).
	Allocate(off, n int64) error
	// Size returns the current file size in bytes.
	Size() (int64, error)
	// Fd returns the OS descriptor a ring may use, or -1 when the file must be
	// driven through these methods (fault-injecting wrappers return -1).
	Fd() int
	// Close closes the file.
	Close() error
}

// OSFS is the operating-system FS. Files are opened with O_CLOEXEC.
type OSFS struct{}

type osFile struct{ f *os.File }

// OpenFile implements FS.
func (OSFS) OpenFile(path string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(path, flag|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove implements FS.
func (OSFS) Remove(path string) error { return os.Remove(path) }

// RemoveAll implements FS.
func (OSFS) RemoveAll(path string) error { return os.RemoveAll(path) }

// Rename implements FS.
func (OSFS) Rename(oldPath, newPath string) error { return os.Rename(oldPath, newPath) }

// ReadDir implements FS.
func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// MkdirAll implements FS.
func (OSFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (o osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o osFile) Datasync() error                          { return unix.Fdatasync(int(o.f.Fd())) }
func (o osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o osFile) Fd() int                                  { return int(o.f.Fd()) }
func (o osFile) Close() error                             { return o.f.Close() }

func (o osFile) Allocate(off, n int64) error {
	err := unix.Fallocate(int(o.f.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil // best effort (spec §5)
	}
	return err
}

func (o osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

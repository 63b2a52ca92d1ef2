package auth

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// FS is the file seam of this package: every byte the key store and Bootstrap read or write
// goes through it, so tests can fail any single operation (see faultFS in the tests).
// OSFS is the production implementation.
type FS interface {
	// MkdirAll is os.MkdirAll.
	MkdirAll(path string, perm fs.FileMode) error
	// ReadFile is os.ReadFile; a missing file reports an error matching fs.ErrNotExist.
	ReadFile(path string) ([]byte, error)
	// Create opens path for writing, truncating or creating it with perm.
	Create(path string, perm fs.FileMode) (File, error)
	// Rename is os.Rename (atomic within one directory on POSIX file systems).
	Rename(from, to string) error
	// Remove is os.Remove.
	Remove(path string) error
	// SyncDir fsyncs a directory so a rename in it is durable.
	SyncDir(path string) error
}

// File is the part of *os.File the writers use.
type File interface {
	Write(p []byte) (int, error)
	Sync() error
	Close() error
}

// OSFS is FS on the operating system's file system.
type OSFS struct{}

// MkdirAll implements FS.
func (OSFS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// ReadFile implements FS.
func (OSFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// Create implements FS. The mode is also forced with Chmod, so a pre-existing file with a
// wider mode (or a permissive umask) still ends at perm.
func (OSFS) Create(path string, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// Rename implements FS.
func (OSFS) Rename(from, to string) error { return os.Rename(from, to) }

// Remove implements FS.
func (OSFS) Remove(path string) error { return os.Remove(path) }

// SyncDir implements FS.
func (OSFS) SyncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// writeFileAtomic replaces path with data so that a crash leaves either the old or the new
// contents: write <path>.tmp (mode perm), fsync, close, rename over path, fsync the
// directory. On failure the temp file is removed and path is untouched.
func writeFileAtomic(fsys FS, path string, data []byte, perm fs.FileMode) error {
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp) // best effort; a stale .tmp is overwritten next time
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

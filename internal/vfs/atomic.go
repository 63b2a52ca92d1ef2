package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Steps of WriteFileAtomic, as named by AtomicError.Op.
const (
	StepOpen     = "open"      // creating path.tmp
	StepWrite    = "write"     // writing, fdatasync'ing or closing path.tmp
	StepRename   = "rename"    // renaming path.tmp over path
	StepSyncDir  = "fsync-dir" // fsync of path's directory
	atomicSuffix = ".tmp"
)

// AtomicError is the error of WriteFileAtomic: the step that failed (one of
// the Step constants), the path it acted on (path.tmp, or the directory for
// StepSyncDir) and the cause (errors.Is / errors.As see through it).
type AtomicError struct {
	Op   string
	Path string
	Err  error
}

// Error implements error.
func (e *AtomicError) Error() string { return fmt.Sprintf("%s %s: %v", e.Op, e.Path, e.Err) }

// Unwrap returns the cause.
func (e *AtomicError) Unwrap() error { return e.Err }

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new contents: it creates path.tmp afresh with mode perm (a stale
// one, left by a crash, is removed first, so the new file never inherits a
// wider mode), writes, fdatasyncs and closes it, renames it over path and
// fsyncs the directory. When a step before the rename fails, path.tmp is
// removed (best effort) and path is untouched. Errors are *AtomicError.
func WriteFileAtomic(fsys FS, path string, data []byte, perm os.FileMode) error {
	tmp := path + atomicSuffix
	f, err := createFresh(fsys, tmp, perm)
	if err != nil {
		return &AtomicError{StepOpen, tmp, err}
	}
	if _, err = f.WriteAt(data, 0); err == nil {
		err = f.Datasync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return &AtomicError{StepWrite, tmp, err}
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return &AtomicError{StepRename, tmp, err}
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return &AtomicError{StepSyncDir, dir, err}
	}
	return nil
}

// createFresh creates path exclusively, removing a stale file of that name
// first when there is one.
func createFresh(fsys FS, path string, perm os.FileMode) (File, error) {
	const flag = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := fsys.OpenFile(path, flag, perm)
	if !errors.Is(err, fs.ErrExist) {
		return f, err
	}
	if err := fsys.Remove(path); err != nil {
		return nil, err
	}
	return fsys.OpenFile(path, flag, perm)
}

// ReadFile returns the content of path read through fsys (like os.ReadFile;
// a missing file reports an error matching fs.ErrNotExist).
func ReadFile(fsys FS, path string) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	data, err := readAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}

func readAll(f File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	n := 0
	for n < len(data) {
		m, err := f.ReadAt(data[n:], int64(n))
		n += m
		if errors.Is(err, io.EOF) || err == nil && m == 0 {
			break // shrank meanwhile
		}
		if err != nil {
			return nil, err
		}
	}
	return data[:n], nil
}

package vfs

import (
	"fmt"
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
// old or the new contents: it writes path.tmp (created or truncated with
// mode perm), fdatasyncs and closes it, renames it over path and fsyncs the
// directory. When a step before the rename fails, path.tmp is removed (best
// effort; a stale one is truncated next time) and path is untouched. Errors
// are *AtomicError.
func WriteFileAtomic(fsys FS, path string, data []byte, perm os.FileMode) error {
	tmp := path + atomicSuffix
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
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

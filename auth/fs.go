package auth

import (
	"io/fs"

	"felix/internal/vfs"
)

// FS is the file seam of this package: every byte the key store and Bootstrap read or write
// goes through it, so tests can fail any single operation (vfstest.FaultFS.FailNth). It is
// felix's one file seam, vfs.FS; OSFS is the production implementation.
type FS = vfs.FS

// File is one open file of an FS (vfs.File).
type File = vfs.File

// OSFS is FS on the operating system's file system (vfs.OSFS).
type OSFS = vfs.OSFS

// readThrough reads path through fsys; a missing file reports an error matching fs.ErrNotExist.
func readThrough(fsys FS, path string) ([]byte, error) { return vfs.ReadFile(fsys, path) }

// writeFileAtomic replaces path with data so that a crash leaves either the old or the new
// contents (vfs.WriteFileAtomic: <path>.tmp created afresh with mode perm, fdatasync, close,
// rename over path, fsync the directory). On failure the temp file is removed and path is
// untouched.
func writeFileAtomic(fsys FS, path string, data []byte, perm fs.FileMode) error {
	return vfs.WriteFileAtomic(fsys, path, data, perm)
}

package seglog

import (
	"io"

	"felix/internal/vfs"
)

// FS is the file-system seam of seglog: an alias of vfs.FS (felix/internal/vfs,
// the one file seam; tests inject faults with vfs/vfstest.FaultFS).
type FS = vfs.FS

// File is one open file of an FS (an alias of vfs.File).
type File = vfs.File

// OSFS is the operating-system FS (an alias of vfs.OSFS).
type OSFS = vfs.OSFS

// readFull reads len(p) bytes at off; a short read at EOF returns the count and io.EOF.
func readFull(f File, p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := f.ReadAt(p[n:], off+int64(n))
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			return n, io.EOF
		}
	}
	return n, nil
}

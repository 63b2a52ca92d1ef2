package seglog

import (
	"errors"
	"path/filepath"
	"sort"

	"felix/internal/vfs"

	"golang.org/x/sys/unix"
)

// segment is one segment file of a log. The core goroutine owns every field;
// Readers read id, base, version, path (immutable) and index (under Log.mu).
type segment struct {
	id      uint64
	base    uint64
	version uint16
	path    string
	created int64 // created_at_micros of the header

	size    int64  // bytes of header + staged records (logical end)
	next    uint64 // offset after the last staged record
	maxTs   int64  // newest record timestamp (retention by age)
	index   []IndexEntry
	lastIdx int64 // position of the last index entry, -1 when none

	wf     File // write handle (active segment only), O_DIRECT when direct
	rf     File // the core's read handle, opened lazily
	direct bool
	sealed bool

	allocEnd   int64 // file blocks [0, allocEnd) are reserved with fallocate(KEEP_SIZE)
	zeroEnd    int64 // file bytes [0, zeroEnd) are written (data or pre-zeroed)
	zeroFlight int64 // end of the pre-zeroing write in flight (0 = none)
}

func (s *segment) indexPath() string {
	return filepath.Join(filepath.Dir(s.path), IndexFileName(s.id))
}

// noteRecord records a record at pos for the sparse index: the first record
// of the segment, then the first record at or past every spacing bytes from
// the previous entry (spec §2.3). Rebuilds reproduce the same entries.
// Returns true when an entry was added.
func (s *segment) wantsIndex(pos, spacing int64) bool {
	return s.lastIdx < 0 || pos-s.lastIdx >= spacing
}

// indexBytes encodes the segment's index file.
func (s *segment) indexBytes() []byte {
	b := AppendIndexHeader(make([]byte, 0, IndexHeaderLen+IndexEntryLen*len(s.index)), s.version, s.base)
	for _, e := range s.index {
		b = AppendIndexEntry(b, e)
	}
	return b
}

// lookup returns the scan start (position, offset) for offset off: the last
// index entry at or below off, or the first record.
func lookup(index []IndexEntry, base uint64, off uint64) (int64, uint64) {
	i := sort.Search(len(index), func(i int) bool { return index[i].Offset > off })
	if i == 0 {
		return SegmentHeaderLen, base
	}
	return int64(index[i-1].Position), index[i-1].Offset
}

// writeFileAtomic writes data to dir/name through vfs.WriteFileAtomic (temp
// file, fdatasync, rename, directory fsync; used for index, epochs and
// run-state files), as a *StorageError naming the failed step.
func writeFileAtomic(fs FS, dir, name string, data []byte) error {
	err := vfs.WriteFileAtomic(fs, filepath.Join(dir, name), data, 0o644)
	var ae *vfs.AtomicError
	if errors.As(err, &ae) {
		return storageErr(ae.Op, ae.Path, ae.Err)
	}
	return err
}

// openWrite opens a segment file for appends: O_DIRECT when direct is asked
// and the file system accepts it (else buffered; reported by the bool).
func openWrite(fs FS, path string, flag int, direct bool) (File, bool, error) {
	if direct {
		f, err := fs.OpenFile(path, flag|unix.O_DIRECT, 0o644)
		if err == nil {
			return f, true, nil
		}
		if !errors.Is(err, unix.EINVAL) {
			return nil, false, err
		}
	}
	f, err := fs.OpenFile(path, flag, 0o644)
	return f, false, err
}

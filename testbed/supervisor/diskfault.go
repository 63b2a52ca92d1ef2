package supervisor

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"felix/seglog"
)

// Disk faults, applied between runs: the process owning the directory must be stopped (its
// run exited), or the fault races the process's own writes. Log directories are seglog's:
// segment files "<20-digit id>.log" (docs/storage-format.md). Each fault returns what it did,
// for the test's log and its assertions.

// Errors of the disk faults.
var (
	// ErrNoSegment: the log directory holds no segment file.
	ErrNoSegment = errors.New("supervisor: no segment file")
	// ErrNoSealedSegment: the log directory holds fewer than two segments (the newest is
	// active, never sealed).
	ErrNoSealedSegment = errors.New("supervisor: no sealed segment")
	// ErrNoRecord: the chosen segment holds no whole record to damage.
	ErrNoRecord = errors.New("supervisor: no record in the segment")
)

var segmentName = regexp.MustCompile(`^[0-9]{20}\.log$`)

// WipeDataDir removes everything under dir except the files named in keep (paths relative to
// dir, e.g. "node-id"; their parent directories stay too); dir itself stays. It returns the
// entries removed directly under dir (and under kept parents). Errors: a keep path that is
// missing (fs.ErrNotExist), is a directory or leaves dir ("../x"); the first removal that fails.
func WipeDataDir(dir string, keep ...string) (removed []string, err error) {
	kept := map[string]bool{} // cleaned relative paths of kept files and of their ancestors
	for _, k := range keep {
		k = filepath.Clean(k)
		if filepath.IsAbs(k) || k == "." || strings.HasPrefix(k, "..") {
			return nil, fmt.Errorf("supervisor: keep path %q must be relative to the data dir", k)
		}
		st, err := os.Stat(filepath.Join(dir, k))
		if err != nil {
			return nil, fmt.Errorf("supervisor: keep %q: %w", k, err)
		}
		if st.IsDir() {
			return nil, fmt.Errorf("supervisor: keep %q is a directory, not a file", k)
		}
		for p := k; p != "."; p = filepath.Dir(p) {
			kept[p] = true
		}
	}
	return wipe(dir, "", kept)
}

// wipe removes the entries of dir/rel not in kept, descending into kept directories.
func wipe(dir, rel string, kept map[string]bool) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, rel))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		r := filepath.Join(rel, e.Name())
		switch {
		case kept[r] && e.IsDir():
			sub, err := wipe(dir, r, kept)
			removed = append(removed, sub...)
			if err != nil {
				return removed, err
			}
		case kept[r]:
		default:
			if err := os.RemoveAll(filepath.Join(dir, r)); err != nil {
				return removed, err
			}
			removed = append(removed, r)
		}
	}
	return removed, nil
}

// segments returns the segment files of logDir, oldest (lowest id) first.
func segments(logDir string) ([]string, error) {
	entries, err := os.ReadDir(logDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && segmentName.MatchString(e.Name()) {
			out = append(out, filepath.Join(logDir, e.Name()))
		}
	}
	sort.Strings(out) // zero-padded ids sort as numbers
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrNoSegment, logDir)
	}
	return out, nil
}

// recordSpan is one whole record of a segment: [Start, End) in bytes from the file's start.
type recordSpan struct {
	Offset     uint64
	Start, End int64
}

// records lists the whole, checksum-good records of the segment at path, in file order,
// stopping at the first damage or at the end of data (seglog.DecodeRecord).
func records(path string) (version uint16, spans []recordSpan, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	h, err := seglog.DecodeSegmentHeader(b)
	if err != nil {
		return 0, nil, fmt.Errorf("supervisor: %s: %w", path, err)
	}
	pos := int64(seglog.SegmentHeaderLen)
	for pos < int64(len(b)) {
		r, n, err := seglog.DecodeRecord(b[pos:], h.Version)
		if err != nil {
			break // end of data (all-zero header, EOF) or damage: the whole records end here
		}
		spans = append(spans, recordSpan{Offset: r.Offset, Start: pos, End: pos + int64(n)})
		pos += int64(n)
	}
	return h.Version, spans, nil
}

// TruncateResult says what TruncateNewestSegment cut.
type TruncateResult struct {
	Segment      string // path of the newest segment
	OldSize      int64  // file size before, bytes (may include zero padding past the data)
	NewSize      int64  // file size after: strictly inside the last record
	RecordOffset uint64 // offset of the record cut in two (the log's last record)
	RecordStart  int64  // its first byte's position
	RecordEnd    int64  // one past its last byte
}

// TruncateNewestSegment truncates the newest segment of logDir in the middle of its last
// whole record (a torn write: docs/storage-format.md says recovery truncates it, the record
// is lost, every earlier one kept). Record boundaries come from seglog.DecodeRecord, so any
// segment version 2..6 works. Errors: ErrNoSegment, ErrNoRecord (the newest segment holds
// only its header: cut the previous one by hand), a corrupt segment header, I/O errors.
func TruncateNewestSegment(logDir string) (TruncateResult, error) {
	segs, err := segments(logDir)
	if err != nil {
		return TruncateResult{}, err
	}
	path := segs[len(segs)-1]
	_, spans, err := records(path)
	if err != nil {
		return TruncateResult{}, err
	}
	if len(spans) == 0 {
		return TruncateResult{}, fmt.Errorf("%w: %s", ErrNoRecord, path)
	}
	last := spans[len(spans)-1]
	st, err := os.Stat(path)
	if err != nil {
		return TruncateResult{}, err
	}
	cut := last.Start + (last.End-last.Start)/2 // > Start: a record is ≥ 28 bytes
	if err := os.Truncate(path, cut); err != nil {
		return TruncateResult{}, err
	}
	return TruncateResult{Segment: path, OldSize: st.Size(), NewSize: cut, RecordOffset: last.Offset,
		RecordStart: last.Start, RecordEnd: last.End}, nil
}

// FlipResult says which byte FlipSealedByte changed.
type FlipResult struct {
	Segment      string // path of the sealed segment
	Position     int64  // byte position in the file
	RecordOffset uint64 // offset of the record holding it
	Old, New     byte   // the byte before and after (New = Old ^ 0xff)
}

// FlipSealedByte inverts one byte inside the record area of the newest sealed segment of
// logDir (the one before the active, newest segment): the middle byte of the middle whole
// record, so it lands in that record's header or body and `felix log verify` (seglog.Verify)
// reports a checksum problem at that segment. Errors: ErrNoSealedSegment, ErrNoRecord, a
// corrupt segment header, I/O errors.
func FlipSealedByte(logDir string) (FlipResult, error) {
	segs, err := segments(logDir)
	if err != nil {
		return FlipResult{}, err
	}
	if len(segs) < 2 {
		return FlipResult{}, fmt.Errorf("%w in %s (%d segment)", ErrNoSealedSegment, logDir, len(segs))
	}
	path := segs[len(segs)-2]
	_, spans, err := records(path)
	if err != nil {
		return FlipResult{}, err
	}
	if len(spans) == 0 {
		return FlipResult{}, fmt.Errorf("%w: %s", ErrNoRecord, path)
	}
	rec := spans[len(spans)/2]
	pos := rec.Start + (rec.End-rec.Start)/2
	old, err := flipByte(path, pos)
	if err != nil {
		return FlipResult{}, err
	}
	return FlipResult{Segment: path, Position: pos, RecordOffset: rec.Offset, Old: old, New: old ^ 0xff}, nil
}

// flipByte inverts the byte at pos of path (read, write back, fsync) and returns its old value.
func flipByte(path string, pos int64) (byte, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, pos); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("supervisor: %s has no byte at %d", path, pos)
		}
		return 0, err
	}
	old := b[0]
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, pos); err != nil {
		return 0, err
	}
	return old, f.Sync()
}

// DeleteEpochs removes the epochs file (seglog.EpochsFileName) of logDir and reports whether
// there was one; seglog reads an absent file as an empty epoch history (derived data).
// Errors: a removal failure other than fs.ErrNotExist.
func DeleteEpochs(logDir string) (existed bool, err error) {
	err = os.Remove(filepath.Join(logDir, seglog.EpochsFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

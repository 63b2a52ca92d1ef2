package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// RepairResult is what Repair did to one log directory.
type RepairResult struct {
	Dir            string
	Repaired       bool   // false: the log was whole, nothing changed
	Segment        uint64 // the newest segment's id, cut at At
	At             int64  // byte position of the cut: the end of the last valid record
	DroppedBytes   int64  // bytes cut from the segment (saved in SideFile)
	DroppedRecords int64  // record headers those bytes held (RecoveryInfo.TornTailRecords' count)
	SideFile       string // the dropped bytes, "repair-<segment>-at-<byte>.dropped" in Dir
}

// ErrRepairSealed: Repair found damage in a sealed segment (not the newest):
// cutting it would drop every later segment, so Repair changes nothing. A
// broker serves around such damage (reads below and above it).
var ErrRepairSealed = errors.New("seglog: damage in a sealed segment: repair cuts only the newest segment's tail")

// Repair cuts the newest segment of the log in dir (a stopped log: no
// broker may hold it) back to its last valid record, the seed's tail repair
// done by hand (`felix log repair`; docs/operations.md "Storage faults"):
// the bytes from the first damaged record (or the zero gap that data
// follows) to the end of the file are first written to
// Dir/repair-<segment>-at-<byte>.dropped (fdatasync'd), then the segment is
// truncated and fdatasync'd and its index removed (the next open rebuilds
// it). A whole log is left as is (Repaired false). It prints one line to w.
// Errors: ErrRepairSealed (with the *CorruptionError: nothing changed), a
// *CorruptionError when the newest segment's header itself is damaged
// (nothing changed), ErrStorageFailed.
func Repair(dir string, w io.Writer, opts ToolOptions) (RepairResult, error) {
	res := RepairResult{Dir: dir}
	fsys := opts.fs()
	var infos []SegmentInfo
	err := walkSegments(fsys, dir, func(info *SegmentInfo, f File, h SegmentHeader) error {
		walkRecords(f, info, h, func(*recordHeader, []byte) {}, nil)
		infos = append(infos, *info)
		return nil
	})
	if err != nil {
		return res, err
	}
	for i, info := range infos {
		if info.Err != nil && i < len(infos)-1 {
			return res, fmt.Errorf("%w: %w", ErrRepairSealed, info.Err)
		}
	}
	if len(infos) == 0 || infos[len(infos)-1].Err == nil {
		fmt.Fprintf(w, "%s: whole, nothing to repair\n", dir)
		return res, nil
	}
	newest := infos[len(infos)-1]
	var ce *CorruptionError
	if !errors.As(newest.Err, &ce) || ce.Position < SegmentHeaderLen {
		return res, newest.Err
	}
	res.Repaired, res.Segment, res.At = true, newest.ID, ce.Position
	res.DroppedBytes = newest.FileBytes - ce.Position
	res.SideFile = filepath.Join(dir, fmt.Sprintf("repair-%020d-at-%d.dropped", newest.ID, ce.Position))
	if err := cutTail(fsys, newest, &res); err != nil {
		return res, err
	}
	fmt.Fprintf(w, "%s: segment %020d cut at byte %d: %d bytes (%d records) dropped, saved in %s\n",
		dir, res.Segment, res.At, res.DroppedBytes, res.DroppedRecords, res.SideFile)
	return res, nil
}

// cutTail saves the segment's bytes from res.At in res.SideFile, then
// truncates the segment there and removes its index.
func cutTail(fsys FS, seg SegmentInfo, res *RepairResult) error {
	f, err := fsys.OpenFile(seg.Path, os.O_RDWR, 0)
	if err != nil {
		return storageErr("open", seg.Path, err)
	}
	defer f.Close()
	dropped := make([]byte, res.DroppedBytes)
	if _, err := readFull(f, dropped, res.At); err != nil && !errors.Is(err, io.EOF) {
		return storageErr("read", seg.Path, err)
	}
	sc := newScanner(f, seg.FileBytes, seg.Version, nil)
	res.DroppedRecords = sc.headersFrom(res.At)
	if err := writeFileAtomic(fsys, res.Dir, filepath.Base(res.SideFile), dropped); err != nil {
		return err
	}
	if err := f.Truncate(res.At); err != nil {
		return storageErr("truncate", seg.Path, err)
	}
	if err := f.Datasync(); err != nil {
		return storageErr("fdatasync", seg.Path, err)
	}
	idx := filepath.Join(res.Dir, IndexFileName(seg.ID))
	if err := fsys.Remove(idx); err != nil && !errors.Is(err, os.ErrNotExist) {
		return storageErr("remove", idx, err)
	}
	return storageErr("fsync-dir", res.Dir, fsys.SyncDir(res.Dir))
}

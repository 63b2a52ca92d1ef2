package seglog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// ToolOptions configure Inspect, Verify and Dump (the library side of
// `felix log inspect|verify|dump DIR`). The zero value reads the OS file system.
type ToolOptions struct {
	FS           FS     // nil = OSFS{}
	From         uint64 // Dump: first offset to print
	Limit        int64  // Dump: most records to print (0 = all)
	PayloadBytes int    // Dump: payload bytes shown per record (0 = 32; < 0 = none)
}

func (o *ToolOptions) fs() FS {
	if o.FS == nil {
		return OSFS{}
	}
	return o.FS
}

// SegmentInfo describes one segment file.
type SegmentInfo struct {
	ID              uint64
	Path            string
	Version         uint16
	BaseOffset      uint64
	NextOffset      uint64 // one past the last good record
	CreatedAtMicros int64
	FileBytes       int64 // file size (may include O_DIRECT zero padding)
	DataBytes       int64 // header + good records
	Records         int64
	IndexEntries    int   // entries in the .index file (-1 when missing or invalid)
	Err             error // first problem found (*CorruptionError), nil when whole
}

// InspectResult lists a log directory's segments (oldest first).
type InspectResult struct {
	Dir      string
	Segments []SegmentInfo
}

// VerifyResult is what Verify checked and found.
type VerifyResult struct {
	Dir      string
	Segments int
	Records  int64 // records whose checksums were verified good
	Problems []*CorruptionError
}

// DumpResult counts the records Dump printed.
type DumpResult struct{ Records int64 }

// Inspect prints one line per segment of the log in dir (id, version, offsets,
// sizes, index state) and returns them. Damage is reported per segment, not as
// an error. Errors: ErrStorageFailed (unreadable directory or file).
func Inspect(dir string, w io.Writer, opts ToolOptions) (InspectResult, error) {
	res := InspectResult{Dir: dir}
	err := walkSegments(opts.fs(), dir, func(info *SegmentInfo, f File, h SegmentHeader) error {
		walkRecords(f, info, h, func(*recordHeader, []byte) {}, nil)
		info.IndexEntries = indexEntries(opts.fs(), dir, info, h)
		res.Segments = append(res.Segments, *info)
		fmt.Fprintf(w, "segment %020d v%d offsets [%d, %d) records %d data %d bytes file %d bytes index %d entries created %s%s\n",
			info.ID, info.Version, info.BaseOffset, info.NextOffset, info.Records, info.DataBytes, info.FileBytes,
			info.IndexEntries, time.UnixMicro(info.CreatedAtMicros).UTC().Format(time.RFC3339), errSuffix(info.Err))
		return nil
	})
	return res, err
}

// Verify checks every segment header, every record's header CRC and checksum,
// offset order within and across segments, and reports each problem with its
// segment and byte position; then a summary line ("verified N records in M
// segments, K problems"). Returns the result and, when problems were found,
// the first one as the error (*CorruptionError).
func Verify(dir string, w io.Writer, opts ToolOptions) (VerifyResult, error) {
	res := VerifyResult{Dir: dir}
	var prevNext uint64
	first := true
	err := walkSegments(opts.fs(), dir, func(info *SegmentInfo, f File, h SegmentHeader) error {
		res.Segments++
		if info.Err == nil && !first && h.BaseOffset != prevNext {
			res.Problems = append(res.Problems, &CorruptionError{Kind: CorruptSegmentSequence, Dir: dir, Segment: int64(info.ID),
				Detail: fmt.Sprintf("base_offset %d, previous segment ends at %d", h.BaseOffset, prevNext)})
		}
		walkRecords(f, info, h, func(*recordHeader, []byte) { res.Records++ }, func(ce *CorruptionError) {
			res.Problems = append(res.Problems, ce)
		})
		if info.Err != nil && info.Records == 0 && info.DataBytes == 0 {
			res.Problems = append(res.Problems, info.Err.(*CorruptionError))
		}
		prevNext, first = info.NextOffset, false
		return nil
	})
	if err != nil {
		return res, err
	}
	for _, p := range res.Problems {
		fmt.Fprintf(w, "problem: %v\n", p)
	}
	fmt.Fprintf(w, "verified %d records in %d segments, %d problems\n", res.Records, res.Segments, len(res.Problems))
	if len(res.Problems) > 0 {
		return res, res.Problems[0]
	}
	return res, nil
}

// Dump prints the records of the log in dir from opts.From: offset, timestamp,
// kind, length and the first opts.PayloadBytes payload bytes (quoted).
// Errors: ErrStorageFailed; damage stops a segment's dump and is printed.
func Dump(dir string, w io.Writer, opts ToolOptions) (DumpResult, error) {
	var res DumpResult
	show := opts.PayloadBytes
	if show == 0 {
		show = 32
	}
	errStop := errors.New("limit")
	err := walkSegments(opts.fs(), dir, func(info *SegmentInfo, f File, h SegmentHeader) error {
		stop := false
		walkRecords(f, info, h, func(rh *recordHeader, rec []byte) {
			if stop || rh.offset < opts.From {
				return
			}
			_, payload, _ := splitBody(rec[RecordHeaderLen(h.Version):], rh)
			p := payload
			if show < 0 {
				p = nil
			} else if len(p) > show {
				p = p[:show]
			}
			fmt.Fprintf(w, "offset %d ts %d kind %d len %d payload %s\n", rh.offset, rh.ts, rh.kind, len(payload), strconv.Quote(string(p)))
			res.Records++
			if opts.Limit > 0 && res.Records >= opts.Limit {
				stop = true
			}
		}, func(ce *CorruptionError) { fmt.Fprintf(w, "problem: %v\n", ce) })
		if stop {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return res, err
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " ERROR " + err.Error()
}

// walkSegments opens each segment of dir in id order and calls fn.
func walkSegments(fsys FS, dir string, fn func(info *SegmentInfo, f File, h SegmentHeader) error) error {
	ids, err := listSegments(fsys, dir)
	if err != nil {
		return err
	}
	hb := make([]byte, SegmentHeaderLen)
	for _, id := range ids {
		path := filepath.Join(dir, SegmentFileName(id))
		f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
		if err != nil {
			return storageErr("open", path, err)
		}
		info := &SegmentInfo{ID: id, Path: path, IndexEntries: -1}
		info.FileBytes, err = f.Size()
		if err != nil {
			f.Close()
			return storageErr("stat", path, err)
		}
		n, _ := readFull(f, hb, 0)
		h, herr := DecodeSegmentHeader(hb[:n])
		if herr != nil {
			info.Err = locate(herr, dir, int64(id), 0)
		} else {
			info.Version, info.BaseOffset, info.NextOffset, info.CreatedAtMicros = h.Version, h.BaseOffset, h.BaseOffset, h.CreatedAtMicros
			info.DataBytes = SegmentHeaderLen
		}
		err = fn(info, f, h)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// walkRecords scans a segment's records, calling rec for each good one and
// bad for each problem; a record whose header is intact but whose body fails
// its checksum is reported and skipped (its length is trusted).
func walkRecords(f File, info *SegmentInfo, h SegmentHeader, rec func(*recordHeader, []byte), bad func(*CorruptionError)) {
	if info.Err != nil && info.DataBytes == 0 {
		return
	}
	dir := filepath.Dir(info.Path)
	sc := newScanner(f, info.FileBytes, h.Version, nil)
	pos, off := int64(SegmentHeaderLen), h.BaseOffset
	for {
		r := sc.scanRecords(pos, off, func(_ int64, rh *recordHeader, b []byte) bool {
			info.Records++
			rec(rh, b)
			return true
		})
		info.DataBytes, info.NextOffset = r.end, r.next
		if r.err == nil {
			gapData(sc, &r, info, dir, bad)
			return
		}
		err := locate(r.err, dir, int64(info.ID), 0)
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			ce = &CorruptionError{Kind: CorruptTruncated, Dir: dir, Segment: int64(info.ID), Position: r.end, Detail: err.Error()}
		}
		if info.Err == nil {
			info.Err = ce
		}
		if bad != nil {
			bad(ce)
		}
		if ce.Kind != CorruptRecordChecksum && ce.Kind != CorruptOffsetOutOfOrder {
			return
		}
		hb, _ := sc.at(r.end, sc.hl)
		rh, _, _ := parseRecordHeader(hb, h.Version)
		pos, off = r.end+int64(sc.hl)+int64(rh.bodyLen), rh.offset+1
	}
}

// gapData reports CorruptDataAfterEnd when a scan r that ended cleanly at a
// zero record header leaves non-zero bytes later in the file (an unreadable
// file reads as CorruptTruncated there).
func gapData(sc *scanner, r *scanResult, info *SegmentInfo, dir string, bad func(*CorruptionError)) {
	after, err := sc.dataAfterGap(r)
	if after == nil && err == nil {
		return
	}
	if err != nil {
		after = &CorruptionError{Kind: CorruptTruncated, Position: r.end, Detail: err.Error()}
	}
	after.Dir, after.Segment = dir, int64(info.ID)
	if info.Err == nil {
		info.Err = after
	}
	if bad != nil {
		bad(after)
	}
}

// indexEntries returns the entry count of a segment's index file, or -1 when
// it is missing or does not match the segment.
func indexEntries(fsys FS, dir string, info *SegmentInfo, h SegmentHeader) int {
	p := filepath.Join(dir, IndexFileName(info.ID))
	f, err := fsys.OpenFile(p, os.O_RDONLY, 0)
	if err != nil {
		return -1
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size > MaxPayloadBytes {
		return -1
	}
	b := make([]byte, size)
	if _, err := readFull(f, b, 0); err != nil {
		return -1
	}
	e, err := DecodeIndex(b, h.Version, h.BaseOffset)
	if err != nil {
		return -1
	}
	return len(e)
}

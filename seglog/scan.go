package seglog

import (
	"errors"
	"io"
)

// sectorBytes is the granularity at which a torn O_DIRECT write can lose data
// (the disk's logical block size; see docs/storage-format.md "Torn tails").
const sectorBytes = 512

// scanner reads a segment file forward through one reusable buffer.
type scanner struct {
	f       File
	size    int64 // file size in bytes
	version uint16
	hl      int
	buf     []byte
	bufPos  int64 // file position of buf[0]
	bufLen  int   // valid bytes in buf
	verify  bool  // check record checksums (always true outside index-guided reads)
	// verifyFrom: records at lower offsets are stepped over by their
	// (checksummed) headers without checking their bodies: a reader starting
	// above a damaged record of its index interval reads past it.
	verifyFrom uint64
}

func newScanner(f File, size int64, version uint16, buf []byte) *scanner {
	if cap(buf) < 64<<10 {
		buf = make([]byte, 64<<10)
	}
	return &scanner{f: f, size: size, version: version, hl: RecordHeaderLen(version), buf: buf[:cap(buf)], verify: true}
}

// at returns up to n bytes at file position pos (fewer only at EOF).
func (s *scanner) at(pos int64, n int) ([]byte, error) {
	if pos >= s.bufPos && pos+int64(n) <= s.bufPos+int64(s.bufLen) {
		i := int(pos - s.bufPos)
		return s.buf[i : i+n], nil
	}
	if avail := s.size - pos; int64(n) > avail {
		if avail < 0 {
			avail = 0
		}
		n = int(avail)
	}
	if n > len(s.buf) {
		s.buf = make([]byte, n+64<<10) // records up to MaxPayloadBytes; bounded by n ≤ file size
	}
	want := len(s.buf)
	if rest := s.size - pos; int64(want) > rest {
		want = int(rest)
	}
	got, err := readFull(s.f, s.buf[:want], pos)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	s.bufPos, s.bufLen = pos, got
	if n > got {
		n = got
	}
	return s.buf[:n], nil
}

// scanResult is where a forward scan stopped.
type scanResult struct {
	end     int64  // byte position after the last good record
	next    uint64 // offset after the last good record
	count   int64  // good records scanned
	maxTs   int64  // newest timestamp among good records
	zeroEnd bool   // stopped at an all-zero header (end of written data)
	err     error  // *CorruptionError (Position absolute) or I/O error; nil at clean end
	torn    bool   // err is explained by a torn write (see isTorn)
	// gap is where the zero run that stopped the scan starts: end at an
	// all-zero header, the zero sector of a torn verdict; 0 = none.
	gap int64
}

// scanRecords walks records from pos (expected offset off) to the end of the
// file, calling fn for every good record (pos, header, whole record bytes; the
// bytes alias the scanner buffer). fn returning false stops the scan cleanly.
func (s *scanner) scanRecords(pos int64, off uint64, fn func(pos int64, h *recordHeader, rec []byte) bool) scanResult {
	r := scanResult{end: pos, next: off}
	var h recordHeader // outside the loop: &h escapes to fn, allocated once per scan
	for pos < s.size {
		rec := s.nextRecord(pos, off, &h, &r)
		if rec == nil {
			return r
		}
		if !fn(pos, &h, rec) {
			return r
		}
		pos += int64(len(rec))
		off++
		r.end, r.next, r.count = pos, off, r.count+1
		if h.ts > r.maxTs {
			r.maxTs = h.ts
		}
	}
	return r
}

// nextRecord reads and checks the record at pos (expected offset off) into h
// and returns its bytes; nil when the scan stops there, with r.zeroEnd or
// r.err (and r.torn) set.
func (s *scanner) nextRecord(pos int64, off uint64, h *recordHeader, r *scanResult) []byte {
	hb, err := s.at(pos, s.hl)
	if err != nil {
		r.err = err
		return nil
	}
	if len(hb) < s.hl {
		if s.version >= 3 && allZero(hb) {
			r.zeroEnd, r.gap = true, pos
			return nil
		}
		r.err = &CorruptionError{Kind: CorruptTruncated, Position: pos, Needed: int64(s.hl), Available: int64(len(hb))}
		r.torn = true
		return nil
	}
	var st headerStatus
	var why string
	*h, st, why = parseRecordHeader(hb, s.version)
	switch st {
	case headerZero:
		r.zeroEnd, r.gap = true, pos
		return nil
	case headerBadCRC:
		r.err = &CorruptionError{Kind: CorruptRecordHeaderChecksum, Position: pos}
		r.gap, r.torn = s.zeroSectorIn(pos, pos+int64(s.hl))
		return nil
	case headerBad:
		k := CorruptRecordInvalid
		if h.bodyLen > MaxPayloadBytes {
			k = CorruptRecordTooLarge
		}
		r.err = &CorruptionError{Kind: k, Position: pos, Detail: why}
		return nil
	}
	n := s.hl + int(h.bodyLen)
	rec, err := s.at(pos, n)
	switch {
	case err != nil:
		r.err = err
	case len(rec) < n:
		r.err = &CorruptionError{Kind: CorruptTruncated, Position: pos, Needed: int64(n), Available: int64(len(rec))}
		r.torn = true
	case s.verify && h.offset >= s.verifyFrom && !checkBody(rec, s.hl, h):
		r.err = &CorruptionError{Kind: CorruptRecordChecksum, Position: pos}
		r.gap, r.torn = s.zeroSectorIn(pos, pos+int64(n))
	default:
		if _, _, ok := splitBody(rec[s.hl:], h); !ok {
			r.err = &CorruptionError{Kind: CorruptRecordInvalid, Position: pos, Detail: "publisher length overruns the body"}
		} else if h.offset != off {
			r.err = &CorruptionError{Kind: CorruptOffsetOutOfOrder, Position: pos, Detail: offsetDetail(off, h.offset)}
		} else {
			return rec[:n]
		}
	}
	return nil
}

func offsetDetail(want, got uint64) string {
	return "expected offset " + utoa(want) + ", found " + utoa(got)
}

func utoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// zeroSectorIn reports whether a sector overlapping [from, to) is all zero from
// its aligned start to its end or EOF (the footprint of a torn write, whose
// lost sectors read back as zeros; docs/storage-format.md "Torn tails"), and
// the first such sector's position.
func (s *scanner) zeroSectorIn(from, to int64) (int64, bool) {
	if to > s.size {
		to = s.size
	}
	for sec := from &^ (sectorBytes - 1); sec < to; sec += sectorBytes {
		end := sec + sectorBytes
		if end > s.size {
			end = s.size
		}
		b, err := s.at(sec, int(end-sec))
		if err != nil || len(b) == 0 {
			return 0, false
		}
		if allZero(b) {
			return sec, true
		}
	}
	return 0, false
}

// nonZeroFrom returns the position of the first non-zero byte in [from,
// size), or -1 when there is none. It reads forward through the scanner's
// buffer (one buffer-sized read at a time, no allocation) and stops at the
// first non-zero byte.
func (s *scanner) nonZeroFrom(from int64) (int64, error) {
	for pos := from; pos < s.size; {
		b, err := s.at(pos, len(s.buf))
		if err != nil {
			return -1, err
		}
		if len(b) == 0 {
			return -1, nil
		}
		for i, c := range b {
			if c != 0 {
				return pos + int64(i), nil
			}
		}
		pos += int64(len(b))
	}
	return -1, nil
}

// dataAfterGap checks the rest of the file after a scan r that stopped at a
// zero gap (r.gap > 0): a CorruptDataAfterEnd error (Position r.end, NonZeroAt
// the first non-zero byte at or past r.gap) when the file holds data there;
// nil when the gap runs to EOF (a clean end: zero padding, preallocation).
// Errors: the read's I/O error.
func (s *scanner) dataAfterGap(r *scanResult) (*CorruptionError, error) {
	if r.gap <= 0 || r.gap >= s.size {
		return nil, nil
	}
	nz, err := s.nonZeroFrom(r.gap)
	if err != nil || nz < 0 {
		return nil, err
	}
	return &CorruptionError{Kind: CorruptDataAfterEnd, Position: r.end, NonZeroAt: nz,
		Detail: "zero gap from byte " + utoa(uint64(r.gap)) + " followed by data: not a clean end of the log"}, nil
}

// headersFrom counts the record headers that pass their checksum walking
// forward from pos, each header's body length giving the next position,
// until a header fails, is zero or EOF: the records a truncation at pos
// drops (RecoveryInfo.TornTailRecords). A read error ends the count.
func (s *scanner) headersFrom(pos int64) int64 {
	var n int64
	for pos >= 0 && pos < s.size {
		hb, err := s.at(pos, s.hl)
		if err != nil || len(hb) < s.hl {
			return n
		}
		h, st, _ := parseRecordHeader(hb, s.version)
		if st != headerOK {
			return n
		}
		n++
		pos += int64(s.hl) + int64(h.bodyLen)
	}
	return n
}

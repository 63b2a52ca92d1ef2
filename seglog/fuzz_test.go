package seglog

import (
	"bytes"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func FuzzDecodeRecord(f *testing.F) {
	for _, g := range ownGoldens[1:6] {
		b, _ := hex.DecodeString(g.hex)
		f.Add(b, uint16(6))
	}
	f.Add(AppendRecord(nil, 2, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")}), uint16(2))
	f.Fuzz(func(t *testing.T, b []byte, v uint16) {
		r, n, err := DecodeRecord(b, v)
		if err != nil {
			return
		}
		if n > len(b) {
			t.Fatalf("length %d beyond input %d", n, len(b))
		}
		again := AppendRecord(nil, v, &r)
		if !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, b[:n])
		}
	})
}

func FuzzDecodeSegmentHeader(f *testing.F) {
	f.Add(AppendSegmentHeader(nil, SegmentHeader{Version: 3, BaseOffset: 1, CreatedAtMicros: 2}))
	f.Add(AppendSegmentHeader(nil, SegmentHeader{Version: 2, BaseOffset: 7}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeSegmentHeader(b)
		if err != nil {
			return
		}
		// Bytes 28..32 are reserved, outside the header CRC, and ignored on read.
		if again := AppendSegmentHeader(nil, h); !bytes.Equal(again[:28], b[:28]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

func FuzzDecodeIndex(f *testing.F) {
	b := AppendIndexEntry(AppendIndexHeader(nil, 3, 7), IndexEntry{7, 32})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeIndex(b, 3, 7)
		if err != nil {
			return
		}
		out := AppendIndexHeader(nil, 3, 7)
		for _, x := range e {
			out = AppendIndexEntry(out, x)
		}
		if !bytes.Equal(out, b[:len(out)]) {
			t.Fatal("re-encoding differs")
		}
	})
}

func FuzzDecodeEpochsRunState(f *testing.F) {
	f.Add(EncodeEpochs([]Epoch{{1, 0}, {2, 7}}))
	f.Add(EncodeRunState(true, StorageID{1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, ok := DecodeEpochs(b); ok && !bytes.Equal(EncodeEpochs(e), b) {
			t.Fatal("epochs re-encoding differs")
		}
		if s, ok := DecodeRunState(b); ok && !bytes.Equal(EncodeRunState(s.CleanStop, s.ID), b) {
			t.Fatal("run-state re-encoding differs")
		}
	})
}

// FuzzRecoverSegment feeds arbitrary bytes as a log's only segment to Verify,
// Dump and Open (recovery): errors are fine, panics and hangs are not.
func FuzzRecoverSegment(f *testing.F) {
	seg := AppendSegmentHeader(nil, SegmentHeader{Version: 3, BaseOffset: 7, CreatedAtMicros: 2})
	seg = AppendRecord(seg, 3, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")})
	f.Add(seg)
	f.Add(append(append([]byte(nil), seg...), make([]byte, 40)...))
	v2 := AppendSegmentHeader(nil, SegmentHeader{Version: 2, BaseOffset: 7, CreatedAtMicros: 2})
	f.Add(AppendRecord(v2, 2, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, SegmentFileName(0)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		Verify(dir, io.Discard, ToolOptions{})
		Dump(dir, io.Discard, ToolOptions{})
		d := NewDisk(nil, nil)
		l, err := d.Open(Options{Dir: dir, NoPreallocate: true, FsyncMode: FsyncNone})
		if err != nil {
			return
		}
		defer l.Close()
		for from := l.EarliestOffset(); from < l.CommittedOffset(); {
			n := 0
			if err := l.Read(from, 1<<20, func(off uint64, _ int64, _ []byte) bool { from, n = off+1, n+1; return true }); err != nil || n == 0 {
				break
			}
		}
	})
}

package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

// rawRecords reads every committed record of l from from through ReadRaw,
// deep-copied.
func rawRecords(t testing.TB, l *Log, from uint64) []Record {
	t.Helper()
	var out []Record
	for from < l.CommittedOffset() {
		n := 0
		err := l.ReadRaw(from, 1<<20, func(r *Record) bool {
			c := *r
			c.Payload = bytes.Clone(r.Payload)
			if r.Publisher != nil {
				c.Publisher = bytes.Clone(r.Publisher)
			}
			out = append(out, c)
			from, n = r.Offset+1, n+1
			return true
		})
		if err != nil {
			t.Fatalf("ReadRaw(%d): %v", from, err)
		}
		if n == 0 {
			t.Fatalf("ReadRaw(%d) delivered nothing below committed %d", from, l.CommittedOffset())
		}
	}
	return out
}

// appendAtWait stages recs with AppendAt and drives d until done ran.
func appendAtWait(t testing.TB, d *Disk, l *Log, recs []Record) (uint64, uint64) {
	t.Helper()
	var first, last uint64
	ok := false
	if err := l.AppendAt(recs[0].Offset, recs, func(f, la uint64, err error) {
		if err != nil {
			t.Errorf("AppendAt completion: %v", err)
		}
		first, last, ok = f, la, true
	}); err != nil {
		t.Fatalf("AppendAt: %v", err)
	}
	waitFor(t, d, func() bool { return ok })
	return first, last
}

// everyKind appends a data record, a generation start, a data record with a
// publisher, a commit marker and a plain batch to l.
func everyKind(t testing.TB, d *Disk, l *Log) {
	t.Helper()
	appendWait(t, d, l, 10, []byte("a"), []byte(""))
	for _, r := range []Record{
		{Kind: KindGenerationStart, TimestampMicros: 11, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 'n', '1'}},
		{Kind: KindData, TimestampMicros: 12, Publisher: []byte("svc"), Payload: []byte("b")},
		{Kind: KindData, TimestampMicros: 13, Publisher: []byte{}, Payload: []byte("empty publisher")},
		{Kind: KindCommitMarker, TimestampMicros: 14, Payload: []byte("marker")},
	} {
		ok := false
		if err := l.AppendRecord(r, func(_, _ uint64, err error) { ok = err == nil }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, d, func() bool { return ok })
	}
	appendWait(t, d, l, 15, []byte("c"), bytes.Repeat([]byte{0xff}, 3000))
}

// TestAppendAtCopiesVerbatim: every record of a log holding every kind,
// read through ReadRaw and stored through AppendAt in a second log (in two
// batches), reads back identical offset by offset and byte by byte, after a
// reopen that verifies every checksum too; Read still skips the non-data ones.
func TestAppendAtCopiesVerbatim(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	srcDir, dstDir := t.TempDir(), t.TempDir()
	src, err := d.Open(Options{Dir: srcDir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	everyKind(t, d, src)
	want := rawRecords(t, src, 0)
	if len(want) != 8 {
		t.Fatalf("source holds %d records, want 8", len(want))
	}
	dst, err := d.Open(Options{Dir: dstDir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	if f, la := appendAtWait(t, d, dst, want[:3]); f != 0 || la != 2 {
		t.Fatalf("first batch completed as [%d, %d]", f, la)
	}
	if f, la := appendAtWait(t, d, dst, want[3:]); f != 3 || la != 7 {
		t.Fatalf("second batch completed as [%d, %d]", f, la)
	}
	src.Close()
	dst.Close()
	for _, dir := range []string{srcDir, dstDir} {
		l, err := d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
		if err != nil {
			t.Fatal(err)
		}
		sameRecords(t, dir, rawRecords(t, l, 0), want)
		var offs []uint64
		for _, r := range readAll(t, l, 0) {
			offs = append(offs, r.off)
		}
		if fmt.Sprint(offs) != "[0 1 3 4 6 7]" {
			t.Fatalf("%s: Read delivers offsets %v, want the 6 data records", dir, offs)
		}
		l.Close()
	}
}

// sameRecords fails t unless got and want are the same records: offset,
// kind, timestamp, publisher (absent and empty told apart) and payload bytes.
func sameRecords(t testing.TB, where string, got, want []Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", where, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Offset != w.Offset || g.Kind != w.Kind || g.TimestampMicros != w.TimestampMicros ||
			(g.Publisher == nil) != (w.Publisher == nil) || !bytes.Equal(g.Publisher, w.Publisher) ||
			!bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s: record %d is %+v, want %+v", where, i, g, w)
		}
	}
}

// TestAppendAtRefusesAnythingButTheTail: a first offset below or above the
// tail, records that are not consecutive, an empty batch and an unknown kind
// are refused before anything is staged: no callback, NextOffset unchanged,
// and a following AppendAt at the tail still lands there.
func TestAppendAtRefusesAnythingButTheTail(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	appendWait(t, d, l, 1, []byte("a"), []byte("b"))
	rec := func(off uint64) Record { return Record{Offset: off, TimestampMicros: 5, Payload: []byte("x")} }
	called := false
	never := func(uint64, uint64, error) { called = true }
	for _, c := range []struct {
		name  string
		first uint64
		recs  []Record
		want  error
	}{
		{"below", 1, []Record{rec(1)}, ErrNotTail},
		{"above", 3, []Record{rec(3)}, ErrNotTail},
		{"first offset not first", 2, []Record{rec(3)}, ErrNotTail},
		{"gap", 2, []Record{rec(2), rec(4)}, ErrNotTail},
		{"repeat", 2, []Record{rec(2), rec(3), rec(3)}, ErrNotTail},
		{"empty", 2, nil, ErrEmptyBatch},
		{"kind", 2, []Record{{Offset: 2, Kind: 7}}, ErrBadOptions},
	} {
		err := l.AppendAt(c.first, c.recs, never)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		var nt *NotTailError
		if c.want == ErrNotTail && (!errors.As(err, &nt) || nt.Tail != 2) {
			t.Fatalf("%s: %v is no *NotTailError with tail 2", c.name, err)
		}
		if l.NextOffset() != 2 || d.Idle() == false {
			t.Fatalf("%s: staged something: next %d, idle %v", c.name, l.NextOffset(), d.Idle())
		}
	}
	if called {
		t.Fatal("a refused AppendAt ran its callback")
	}
	if f, la := appendAtWait(t, d, l, []Record{rec(2), rec(3)}); f != 2 || la != 3 {
		t.Fatalf("AppendAt at the tail completed as [%d, %d]", f, la)
	}
	if got := fmt.Sprint(readAll(t, l, 0)); got != "[{0 1 a} {1 1 b} {2 5 x} {3 5 x}]" {
		t.Fatal(got)
	}
}

// TestAppendAtAfterReset: a follower rebuilt at base (Reset) takes the
// leader's records from base on; the segment versions follow the records
// (a publisher needs v6).
func TestAppendAtAfterReset(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, d, l, 1, []byte("old"))
	if err := l.Reset(100); err != nil {
		t.Fatal(err)
	}
	recs := []Record{
		{Offset: 100, TimestampMicros: 7, Payload: []byte("p")},
		{Offset: 101, TimestampMicros: 8, Publisher: []byte("q"), Payload: []byte("r")},
	}
	appendAtWait(t, d, l, recs)
	l.Close()
	l, err = d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.EarliestOffset() != 100 || l.NextOffset() != 102 {
		t.Fatalf("earliest %d next %d", l.EarliestOffset(), l.NextOffset())
	}
	sameRecords(t, "after reset", rawRecords(t, l, 100), recs)
	res, err := Inspect(dir, &bytes.Buffer{}, ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Segments[len(res.Segments)-1].Version; v != 6 {
		t.Fatalf("records with a publisher in a v%d segment", v)
	}
}

// TestAppendAtCycleAllocatesNothing: an on_commit AppendAt + flush + poll
// cycle allocates nothing once warm (one staging pass, no per-record copy).
func TestAppendAtCycleAllocatesNothing(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit, FsyncInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	recs := []Record{
		{Payload: make([]byte, 128)},
		{Kind: KindCommitMarker, Payload: make([]byte, 8)},
		{Publisher: []byte("p"), Payload: make([]byte, 64)},
	}
	wantCycleAllocatesNothing(t, d, "AppendAt", func(cb func(first, last uint64, err error)) error {
		next := l.NextOffset()
		for i := range recs {
			recs[i].Offset = next + uint64(i)
		}
		return l.AppendAt(next, recs, cb)
	})
}

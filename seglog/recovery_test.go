package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"felix/internal/vfs/vfstest"

	"felix/internal/testseed"
)

// buildLog writes random batches under on_commit and returns every
// acknowledged record, in order.
func buildLog(t *testing.T, dir string, seed uint64, batches int, segBytes int64) []rec {
	t.Helper()
	rnd := rand.New(rand.NewSource(int64(seed)))
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: segBytes})
	if err != nil {
		t.Fatal(err)
	}
	var acked []rec
	for b := 0; b < batches; b++ {
		n := 1 + rnd.Intn(5)
		ps := make([][]byte, n)
		for i := range ps {
			ps[i] = make([]byte, rnd.Intn(300))
			rnd.Read(ps[i])
		}
		r := appendWait(t, d, l, int64(b), ps...)
		if r.err != nil {
			t.Fatal(r.err)
		}
		for i, p := range ps {
			acked = append(acked, rec{r.first + uint64(i), int64(b), string(p)})
		}
	}
	// A last single record of 40 bytes keeps the every-byte tail tests short.
	last := make([]byte, 40)
	rnd.Read(last)
	if r := appendWait(t, d, l, int64(batches), last); r.err != nil {
		t.Fatal(r.err)
	} else {
		acked = append(acked, rec{r.first, int64(batches), string(last)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return acked
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dst, 0o755)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newestSegment(t *testing.T, dir string) string {
	ids, err := listSegments(OSFS{}, dir)
	if err != nil || len(ids) == 0 {
		t.Fatal(err)
	}
	return filepath.Join(dir, SegmentFileName(ids[len(ids)-1]))
}

// lastRecordPos returns the byte position of the last record in a segment file.
func lastRecordPos(t *testing.T, path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pos, last := int64(SegmentHeaderLen), int64(-1)
	for pos < int64(len(b)) {
		_, n, err := DecodeRecord(b[pos:], 3)
		if err != nil {
			break
		}
		last = pos
		pos += int64(n)
	}
	return last
}

// TestTornTailEveryBytePosition cuts the last record at every byte (and, O_DIRECT
// style, pads the cut with zeros to the block end): recovery must keep exactly
// the records before it, all of which were acknowledged under on_commit.
func TestTornTailEveryBytePosition(t *testing.T) {
	testseed.Run(t, 1, 2, func(t *testing.T, seed uint64) {
		src := filepath.Join(t.TempDir(), "src")
		acked := buildLog(t, src, seed, 40, 6000)
		seg := newestSegment(t, src)
		start := lastRecordPos(t, seg)
		full, _ := os.ReadFile(seg)
		want := fmt.Sprint(acked[:len(acked)-1])
		d := NewDisk(newRing(t), nil)
		for cut := start; cut < int64(len(full)); cut++ {
			for _, pad := range []bool{false, true} {
				if pad && cut%sectorBytes != 0 {
					continue // a lost sector reads as zeros from its start
				}
				dir := filepath.Join(t.TempDir(), "c")
				copyDir(t, src, dir)
				data := full[:cut]
				if pad {
					data = append(append([]byte(nil), data...), make([]byte, 4096-int(cut)%4096)...)
				}
				os.WriteFile(filepath.Join(dir, filepath.Base(seg)), data, 0o644)
				l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 6000, NoPreallocate: true})
				if err != nil {
					t.Fatalf("seed %d cut %d pad %v: %v", seed, cut, pad, err)
				}
				if got := fmt.Sprint(readAll(t, l, acked[0].off)); got != want {
					t.Fatalf("seed %d cut %d: recovered log is not the acknowledged prefix", seed, cut)
				}
				if l.NextOffset() != acked[len(acked)-1].off {
					t.Fatalf("next offset %d", l.NextOffset())
				}
				if cut >= start+4 && l.Recovery().TornTailBytes == 0 && !pad {
					t.Fatalf("torn tail not reported")
				}
				// The repaired log takes appends again.
				if cut%7 == 0 {
					if r := appendWait(t, d, l, 1, []byte("again")); r.err != nil || r.first != l.NextOffset()-1 {
						t.Fatalf("append after repair: %+v", r)
					}
				}
				l.Close()
			}
		}
	})
}

func TestVerifyNamesFlippedByte(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 7), 60, 4096)
	var out bytes.Buffer
	res, err := Verify(dir, &out, ToolOptions{})
	if err != nil || res.Records != int64(len(acked)) {
		t.Fatalf("good log: %+v %v\n%s", res, err, out.String())
	}
	if !bytes.Contains(out.Bytes(), []byte(fmt.Sprintf("verified %d records", len(acked)))) {
		t.Fatal(out.String())
	}
	ids, _ := listSegments(OSFS{}, dir)
	victim := filepath.Join(dir, SegmentFileName(ids[1]))
	b, _ := os.ReadFile(victim)
	recPos := lastRecordPos(t, victim)
	hdr, _, _ := parseRecordHeader(b[recPos:], 3)
	if hdr.bodyLen == 0 {
		t.Skip("last record empty")
	}
	b[recPos+RecordHeaderLenV3] ^= 0x40
	os.WriteFile(victim, b, 0o644)
	out.Reset()
	res, err = Verify(dir, &out, ToolOptions{})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Kind != CorruptRecordChecksum || ce.Segment != int64(ids[1]) || ce.Position != recPos {
		t.Fatalf("verify: %v (want RecordChecksum in segment %d at %d)", err, ids[1], recPos)
	}
	if len(res.Problems) != 1 || res.Records != int64(len(acked)-1) {
		t.Fatalf("problems %v records %d", res.Problems, res.Records)
	}
	if !bytes.Contains(out.Bytes(), []byte(fmt.Sprintf("segment %020d at byte %d", ids[1], recPos))) {
		t.Fatal(out.String())
	}
	// The damaged record follows the sealed segment's last index entry, so
	// open checks it (spec §8) and refuses, naming the same place.
	_, err = NewDisk(newRing(t), nil).Open(Options{Dir: dir, SegmentBytes: 4096})
	if !errors.As(err, &ce) || ce.Position != recPos || ce.Segment != int64(ids[1]) {
		t.Fatalf("open: %v (want position %d)", err, recPos)
	}
	var dump bytes.Buffer
	if r, err := Dump(dir, &dump, ToolOptions{Limit: 3}); err != nil || r.Records != 3 {
		t.Fatalf("dump %+v %v", r, err)
	}
}

func TestNewestSegmentCorruptionNeedsRepairSwitch(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 3), 10, 1<<20)
	seg := newestSegment(t, dir)
	b, _ := os.ReadFile(seg)
	pos := lastRecordPos(t, seg)
	b[len(b)-1] ^= 0xff // damage the last record's body: complete, not torn
	os.WriteFile(seg, b, 0o644)
	d := NewDisk(newRing(t), nil)
	_, err := d.Open(Options{Dir: dir})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Kind != CorruptRecordChecksum || ce.Position != pos || ce.Dir != dir {
		t.Fatalf("open: %v", err)
	}
	l, err := d.Open(Options{Dir: dir, RepairChecksumTail: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.NextOffset() != acked[len(acked)-1].off || l.Recovery().TornTailAt != pos {
		t.Fatalf("next %d recovery %+v", l.NextOffset(), l.Recovery())
	}
}

func TestSealedSegmentDamageIsAnError(t *testing.T) {
	dir := t.TempDir()
	buildLog(t, dir, testseed.Seed(t, 4), 40, 4096)
	ids, _ := listSegments(OSFS{}, dir)
	p := filepath.Join(dir, SegmentFileName(ids[0]))
	b, _ := os.ReadFile(p)
	os.WriteFile(p, b[:len(b)-3], 0o644) // a sealed segment cut short
	d := NewDisk(newRing(t), nil)
	_, err := d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Segment != int64(ids[0]) {
		t.Fatalf("open: %v", err)
	}
}

func TestIndexRebuiltWhenMissingOrWrong(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 5), 80, 8192)
	ids, _ := listSegments(OSFS{}, dir)
	idx0 := filepath.Join(dir, IndexFileName(ids[0]))
	want, _ := os.ReadFile(idx0)
	os.Remove(idx0)
	os.WriteFile(filepath.Join(dir, IndexFileName(ids[1])), []byte("garbage-garbage-garbage-garbage"), 0o644)
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, SegmentBytes: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Recovery().IndexesRebuilt != 2 {
		t.Fatalf("recovery %+v", l.Recovery())
	}
	if got, _ := os.ReadFile(idx0); !bytes.Equal(got, want) {
		t.Fatal("rebuilt index differs from the one written during append")
	}
	if got := readAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatal("reads differ after index rebuild")
	}
}

func TestAbandonedPreparationRemoved(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 6), 10, 1<<20)
	// An empty newest segment whose base does not continue the log.
	f, _ := os.Create(filepath.Join(dir, SegmentFileName(9)))
	f.Write(AppendSegmentHeader(nil, SegmentHeader{Version: 3, BaseOffset: 999}))
	f.Close()
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Recovery().AbandonedRemoved != 1 || l.NextOffset() != uint64(len(acked)) {
		t.Fatalf("%+v next %d", l.Recovery(), l.NextOffset())
	}
	if _, err := os.Stat(filepath.Join(dir, SegmentFileName(9))); !isNotExist(err) {
		t.Fatal("abandoned segment still there")
	}
}

func TestUnknownVersionRefusesToOpen(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, SegmentFileName(0)), AppendSegmentHeader(nil, SegmentHeader{Version: 7}), 0o644)
	_, err := NewDisk(newRing(t), nil).Open(Options{Dir: dir})
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Kind != CorruptSegmentVersion {
		t.Fatalf("got %v", err)
	}
}

func TestReadsV2Segments(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir, 0o755)
	b := AppendSegmentHeader(nil, SegmentHeader{Version: 2, BaseOffset: 7, CreatedAtMicros: 2})
	b = AppendRecord(b, 2, &Record{Offset: 7, TimestampMicros: 9, Payload: []byte("hi")})
	b = AppendRecord(b, 2, &Record{Offset: 8, TimestampMicros: 10})
	os.WriteFile(filepath.Join(dir, SegmentFileName(0)), b, 0o644)
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(readAll(t, l, 7)); got != "[{7 9 hi} {8 10 }]" {
		t.Fatal(got)
	}
	// A newer build appends v3 segments after a v2 segment.
	if r := appendWait(t, d, l, 11, []byte("v3")); r.err != nil || r.first != 9 {
		t.Fatalf("%+v", r)
	}
	l.Close()
	l, err = d.Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := fmt.Sprint(readAll(t, l, 7)); got != "[{7 9 hi} {8 10 } {9 11 v3}]" {
		t.Fatal(got)
	}
}

// TestFaultInjection: EIO/ENOSPC on write, fdatasync or fallocate fail the
// append with ErrStorageFailed, acknowledge nothing, and the log reopens readable.
func TestFaultInjection(t *testing.T) {
	cases := []struct {
		op  vfstest.Op
		err error
	}{{vfstest.OpWrite, unix.EIO}, {vfstest.OpWrite, unix.ENOSPC}, {vfstest.OpDatasync, unix.EIO}, {vfstest.OpAllocate, unix.ENOSPC}, {vfstest.OpTruncate, unix.EIO}}
	for _, c := range cases {
		t.Run(string(c.op)+"-"+c.err.Error(), func(t *testing.T) {
			dir := t.TempDir()
			ffs := &vfstest.FaultFS{} // the shared fault FS (was the private faultFS of helpers_test.go)
			d := NewDisk(newRing(t), ffs)
			l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			var acked []rec
			for i := 0; i < 5; i++ {
				r := appendWait(t, d, l, 1, payloadOf(i))
				if r.err != nil {
					t.Fatal(r.err)
				}
				acked = append(acked, rec{r.first, 1, string(payloadOf(i))})
			}
			ffs.Fail(c.op, c.err)
			var failed error
			calls := 0
			for i := 0; i < 200 && failed == nil; i++ {
				p := bytes.Repeat([]byte{'z'}, 900)
				r := appendWait(t, d, l, 2, p)
				if r.err == nil {
					acked = append(acked, rec{r.first, 2, string(p)})
					continue
				}
				calls++
				failed = r.err
			}
			if !errors.Is(failed, ErrStorageFailed) || !errors.Is(failed, c.err) {
				t.Fatalf("append error %v, want ErrStorageFailed wrapping %v", failed, c.err)
			}
			if err := l.Append([][]byte{[]byte("x")}, 1, func(uint64, uint64, error) {}); !errors.Is(err, ErrStorageFailed) {
				t.Fatalf("append on a failed log: %v", err)
			}
			l.Close()
			ffs.Heal()
			l, err = NewDisk(newRing(t), nil).Open(Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096})
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			defer l.Close()
			got := readAll(t, l, 0)
			if len(got) < len(acked) || fmt.Sprint(got[:len(acked)]) != fmt.Sprint(acked) {
				t.Fatalf("reopened log lost acknowledged records: %d < %d", len(got), len(acked))
			}
		})
	}
}

var _ = io.EOF

// TestPrezeroCrashImage: with pre-zeroing, the crash image of an open log has
// zeros past the data; reopening keeps every acknowledged record.
func TestPrezeroCrashImage(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	o := Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 64 << 10, PrezeroBytes: 32 << 10}
	l, err := d.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var acked []rec
	for i := 0; i < 300; i++ {
		r := appendWait(t, d, l, 3, payloadOf(i))
		if r.err != nil {
			t.Fatal(r.err)
		}
		acked = append(acked, rec{r.first, 3, string(payloadOf(i))})
	}
	waitFor(t, d, func() bool { return d.Idle() })
	img := filepath.Join(t.TempDir(), "img")
	copyDir(t, dir, img) // the log is still open: a crash image
	st, _ := os.Stat(newestSegment(t, img))
	if st.Size() <= int64(lastRecordPos(t, newestSegment(t, img))) {
		t.Fatal("no pre-zeroed region in the image")
	}
	l.Close()
	l2, err := NewDisk(newRing(t), nil).Open(o)
	if err != nil {
		t.Fatal(err)
	}
	l2.Close()
	o.Dir = img
	d2 := NewDisk(newRing(t), nil)
	l3, err := d2.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	if got := readAll(t, l3, 0); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("crash image holds %d records, want %d", len(got), len(acked))
	}
	if r := appendWait(t, d2, l3, 4, []byte("more")); r.err != nil || r.first != 300 {
		t.Fatalf("%+v", r)
	}
}

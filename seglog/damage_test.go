package seglog

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// damagedSealedLog writes 60 records of 200 bytes over 4 KiB segments (index
// every 512 bytes), closes the log, flips one payload byte of offset 4 (inside the index
// interval [3, 6)) in
// sealed segment 0 and reopens it. It returns the log, its disk and the
// damaged record's byte position.
func damagedSealedLog(t *testing.T) (*Log, *Disk, int64) {
	t.Helper()
	dir := t.TempDir()
	opts := Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096, IndexSpacingBytes: 512}
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		if r := appendWait(t, d, l, 1, bytes.Repeat([]byte{byte('a' + i%26)}, 200)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	pos := int64(SegmentHeaderLen + 4*(RecordHeaderLen(WriteVersion)+200))
	f, err := os.OpenFile(filepath.Join(dir, SegmentFileName(0)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, pos+int64(RecordHeaderLen(WriteVersion))+100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if l, err = d.Open(opts); err != nil {
		t.Fatalf("open with a damaged sealed segment (checked lazily): %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l, d, pos
}

// readUntilError reads from from until nothing more is delivered or an error.
func readUntilError(l *Log, from uint64) ([]uint64, error) {
	var got []uint64
	for {
		n := 0
		err := l.Read(from, 1<<20, func(off uint64, _ int64, _ []byte) bool {
			got, from = append(got, off), off+1
			n++
			return true
		})
		if err != nil || n == 0 {
			return got, err
		}
	}
}

// A sealed segment with a flipped payload byte (issue 23 item 1): the open
// succeeds, Reader.VerifySealed finds the damage (kind, segment, byte,
// offset), a read through it delivers every record below and then the
// *CorruptionError, and a read starting above it reads to the end.
func TestDamagedSealedSegmentVerifiedAndReadAround(t *testing.T) {
	l, _, pos := damagedSealedLog(t)
	r := l.Reader()
	defer r.Close()
	err := r.VerifySealed(context.Background())
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Kind != CorruptRecordChecksum || ce.Segment != 0 || ce.Position != pos || ce.Offset != 4 {
		t.Fatalf("VerifySealed: %#v, want RecordChecksum in segment 0 at byte %d, offset 4", err, pos)
	}
	got, err := readUntilError(l, 0)
	if !errors.As(err, &ce) || ce.Offset != 4 || len(got) != 4 || got[3] != 3 {
		t.Fatalf("read from 0: %v then %v, want offsets 0..3 then the damage at offset 4", got, err)
	}
	if got, err = readUntilError(l, 5); err != nil || len(got) != 55 || got[0] != 5 || got[54] != 59 {
		t.Fatalf("read from 5 (above the damage, same index interval): %d records %v, err %v", len(got), got, err)
	}
	if err := r.VerifySealed(context.Background()); !errors.Is(err, ErrCorruption) {
		t.Fatalf("second VerifySealed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.VerifySealed(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("VerifySealed with a cancelled context: %v", err)
	}
}

// Repair (issue 23 item 2, `felix log repair`) cuts a bad record at the
// newest segment's tail: the dropped bytes land in the side file first, the
// log then opens after a clean stop with every record before the damage,
// and a second Repair finds it whole. Damage in a sealed segment is refused
// with ErrRepairSealed and nothing changes.
func TestRepairCutsTheBadTailAndSavesIt(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, FsyncMode: FsyncOnCommit, PreviousRunClean: true}
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if r := appendWait(t, d, l, 1, bytes.Repeat([]byte{byte('a' + i)}, 200)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	l.Close()
	seg := filepath.Join(dir, SegmentFileName(0))
	last := int64(SegmentHeaderLen + 9*(RecordHeaderLen(WriteVersion)+200))
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, last+int64(RecordHeaderLen(WriteVersion))+7); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(seg)
	if _, err := d.Open(opts); !errors.Is(err, ErrCorruption) {
		t.Fatalf("open over the bad tail after a clean stop: %v, want a corruption refusal", err)
	}
	var out bytes.Buffer
	res, err := Repair(dir, &out, ToolOptions{})
	if err != nil || !res.Repaired || res.At != last || res.DroppedBytes != int64(len(before))-last || res.DroppedRecords != 1 {
		t.Fatalf("Repair: %+v %v", res, err)
	}
	if saved, err := os.ReadFile(res.SideFile); err != nil || !bytes.Equal(saved, before[last:]) {
		t.Fatalf("side file %s: %d bytes, %v; want the %d dropped bytes", res.SideFile, len(saved), err, len(before)-int(last))
	}
	if l, err = d.Open(opts); err != nil {
		t.Fatalf("open after the repair: %v", err)
	}
	if got := readAll(t, l, 0); len(got) != 9 || got[8].payload != string(bytes.Repeat([]byte{'i'}, 200)) {
		t.Fatalf("after the repair: %d records", len(got))
	}
	l.Close()
	if res, err := Repair(dir, &out, ToolOptions{}); err != nil || res.Repaired {
		t.Fatalf("second Repair: %+v %v", res, err)
	}
	sealed, _, _ := damagedSealedLog(t)
	sealed.Close()
	if _, err := Repair(sealed.Dir(), &out, ToolOptions{}); !errors.Is(err, ErrRepairSealed) || !errors.Is(err, ErrCorruption) {
		t.Fatalf("Repair over a damaged sealed segment: %v", err)
	}
}

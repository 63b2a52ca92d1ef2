package seglog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"felix/internal/testseed"
)

// Walk reads every record buildLog acknowledged, in offset order with the payload's bytes in
// the body, honours From and an early stop, and reports a flipped body byte to bad while it
// passes the records around it.
func TestWalkReadsEveryRecordAndReportsDamage(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 5), 40, 1<<20)
	var offs []uint64
	if err := Walk(dir, ToolOptions{}, func(r *WalkRecord) bool {
		if len(offs) > 0 && r.Offset != offs[len(offs)-1]+1 {
			t.Fatalf("offset %d after %d", r.Offset, offs[len(offs)-1])
		}
		if want := acked[len(offs)]; r.Offset != want.off || r.Timestamp != want.ts || !bytes.HasSuffix(r.Body, []byte(want.payload)) {
			t.Fatalf("record %d: offset %d ts %d body %q, want %+v", len(offs), r.Offset, r.Timestamp, r.Body, want)
		}
		offs = append(offs, r.Offset)
		return true
	}, nil); err != nil || len(offs) != len(acked) {
		t.Fatalf("walk: %d records of %d, %v", len(offs), len(acked), err)
	}
	n := 0
	_ = Walk(dir, ToolOptions{From: 10}, func(r *WalkRecord) bool {
		if r.Offset < 10 {
			t.Fatalf("From 10 gave offset %d", r.Offset)
		}
		n++
		return n < 5
	}, nil)
	if n != 5 {
		t.Fatalf("stopped after %d records, want 5", n)
	}
	ids, _ := listSegments(OSFS{}, dir)
	victim := filepath.Join(dir, SegmentFileName(ids[0]))
	b, _ := os.ReadFile(victim)
	pos := lastRecordPos(t, victim)
	b[pos+RecordHeaderLenV3] ^= 0x40
	if err := os.WriteFile(victim, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var problems []*CorruptionError
	good := 0
	if err := Walk(dir, ToolOptions{}, func(*WalkRecord) bool { good++; return true }, func(ce *CorruptionError) {
		problems = append(problems, ce)
	}); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptionError
	if len(problems) != 1 || !errors.As(error(problems[0]), &ce) || ce.Kind != CorruptRecordChecksum || good != len(acked)-1 {
		t.Fatalf("after a flipped byte: %d good of %d, problems %v", good, len(acked), problems)
	}
}

package seglog

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"felix/internal/testseed"
)

// recordPositions returns the byte position of every record of a v3 segment file.
func recordPositions(t *testing.T, path string) []int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for pos := int64(SegmentHeaderLen); pos < int64(len(b)); {
		_, n, err := DecodeRecord(b[pos:], 3)
		if err != nil {
			break
		}
		out = append(out, pos)
		pos += int64(n)
	}
	return out
}

// zeroRange overwrites [at, at+n) of path with zeros (dd conv=notrunc) and
// returns the index of the first record the zeros touch.
func zeroRange(t *testing.T, path string, at, n int64) int {
	t.Helper()
	pos := recordPositions(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), at); err != nil {
		t.Fatal(err)
	}
	for i := range pos {
		if i+1 == len(pos) || pos[i+1] > at {
			return i
		}
	}
	return len(pos)
}

// gapCases builds a cleanly closed one-segment log and damages a copy of it
// per case: "sector" zeroes an aligned 512-byte sector mid-segment (the
// issue-23 repro, dd seek=N), "header" zeroes 512 bytes from a record's start
// (the scan meets an all-zero header). fn gets the copy, the acknowledged
// records, and the index of the first record the zeros touch.
func gapCases(t *testing.T, fn func(t *testing.T, dir string, acked []rec, lost int)) {
	src := filepath.Join(t.TempDir(), "src")
	acked := buildLog(t, src, testseed.Seed(t, 23), 120, 1<<20)
	pos := recordPositions(t, newestSegment(t, src))
	mid := pos[len(pos)/2]
	for name, at := range map[string]int64{"sector": mid &^ (sectorBytes - 1), "header": mid} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "log")
			copyDir(t, src, dir)
			lost := zeroRange(t, newestSegment(t, dir), at, sectorBytes)
			if lost == 0 || lost >= len(acked)-1 {
				t.Fatalf("zeros at %d touch record %d of %d: not mid-segment", at, lost, len(acked))
			}
			fn(t, dir, acked, lost)
		})
	}
}

// TestZeroGapAfterCleanStopRefuses: after a clean stop a zero gap followed by
// records is corruption: open refuses with CorruptDataAfterEnd naming shard
// directory, segment and bytes, truncates nothing, and Verify reports it.
func TestZeroGapAfterCleanStopRefuses(t *testing.T) {
	gapCases(t, func(t *testing.T, dir string, acked []rec, lost int) {
		seg := newestSegment(t, dir)
		before, _ := os.Stat(seg)
		_, err := NewDisk(newRing(t), nil).Open(Options{Dir: dir, PreviousRunClean: true})
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.Kind != CorruptDataAfterEnd || ce.Dir != dir || ce.Segment != 0 {
			t.Fatalf("open after a clean stop: %v, want DataAfterEnd", err)
		}
		if ce.Position <= SegmentHeaderLen || ce.NonZeroAt <= ce.Position || ce.NonZeroAt >= before.Size() {
			t.Fatalf("DataAfterEnd at %d, non-zero at %d (file %d bytes)", ce.Position, ce.NonZeroAt, before.Size())
		}
		if after, _ := os.Stat(seg); after.Size() != before.Size() {
			t.Fatalf("refused open changed the segment: %d -> %d bytes", before.Size(), after.Size())
		}
		res, verr := Verify(dir, io.Discard, ToolOptions{})
		if !errors.Is(verr, ErrCorruption) || !hasKind(res.Problems, CorruptDataAfterEnd) {
			t.Fatalf("verify: %v, problems %v", verr, res.Problems)
		}
	})
}

func hasKind(ps []*CorruptionError, k CorruptionKind) bool {
	for _, p := range ps {
		if p.Kind == k && p.Segment == 0 && p.NonZeroAt > p.Position {
			return true
		}
	}
	return false
}

// TestZeroGapAfterCrashTruncates: after an unclean stop the same gap may be a
// torn multi-block write: the tail from the gap is truncated and RecoveryInfo
// names the bytes dropped and the data found past the gap.
func TestZeroGapAfterCrashTruncates(t *testing.T) {
	gapCases(t, func(t *testing.T, dir string, acked []rec, lost int) {
		st, _ := os.Stat(newestSegment(t, dir))
		l, err := NewDisk(newRing(t), nil).Open(Options{Dir: dir})
		if err != nil {
			t.Fatalf("open after a crash: %v", err)
		}
		defer l.Close()
		ri := l.Recovery()
		if l.NextOffset() != acked[lost].off || ri.TornTailSegment != 0 || ri.TornTailAt <= SegmentHeaderLen {
			t.Fatalf("next %d (want %d), recovery %+v", l.NextOffset(), acked[lost].off, ri)
		}
		if ri.TornTailBytes != st.Size()-ri.TornTailAt || ri.DataAfterGapAt <= ri.TornTailAt {
			t.Fatalf("recovery %+v for a %d-byte segment", ri, st.Size())
		}
	})
}

// TestPreallocatedZeroTailIsClean: zeros running to EOF past the last record
// (O_DIRECT padding, pre-zeroing) are a clean end, after a clean stop or not.
func TestPreallocatedZeroTailIsClean(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 5), 30, 1<<20)
	f, err := os.OpenFile(newestSegment(t, dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 70<<10)) // more than one scanner buffer of zeros
	f.Close()
	if res, err := Verify(dir, io.Discard, ToolOptions{}); err != nil || len(res.Problems) != 0 {
		t.Fatalf("verify: %v %v", err, res.Problems)
	}
	for _, clean := range []bool{true, false} {
		l, err := NewDisk(newRing(t), nil).Open(Options{Dir: dir, PreviousRunClean: clean})
		if err != nil {
			t.Fatalf("clean=%v: %v", clean, err)
		}
		if l.NextOffset() != acked[len(acked)-1].off+1 || l.Recovery().TornTailBytes != 0 {
			t.Fatalf("clean=%v: next %d recovery %+v", clean, l.NextOffset(), l.Recovery())
		}
		l.Close()
	}
}

// TestTornTailAfterCleanStopRepaired: a record cut by EOF holds no data past
// a gap, so the torn-tail repair stays even after a clean stop (a log that
// failed mid-run closes without its trim); RecoveryInfo names the cut.
func TestTornTailAfterCleanStopRepaired(t *testing.T) {
	dir := t.TempDir()
	acked := buildLog(t, dir, testseed.Seed(t, 6), 10, 1<<20)
	seg := newestSegment(t, dir)
	st, _ := os.Stat(seg)
	last := lastRecordPos(t, seg)
	if err := os.Truncate(seg, st.Size()-3); err != nil {
		t.Fatal(err)
	}
	l, err := NewDisk(newRing(t), nil).Open(Options{Dir: dir, PreviousRunClean: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ri := l.Recovery()
	if l.NextOffset() != acked[len(acked)-1].off || ri.TornTailAt != last || ri.TornTailBytes != st.Size()-3-last || ri.DataAfterGapAt != 0 {
		t.Fatalf("next %d recovery %+v", l.NextOffset(), ri)
	}
}

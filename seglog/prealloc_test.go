package seglog

import (
	"bytes"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// allocatedBytes is the disk space the file's blocks take (st_blocks × 512).
func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// TestPreallocationGrowsInSteps: a log holding a few records reserves one
// step of disk, not a whole segment (found by e2e: 16 logs × 256 MiB per
// 4-shard stream), and the reservation follows the data in steps.
func TestPreallocationGrowsInSteps(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	step := int64(1 << 20)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncNone, SegmentBytes: 64 << 20, PreallocateStepBytes: step})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if res := appendWait(t, d, l, 1, []byte("tiny")); res.err != nil {
		t.Fatal(res.err)
	}
	seg := filepath.Join(dir, SegmentFileName(0))
	if got := allocatedBytes(t, seg); got > 2*step {
		t.Fatalf("one tiny record reserved %d bytes; want at most %d (a step), not the 64 MiB segment", got, 2*step)
	}
	payload := bytes.Repeat([]byte{7}, 64<<10)
	for range 40 { // 2.5 MiB of records: the reservation must follow
		if res := appendWait(t, d, l, 1, payload); res.err != nil {
			t.Fatal(res.err)
		}
	}
	got := allocatedBytes(t, seg)
	if got < 40*int64(len(payload)) || got > 40*int64(len(payload))+3*step {
		t.Fatalf("after 2.5 MiB of records %d bytes are reserved; want the data rounded up to a %d-byte step", got, step)
	}
}

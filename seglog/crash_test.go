package seglog

import (
	"fmt"
	"testing"
	"time"

	"felix/internal/vfs/vfstest"
)

// Under fsync periodic and none, Compact deletes the old segments only once
// the live set appended at the tail is fdatasync'd: a crash right after the
// compaction completed keeps the live records.
func TestCompactIsDurableBeforeHeadDrop(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncPeriodic, FsyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := &vfstest.FaultFS{TrackSyncs: true} // the shared fault FS (was the private crashFS)
			d := NewDisk(nil, fs)
			l := openTest(t, d, Options{Dir: dir, SegmentBytes: 4096, FsyncMode: mode, FsyncInterval: time.Hour})
			fill(t, d, l, 100, 1)
			done := false
			if err := l.Compact([][]byte{[]byte("live-a"), []byte("live-b")}, 5, func(_, _ uint64, err error) {
				if err != nil {
					t.Errorf("compact: %v", err)
				}
				done = true
			}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, d, func() bool { return done })
			if l.EarliestOffset() != 100 {
				t.Fatalf("earliest %d after compaction, want 100", l.EarliestOffset())
			}
			if err := fs.PowerLoss(); err != nil { // the log is never closed: power lost now
				t.Fatal(err)
			}
			l2 := openTest(t, NewDisk(nil, nil), Options{Dir: dir, SegmentBytes: 4096})
			defer l2.Close()
			got := fmt.Sprint(readAll(t, l2, l2.EarliestOffset()))
			if got != "[{100 5 live-a} {101 5 live-b}]" {
				t.Fatalf("after a crash: %s (earliest %d, next %d), want the live set", got, l2.EarliestOffset(), l2.NextOffset())
			}
		})
	}
}

package seglog

import (
	"testing"
	"time"
)

// TestDurableAppendCycleAllocatesNothing checks that one on_commit
// append+flush+poll cycle (the write and its covering fdatasync through the
// ring) allocates nothing once the log is warm: the ring Ops, the staging
// units and their callback slices are reused.
func TestDurableAppendCycleAllocatesNothing(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncOnCommit, FsyncPeriodic, FsyncNone} {
		t.Run(mode.String(), func(t *testing.T) {
			d := NewDisk(newRing(t), nil)
			l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: mode, FsyncInterval: time.Nanosecond})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			payloads := [][]byte{make([]byte, 128), make([]byte, 128)}
			wantCycleAllocatesNothing(t, d, "durable append", func(cb func(first, last uint64, err error)) error {
				return l.Append(payloads, 1, cb)
			})
		})
	}
}

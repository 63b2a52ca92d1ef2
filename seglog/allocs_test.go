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
			done := false
			cb := func(first, last uint64, err error) {
				if err != nil {
					t.Errorf("append: %v", err)
				}
				done = true
			}
			cycle := func() {
				done = false
				if err := l.Append(payloads, 1, cb); err != nil {
					t.Fatal(err)
				}
				for !done || !d.Idle() {
					if err := d.Flush(); err != nil {
						t.Fatal(err)
					}
					if err := d.Poll(time.Second); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := 0; i < 8; i++ {
				cycle() // warm: staging buffers, unit pool, slices
			}
			if a := testing.AllocsPerRun(100, cycle); a != 0 {
				t.Fatalf("%v allocations per durable append cycle, want 0", a)
			}
		})
	}
}

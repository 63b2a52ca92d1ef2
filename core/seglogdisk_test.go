package core

import (
	"testing"
	"time"

	"felix/proto"
)

// openTestSeglogDisk returns a production disk over a temporary directory.
func openTestSeglogDisk(t *testing.T) *seglogDisk {
	t.Helper()
	cd, err := newSeglogDisk(&Config{DataDir: t.TempDir(), Fsync: FsyncOnCommit, FsyncInterval: time.Second}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cd.Close() })
	return cd.(*seglogDisk)
}

// driveUntil runs Flush/Poll until cond holds.
func (d *seglogDisk) driveUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 10000 {
			t.Fatal("condition never met")
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := d.Poll(10 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

// The production producers log compacts through seglogLog.Compact (declared
// beside the adapter, not in the cache code): the live set lands at the
// tail and the head is dropped.
func TestSeglogProducerLogCompacts(t *testing.T) {
	d := openTestSeglogDisk(t)
	l, err := d.OpenLog(LogAddr{Kind: ShardStream, Name: testStream, Log: proto.LogProducers}, logOptions{})
	if err != nil {
		t.Fatal(err)
	}
	appended := 0
	for i := 0; i < 10; i++ {
		if err := l.Append([][]byte{[]byte("key")}, 1, func(_, _ uint64, err error) {
			if err == nil {
				appended++
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	d.driveUntil(t, func() bool { return appended == 10 })
	var first uint64
	done := false
	if err := l.Compact([][]byte{[]byte("live")}, 2, func(f, _ uint64, err error) {
		if err != nil {
			t.Errorf("compact: %v", err)
		}
		first, done = f, true
	}); err != nil {
		t.Fatal(err)
	}
	d.driveUntil(t, func() bool { return done })
	if first != 10 || l.EarliestOffset() != 10 || l.NextOffset() != 11 {
		t.Fatalf("after compaction: live at %d, earliest %d, next %d; want 10, 10, 11", first, l.EarliestOffset(), l.NextOffset())
	}
}

package seglog

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"felix/clock/clocktest"
	"felix/internal/vfs/vfstest"
)

type syncNowResult struct {
	durable uint64
	err     error
	done    bool
}

func (r *syncNowResult) set(d uint64, err error) { *r = syncNowResult{d, err, true} }

// SyncNow fdatasyncs on demand under fsync none and under periodic before the interval
// (the fake clock never advances): one fdatasync covers the records of every SyncNow
// made before it (group commit); a synced log answers at once; a closed log refuses.
func TestSyncNow(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncNone, FsyncPeriodic} {
		t.Run(mode.String(), func(t *testing.T) {
			clock := clocktest.NewFake(time.Unix(0, 0))
			d := NewDisk(newRing(t), nil)
			l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: mode, FsyncInterval: time.Hour, Clock: clock})
			fill(t, d, l, 3, 1)
			waitFor(t, d, func() bool { return d.Idle() })
			if l.DurableOffset() != 0 || d.Stats().Fdatasyncs != 0 {
				t.Fatalf("durable %d, %d fdatasyncs before SyncNow", l.DurableOffset(), d.Stats().Fdatasyncs)
			}
			var a, b syncNowResult
			if err := l.SyncNow(a.set); err != nil {
				t.Fatal(err)
			}
			fill(t, d, l, 2, 1) // written before the fdatasync a's SyncNow queued runs
			if err := l.SyncNow(b.set); err != nil {
				t.Fatal(err)
			}
			waitFor(t, d, func() bool { return a.done && b.done })
			if a.err != nil || b.err != nil || a.durable < 3 || b.durable != 5 || l.DurableOffset() != 5 {
				t.Fatalf("a %+v b %+v durable %d", a, b, l.DurableOffset())
			}
			if n := d.Stats().Fdatasyncs; n < 1 || n > 2 {
				t.Fatalf("%d fdatasyncs for two SyncNow", n)
			}
			var c syncNowResult
			if err := l.SyncNow(c.set); err != nil || !c.done || c.durable != 5 {
				t.Fatalf("SyncNow of a synced log: %v %+v", err, c)
			}
			l.Close()
			if err := l.SyncNow(c.set); !errors.Is(err, ErrClosed) {
				t.Fatalf("SyncNow after Close: %v", err)
			}
		})
	}
}

// Batches staged before one fdatasync share it: ten appends, each followed by SyncNow,
// made before the disk runs, cost one fdatasync.
func TestSyncNowGroupCommits(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncNone})
	defer l.Close()
	res := make([]syncNowResult, 10)
	for i := range res {
		if err := l.Append([][]byte{payloadOf(i)}, 1, func(uint64, uint64, error) {}); err != nil {
			t.Fatal(err)
		}
		if err := l.SyncNow(res[i].set); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, d, func() bool { return res[len(res)-1].done })
	for i, r := range res {
		if !r.done || r.err != nil || r.durable != 10 {
			t.Fatalf("SyncNow %d: %+v", i, r)
		}
	}
	if n := d.Stats().Fdatasyncs; n != 1 {
		t.Fatalf("%d fdatasyncs for ten batches staged together", n)
	}
}

// A failed on-demand fdatasync answers its waiter with the failure (wrapping
// ErrStorageFailed), never a durable offset; a failed ballot write keeps the old ballot.
func TestSyncNowAndBallotFailures(t *testing.T) {
	ffs := &vfstest.FaultFS{}
	d := NewDisk(newRing(t), ffs)
	l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncNone})
	defer l.Close()
	if err := l.WriteBallot(Ballot{Generation: 1, Leader: "n1"}); err != nil {
		t.Fatal(err)
	}
	ffs.Fail(vfstest.OpRename, unix.EIO)
	if err := l.WriteBallot(Ballot{Generation: 2, Leader: "n2"}); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("ballot write with a failing rename: %v", err)
	}
	if got := l.ReadBallot(); got != (Ballot{1, "n1"}) {
		t.Fatalf("ballot after a failed write: %+v", got)
	}
	ffs.Heal()
	fill(t, d, l, 2, 1)
	ffs.Fail(vfstest.OpDatasync, unix.EIO)
	var r syncNowResult
	if err := l.SyncNow(r.set); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, func() bool { return r.done })
	if !errors.Is(r.err, ErrStorageFailed) || l.DurableOffset() != 0 {
		t.Fatalf("SyncNow with a failing fdatasync: %+v, durable %d", r, l.DurableOffset())
	}
}

package seglog

import (
	"errors"
	"testing"
	"time"

	"felix/ring"
)

// holdRing wraps a real ring: it records the order in which writes are
// prepared, by log id, and withholds the completions of one log's ops until
// released (a write to that log still in flight).
type holdRing struct {
	ring.Ring
	hold     uint64 // log id whose completions are withheld (0 = none)
	withheld []ring.Completion
	writes   []uint64 // log ids of prepared writes, in order
}

func (h *holdRing) Prepare(op *ring.Op) error {
	if op.Code == ring.OpWrite {
		h.writes = append(h.writes, op.UserData>>tagBits)
	}
	return h.Ring.Prepare(op)
}

func (h *holdRing) Wait(dst []ring.Completion, min int, timeout time.Duration) (int, error) {
	n, err := h.Ring.Wait(dst, min, timeout)
	kept := 0
	for _, c := range dst[:n] {
		if h.hold != 0 && c.UserData>>tagBits == h.hold {
			h.withheld = append(h.withheld, c)
			continue
		}
		dst[kept] = c
		kept++
	}
	if kept == 0 && h.hold == 0 && len(h.withheld) > 0 {
		kept = copy(dst, h.withheld)
		h.withheld = h.withheld[kept:]
	}
	return kept, err
}

// TestWriteAfterWaitsForTheDependency: with l.WriteAfter(dep), a record
// appended to l after one appended to dep is not written while dep's write
// is still in flight, and is written once it completes; without WriteAfter
// the same schedule writes l at once (the test's teeth).
func TestWriteAfterWaitsForTheDependency(t *testing.T) {
	for _, ordered := range []bool{true, false} {
		h := &holdRing{Ring: newRing(t)}
		needUring(t, h, "the gate is seen through writes prepared on the ring (buffered writes are plain pwrites)")
		d := NewDisk(h, nil)
		dep, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
		if err != nil {
			t.Fatal(err)
		}
		if ordered {
			if err := l.WriteAfter(dep); err != nil {
				t.Fatal(err)
			}
		}
		h.hold = dep.id
		var depDone, lDone bool
		if err := dep.Append([][]byte{[]byte("key")}, 1, func(_, _ uint64, err error) { depDone = err == nil }); err != nil {
			t.Fatal(err)
		}
		if err := l.Append([][]byte{[]byte("records")}, 1, func(_, _ uint64, err error) { lDone = err == nil }); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := d.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := d.Poll(10 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		wroteL := false
		for _, id := range h.writes {
			wroteL = wroteL || id == l.id
		}
		if ordered && (wroteL || lDone) {
			t.Fatalf("l was written (%v, acked %v) while dep's write was in flight; writes %v", wroteL, lDone, h.writes)
		}
		if !ordered && !wroteL {
			t.Fatalf("without WriteAfter, l was not written at once: the schedule does not test the gate (writes %v)", h.writes)
		}
		h.hold = 0
		waitFor(t, d, func() bool { return depDone && lDone })
		if h.writes[0] != dep.id {
			t.Fatalf("first write went to log %d, want dep %d", h.writes[0], dep.id)
		}
		if err := errors.Join(l.Close(), dep.Close()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWriteAfterFailsWithItsDependency: when dep fails, l's pending appends
// fail too (what they wait for will never land) and l refuses new ones.
func TestWriteAfterFailsWithItsDependency(t *testing.T) {
	d := NewDisk(nil, nil)
	dep, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteAfter(dep); err != nil {
		t.Fatal(err)
	}
	if err := l.WriteAfter(dep); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("second WriteAfter: %v, want ErrBadOptions", err)
	}
	var lErr error
	if err := dep.Append([][]byte{[]byte("key")}, 1, func(uint64, uint64, error) {}); err != nil {
		t.Fatal(err)
	}
	if err := l.Append([][]byte{[]byte("records")}, 1, func(_, _ uint64, err error) { lErr = err }); err != nil {
		t.Fatal(err)
	}
	dep.fail(storageErr("write", dep.dir, errors.New("injected")))
	if !errors.Is(lErr, ErrStorageFailed) {
		t.Fatalf("l's append after dep failed: %v, want ErrStorageFailed", lErr)
	}
	if err := l.Append([][]byte{[]byte("more")}, 1, func(uint64, uint64, error) {}); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("l.Append after dep failed: %v", err)
	}
}

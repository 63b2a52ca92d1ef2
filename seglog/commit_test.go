package seglog

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"felix/ring"
)

// SEGLOG_COMMIT_STYLE=after|linked|dsync runs the whole package with that on_commit commit
// kind (commit.go), so the crash and fault tests cover each.
func init() {
	switch os.Getenv("SEGLOG_COMMIT_STYLE") {
	case "after":
		commitStyle = commitAfter
	case "linked":
		commitStyle = commitLinked
	case "dsync":
		commitStyle = commitDSync
	}
}

// traceRing records what the log hands the ring and what it reaps, in order.
type traceRing struct {
	ring.Ring
	events []string
}

func (r *traceRing) Prepare(op *ring.Op) error {
	ev := "prepare " + op.Code.String()
	if op.Link {
		ev += "+link"
	}
	if op.DSync {
		ev += "+dsync"
	}
	r.events = append(r.events, ev)
	return r.Ring.Prepare(op)
}

func (r *traceRing) Wait(dst []ring.Completion, min int, timeout time.Duration) (int, error) {
	n, err := r.Ring.Wait(dst, min, timeout)
	for _, c := range dst[:n] {
		r.events = append(r.events, fmt.Sprintf("reap tag %d", c.UserData&(1<<tagBits-1)))
	}
	return n, err
}

// TestOnCommitWriteCarriesItsFlush: under on_commit one append's O_DIRECT write and the
// flush covering it go to the ring before the write's completion is reaped (a linked
// fdatasync, or an RWF_DSYNC write with no fdatasync at all); with commitAfter (the path
// before issue 22) the fdatasync is prepared only after the write was reaped, which the
// same check refuses. The append is durable when acknowledged, and Stats count one flush.
func TestOnCommitWriteCarriesItsFlush(t *testing.T) {
	defer func(k int) { commitStyle = k }(commitStyle)
	for _, c := range []struct {
		name string
		kind int
		want string
	}{
		{"linked", commitLinked, "prepare write+link,prepare fdatasync,reap tag 1,reap tag 2"},
		{"dsync", commitDSync, "prepare write+dsync,reap tag 1"},
		{"after", commitAfter, "prepare write,reap tag 1,prepare fdatasync,reap tag 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			commitStyle = c.kind
			tr := &traceRing{Ring: newRing(t)}
			needUring(t, tr, "O_DIRECT writes go through the ring only on io_uring")
			d := NewDisk(tr, nil)
			l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
			defer l.Close()
			appendWait(t, d, l, 1, []byte("warm")) // segment creation and first block
			tr.events = nil
			before := d.Stats().Fdatasyncs
			r := appendWait(t, d, l, 2, []byte("one"))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if got := strings.Join(tr.events, ","); got != c.want {
				t.Fatalf("ring saw %s, want %s", got, c.want)
			}
			if l.DurableOffset() != l.NextOffset() {
				t.Fatalf("acknowledged with durable_offset %d < next %d", l.DurableOffset(), l.NextOffset())
			}
			if n := d.Stats().Fdatasyncs - before; n != 1 {
				t.Fatalf("%d flushes counted for one commit", n)
			}
		})
	}
}

// TestLargeBufferedWritesGoThroughTheRing: under fsync none and periodic, a buffered write
// of at least bufferedRingMinBytes is an io_uring write (off the caller's thread), a smaller
// one a pwrite on the caller's thread; both read back. With bufferedViaRing off (the path
// before issue 22) the large write is a pwrite too, which the check refuses.
func TestLargeBufferedWritesGoThroughTheRing(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncNone, FsyncPeriodic} {
		t.Run(mode.String(), func(t *testing.T) {
			tr := &traceRing{Ring: newRing(t)}
			needUring(t, tr, "the syscall backend writes on the caller's thread either way")
			d := NewDisk(tr, nil)
			l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: mode, FsyncInterval: time.Hour})
			defer l.Close()
			small, large := []byte("small"), make([]byte, bufferedRingMinBytes)
			for i := range large {
				large[i] = byte(i)
			}
			for _, c := range []struct {
				payload []byte
				ring    bool
			}{{small, false}, {large, true}, {small, false}} {
				tr.events = nil
				if r := appendWait(t, d, l, 1, c.payload); r.err != nil {
					t.Fatal(r.err)
				}
				if got := strings.Contains(strings.Join(tr.events, ","), "prepare write"); got != c.ring {
					t.Fatalf("%d-byte append: ring write %v, want %v (ring saw %v)", len(c.payload), got, c.ring, tr.events)
				}
			}
			got := readAll(t, l, 0)
			if len(got) != 3 || got[1].payload != string(large) || got[2].payload != "small" {
				t.Fatalf("read back %d records", len(got))
			}
		})
	}
}

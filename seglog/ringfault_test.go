package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"felix/ring"
	"felix/ring/ringtest"

	"golang.org/x/sys/unix"
)

// TestRingPathFaults: a failed write or fdatasync completion from the ring
// fails the append with ErrStorageFailed and nothing later is acknowledged;
// the log reopens with every acknowledged record.
func TestRingPathFaults(t *testing.T) {
	for _, c := range []struct {
		code  ring.OpCode
		errno unix.Errno
	}{{ring.OpWrite, unix.EIO}, {ring.OpWrite, unix.ENOSPC}, {ring.OpFdatasync, unix.EIO}} {
		t.Run(fmt.Sprintf("%s-%v", c.code, c.errno), func(t *testing.T) {
			fr := ringtest.NewMisreport(newRing(t), nil)
			d := NewDisk(fr, nil)
			dir := t.TempDir()
			l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
			if err != nil {
				t.Fatal(err)
			}
			var acked []rec
			for i := 0; i < 5; i++ {
				r := appendWait(t, d, l, 1, payloadOf(i))
				if r.err != nil {
					t.Fatal(r.err)
				}
				acked = append(acked, rec{r.first, 1, string(payloadOf(i))})
			}
			if c.code == ring.OpWrite {
				needUring(t, fr, "buffered writes do not go through the ring on this backend")
			}
			fr.SetFault(func(op *ring.Op) (int32, bool) { return -int32(c.errno), op.Code == c.code })
			var errs []error
			for i := 0; i < 3; i++ {
				l.Append([][]byte{[]byte("lost")}, 2, func(_, _ uint64, err error) { errs = append(errs, err) })
			}
			waitFor(t, d, func() bool { return len(errs) == 3 })
			for _, err := range errs {
				if !errors.Is(err, ErrStorageFailed) || !errors.Is(err, c.errno) {
					t.Fatalf("callback error %v", err)
				}
			}
			if l.CommittedOffset() != 5 {
				t.Fatalf("committed %d after a failure", l.CommittedOffset())
			}
			l.Close()
			l, err = NewDisk(newRing(t), nil).Open(Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			got := readAll(t, l, 0)
			if len(got) < 5 || fmt.Sprint(got[:5]) != fmt.Sprint(acked) {
				t.Fatalf("reopened: %v", got)
			}
			_ = bytes.MinRead
		})
	}
}

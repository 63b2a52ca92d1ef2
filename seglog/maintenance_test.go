package seglog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/clock/clocktest"
)

func openTest(t *testing.T, d *Disk, o Options) *Log {
	t.Helper()
	l, err := d.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func fill(t *testing.T, d *Disk, l *Log, n int, ts int64) {
	t.Helper()
	for i := 0; i < n; i++ {
		if r := appendWait(t, d, l, ts, payloadOf(int(l.NextOffset()))); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestTruncateSuffix(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	o := Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096}
	l := openTest(t, d, o)
	fill(t, d, l, 100, 1)
	if err := l.AddEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.AddEpoch(2, 60); err != nil {
		t.Fatal(err)
	}
	if err := l.AddEpoch(2, 70); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("non-increasing generation accepted: %v", err)
	}
	if err := l.Append([][]byte{[]byte("x")}, 1, func(uint64, uint64, error) {}); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateSuffix(50); !errors.Is(err, ErrBusy) {
		t.Fatalf("truncate with staged appends: %v", err)
	}
	waitFor(t, d, func() bool { return d.Idle() })
	if err := l.TruncateSuffix(45); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 45 || l.CommittedOffset() != 45 || fmt.Sprint(l.Epochs()) != "[{1 0}]" {
		t.Fatalf("next %d committed %d epochs %v", l.NextOffset(), l.CommittedOffset(), l.Epochs())
	}
	if r := appendWait(t, d, l, 2, []byte("new-45")); r.err != nil || r.first != 45 {
		t.Fatalf("%+v", r)
	}
	got := readAll(t, l, 0)
	if len(got) != 46 || got[45].payload != "new-45" || got[44].payload != string(payloadOf(44)) {
		t.Fatalf("after truncate: %d records", len(got))
	}
	l.Close()
	l = openTest(t, d, Options{Dir: dir, VerifyAllOnOpen: true, SegmentBytes: 4096})
	defer l.Close()
	if l.NextOffset() != 46 || fmt.Sprint(l.Epochs()) != "[{1 0}]" {
		t.Fatalf("reopened next %d epochs %v", l.NextOffset(), l.Epochs())
	}
	if _, err := Verify(dir, &bytes.Buffer{}, ToolOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateSuffix(46); err != nil {
		t.Fatal("truncate at the tail must be a no-op")
	}
}

func TestCorruptEpochsReadAsEmpty(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: dir})
	l.AddEpoch(3, 0)
	l.Close()
	b, _ := os.ReadFile(filepath.Join(dir, EpochsFileName))
	os.WriteFile(filepath.Join(dir, EpochsFileName), b[:len(b)-2], 0o644)
	l = openTest(t, d, Options{Dir: dir})
	defer l.Close()
	if len(l.Epochs()) != 0 {
		t.Fatal("short epochs file must read as empty")
	}
}

func TestRetention(t *testing.T) {
	now := time.Unix(1000, 0)
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), SegmentBytes: 4096, RetentionBytes: 3 * 4096, FsyncMode: FsyncNone})
	defer l.Close()
	fill(t, d, l, 200, now.UnixMicro())
	n, err := l.EnforceRetention(now)
	if err != nil || n == 0 {
		t.Fatalf("removed %d: %v", n, err)
	}
	e := l.EarliestOffset()
	if e == 0 || len(l.segs) > 4 {
		t.Fatalf("earliest %d segments %d", e, len(l.segs))
	}
	var te *TrimmedError
	if err := l.Read(0, 100, func(uint64, int64, []byte) bool { return true }); !errors.As(err, &te) || te.Oldest != e || te.Requested != 0 {
		t.Fatalf("read below earliest: %v", err)
	}
	if got := readAll(t, l, e); len(got) != int(200-e) {
		t.Fatalf("after retention %d records", len(got))
	}
	// By age: everything sealed is older than an hour.
	l.opts.RetentionBytes, l.opts.RetentionAge = 0, time.Hour
	if n, err := l.EnforceRetention(now.Add(2 * time.Hour)); err != nil || len(l.segs) != 1 || n == 0 {
		t.Fatalf("age retention removed %d, %d segments left, %v", n, len(l.segs), err)
	}
}

func TestCompactKeepsOffsets(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: dir, SegmentBytes: 4096, FsyncMode: FsyncOnCommit})
	fill(t, d, l, 100, 1)
	var first uint64
	done := false
	if err := l.Compact([][]byte{[]byte("live-a"), []byte("live-b")}, 5, func(f, _ uint64, err error) {
		first, done = f, err == nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, func() bool { return done })
	if first != 100 || l.EarliestOffset() != 100 || len(l.segs) != 1 {
		t.Fatalf("first %d earliest %d segments %d", first, l.EarliestOffset(), len(l.segs))
	}
	l.Close()
	l = openTest(t, d, Options{Dir: dir, SegmentBytes: 4096})
	defer l.Close()
	if got := fmt.Sprint(readAll(t, l, 100)); got != "[{100 5 live-a} {101 5 live-b}]" || l.EarliestOffset() != 100 {
		t.Fatal(got)
	}
}

func TestResetAndBootstrapBase(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: dir, BaseOffset: 500})
	if l.NextOffset() != 500 || l.EarliestOffset() != 500 {
		t.Fatalf("bootstrap base: next %d", l.NextOffset())
	}
	fill(t, d, l, 5, 1)
	l.AddEpoch(1, 500)
	if err := l.Reset(2000); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 2000 || l.EarliestOffset() != 2000 || len(l.Epochs()) != 0 {
		t.Fatal("reset")
	}
	fill(t, d, l, 2, 1)
	l.Close()
	l = openTest(t, d, Options{Dir: dir})
	defer l.Close()
	if l.EarliestOffset() != 2000 || l.NextOffset() != 2002 || len(l.Epochs()) != 0 {
		t.Fatalf("reopened earliest %d next %d", l.EarliestOffset(), l.NextOffset())
	}
}

func TestPeriodicFsyncWithFakeClock(t *testing.T) {
	clock := clocktest.NewFake(time.Unix(0, 0))
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncPeriodic, FsyncInterval: 250 * time.Millisecond, Clock: clock})
	defer l.Close()
	fill(t, d, l, 3, 1)
	if l.CommittedOffset() != 3 || l.DurableOffset() != 0 {
		t.Fatalf("committed %d durable %d before the interval", l.CommittedOffset(), l.DurableOffset())
	}
	clock.Advance(300 * time.Millisecond)
	waitFor(t, d, func() bool { return l.DurableOffset() == 3 })
	if d.Stats().Fdatasyncs != 1 {
		t.Fatalf("stats %+v", d.Stats())
	}
}

func TestReaderFollowsTailConcurrently(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), SegmentBytes: 8192, FsyncMode: FsyncOnCommit})
	defer l.Close()
	r := l.Reader()
	defer r.Close()
	const total = 400
	errc := make(chan error, 1)
	go func() {
		next := uint64(0)
		for next < total {
			c, err := r.WaitCommitted(context.Background(), next)
			if err != nil {
				errc <- err
				return
			}
			err = r.Read(next, 1<<20, func(off uint64, _ int64, p []byte) bool {
				if off != next || string(p) != string(payloadOf(int(off))) {
					errc <- fmt.Errorf("offset %d (want %d) payload %q", off, next, p)
				}
				next = off + 1
				return true
			})
			if err != nil {
				errc <- err
				return
			}
			if c2 := r.CommittedOffset(); next > c2 || c2 < c {
				errc <- fmt.Errorf("read to %d past committed %d (was %d)", next, c2, c)
				return
			}
		}
		errc <- nil
	}()
	for i := 0; i < total; i += 4 {
		ps := [][]byte{payloadOf(i), payloadOf(i + 1), payloadOf(i + 2), payloadOf(i + 3)}
		if err := l.Append(ps, 1, func(uint64, uint64, error) {}); err != nil {
			t.Fatal(err)
		}
		d.Flush()
		d.Poll(0)
	}
	waitFor(t, d, func() bool { return l.CommittedOffset() == total })
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reader never caught up")
	}
}

func TestRunState(t *testing.T) {
	root := t.TempDir()
	fsys := OSFS{}
	id1, renewed, err := BeginRun(fsys, root, FsyncPeriodic, nil)
	if err != nil || renewed {
		t.Fatalf("first start: renewed %v %v", renewed, err)
	}
	if err := EndRun(fsys, root, id1); err != nil {
		t.Fatal(err)
	}
	id2, renewed, _ := BeginRun(fsys, root, FsyncPeriodic, nil)
	if renewed || id2 != id1 {
		t.Fatal("clean stop must keep the id")
	}
	// No EndRun: a crash. on_commit keeps the id, periodic/none renew it.
	id3, renewed, _ := BeginRun(fsys, root, FsyncOnCommit, nil)
	if renewed || id3 != id1 {
		t.Fatal("crash under on_commit must keep the id")
	}
	id4, renewed, _ := BeginRun(fsys, root, FsyncNone, nil)
	if !renewed || id4 == id1 {
		t.Fatal("crash under none must renew the id")
	}
	st, _ := ReadRunState(fsys, root)
	if !st.Found || st.CleanStop || st.ID != id4 {
		t.Fatalf("%+v", st)
	}
	if id5, err := RenewStorageID(fsys, root, nil); err != nil || id5 == id4 {
		t.Fatal("renew")
	}
}

func TestDirectWritesOnUring(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
	defer l.Close()
	if got := l.activeSeg().direct; got != (d.Backend() == "uring") {
		t.Fatalf("backend %s direct %v", d.Backend(), got)
	}
}

func TestBufferedUnlessOnCommit(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	for _, m := range []FsyncMode{FsyncPeriodic, FsyncNone} {
		l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: m})
		if l.activeSeg().direct {
			t.Fatalf("%s writes O_DIRECT", m)
		}
		l.Close()
	}
}

// TestReadStopsAtCommittedDespiteInFlightBytes: bytes past the committed
// offset (a write in flight) never turn a read into a corruption error.
func TestReadStopsAtCommittedDespiteInFlightBytes(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l := openTest(t, d, Options{Dir: t.TempDir(), FsyncMode: FsyncNone})
	defer l.Close()
	fill(t, d, l, 5, 1)
	f, err := os.OpenFile(l.activeSeg().path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half-written-record-bytes-that-fail-their-crc!!"))
	f.Close()
	if got := readAll(t, l, 0); len(got) != 5 {
		t.Fatalf("got %d records", len(got))
	}
}

// TestRetentionAfterReopen: segments found at open count as sealed.
func TestRetentionAfterReopen(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	o := Options{Dir: dir, SegmentBytes: 4096, FsyncMode: FsyncOnCommit}
	l := openTest(t, d, o)
	fill(t, d, l, 100, 1)
	l.Close()
	o.RetentionBytes = 4096
	l = openTest(t, d, o)
	defer l.Close()
	if n, err := l.EnforceRetention(time.Unix(0, 0)); err != nil || n == 0 || len(l.segs) != 1 {
		t.Fatalf("removed %d, %d left: %v", n, len(l.segs), err)
	}
	// Truncating into the (now only, reopened) segment still works.
	if err := l.TruncateSuffix(l.NextOffset() - 1); err != nil {
		t.Fatal(err)
	}
	if r := appendWait(t, d, l, 1, []byte("x")); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestTruncateIntoSealedSegmentAfterReopen reopens a sealed segment for appends.
func TestTruncateIntoSealedSegmentAfterReopen(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	o := Options{Dir: dir, SegmentBytes: 4096, FsyncMode: FsyncOnCommit}
	l := openTest(t, d, o)
	fill(t, d, l, 100, 1)
	l.Close()
	l = openTest(t, d, o)
	defer l.Close()
	if err := l.TruncateSuffix(10); err != nil {
		t.Fatal(err)
	}
	fill(t, d, l, 5, 2)
	if got := readAll(t, l, 0); len(got) != 15 {
		t.Fatalf("%d records", len(got))
	}
	if _, err := Verify(dir, &bytes.Buffer{}, ToolOptions{}); err != nil {
		t.Fatal(err)
	}
}

package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"felix/ring"
)

func payloadOf(i int) []byte {
	return []byte(fmt.Sprintf("payload-%06d-%s", i, bytes.Repeat([]byte{'x'}, i%50)))
}

func TestAppendReadReopen(t *testing.T) {
	for _, mode := range []FsyncMode{FsyncOnCommit, FsyncPeriodic, FsyncNone, FsyncOnCommit + 10} {
		prezero := int64(0)
		if mode == FsyncOnCommit+10 {
			mode, prezero = FsyncOnCommit, 16<<10
		}
		t.Run(fmt.Sprintf("%s-prezero%d", mode, prezero), func(t *testing.T) {
			dir := t.TempDir()
			d := NewDisk(newRing(t), nil)
			l, err := d.Open(Options{Dir: dir, FsyncMode: mode, SegmentBytes: 8192, PrezeroBytes: prezero})
			if err != nil {
				t.Fatal(err)
			}
			var want []rec
			for i := 0; i < 300; i += 3 {
				r := appendWait(t, d, l, int64(i), payloadOf(i), payloadOf(i+1), payloadOf(i+2))
				if r.err != nil || r.first != uint64(i) || r.last != uint64(i+2) {
					t.Fatalf("append %d: %+v", i, r)
				}
				for k := 0; k < 3; k++ {
					want = append(want, rec{uint64(i + k), int64(i), string(payloadOf(i + k))})
				}
			}
			if got := readAll(t, l, 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read back %d records, want %d", len(got), len(want))
			}
			if got := readAll(t, l, 137); len(got) != 300-137 || got[0].off != 137 {
				t.Fatalf("read from 137: %d records", len(got))
			}
			if mode == FsyncOnCommit && l.DurableOffset() != 300 {
				t.Fatalf("durable %d under on_commit", l.DurableOffset())
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, err := d.Open(Options{Dir: dir, FsyncMode: mode, SegmentBytes: 8192, VerifyAllOnOpen: true})
			if err != nil {
				t.Fatal(err)
			}
			defer l2.Close()
			if l2.NextOffset() != 300 || l2.Recovery().Segments < 3 {
				t.Fatalf("reopened next %d, recovery %+v", l2.NextOffset(), l2.Recovery())
			}
			if got := readAll(t, l2, 0); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatal("reopened log differs")
			}
			res, err := Verify(dir, &bytes.Buffer{}, ToolOptions{})
			if err != nil || res.Records != 300 {
				t.Fatalf("verify: %+v %v", res, err)
			}
		})
	}
}

func TestSyncDiskWithoutRing(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(nil, nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if r := appendWait(t, d, l, 1, payloadOf(i)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if got := readAll(t, l, 0); len(got) != 10 {
		t.Fatalf("got %d", len(got))
	}
	if s := d.Stats(); s.Fdatasyncs == 0 || s.GroupCommitFanIn() < 1 {
		t.Fatalf("stats %+v", s)
	}
	l.Close()
}

func TestGroupCommitOneSyncCoversManyAppends(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := 0
	for i := 0; i < 64; i++ {
		if err := l.Append([][]byte{payloadOf(i)}, 1, func(_, _ uint64, err error) {
			if err != nil {
				t.Error(err)
			}
			done++
		}); err != nil {
			t.Fatal(err)
		}
	}
	if l.CommittedOffset() != 0 {
		t.Fatal("committed before any write")
	}
	waitFor(t, d, func() bool { return done == 64 })
	s := d.Stats()
	if s.Fdatasyncs != 1 || s.SyncedAppends != 64 || s.Writes != 1 {
		t.Fatalf("want one write and one fdatasync for 64 appends, got %+v", s)
	}
}

func TestRolloverAndOversizedRecord(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	small := bytes.Repeat([]byte{'s'}, 1000)
	big := bytes.Repeat([]byte{'B'}, 10000)
	for _, p := range [][]byte{small, small, big, small} {
		if r := appendWait(t, d, l, 1, p); r.err != nil {
			t.Fatal(r.err)
		}
	}
	l.Close()
	res, err := Inspect(dir, &bytes.Buffer{}, ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var counts []int64
	for _, s := range res.Segments {
		counts = append(counts, s.Records)
	}
	if fmt.Sprint(counts) != "[2 1 1]" {
		t.Fatalf("records per segment %v, want [2 1 1] (big record alone)", counts)
	}
	if err := (&Log{}).Append(nil, 0, nil); err == nil {
		t.Fatal("append on a zero log must fail")
	}
}

func TestRecordTooLarge(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Append([][]byte{make([]byte, MaxPayloadBytes+1)}, 0, nil); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("got %v", err)
	}
	if err := l.Append(nil, 0, nil); !errors.Is(err, ErrEmptyBatch) {
		t.Fatalf("got %v", err)
	}
	if l.NextOffset() != 0 {
		t.Fatal("rejected batch consumed offsets")
	}
}

func TestDirectoryNames(t *testing.T) {
	s := ShardDir("/data", ShardKey{Kind: ShardStream, Tenant: "acme", Namespace: "default", Name: "orders"})
	c := ShardDir("/data", ShardKey{Kind: ShardCache, Tenant: "acme", Namespace: "default", Name: "orders"})
	if s == c || filepath.Base(s) != "acme_default_orders_0-0d3aed4b998d2798" {
		t.Fatalf("stream %s cache %s", s, c)
	}
	inc := ShardDir("/data", ShardKey{Tenant: "a.b", Namespace: "", Name: "x", Shard: 2, Incarnation: 3})
	if filepath.Base(inc) != "a_b___x_2-"+fmt.Sprintf("%016x", shardHash("a.b", "", "x", 2))+"~i3" {
		t.Fatal(inc)
	}
	if CompanionDir(s, CompanionGroups) != filepath.Join(s, "groups") {
		t.Fatal("companion dir")
	}
	if SegmentFileName(1) != "00000000000000000001.log" || IndexFileName(1) != "00000000000000000001.index" {
		t.Fatal("file names")
	}
	_ = os.Getpid
}

// TestAppendAllocationsDoNotScaleWithRecords: staging a 64-record batch costs
// no more allocations than a 1-record batch (no per-record allocation).
func TestAppendAllocationsDoNotScaleWithRecords(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: t.TempDir(), FsyncMode: FsyncNone})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := func(uint64, uint64, error) {}
	measure := func(n int) float64 {
		ps := make([][]byte, n)
		for i := range ps {
			ps[i] = make([]byte, 128)
		}
		return testing.AllocsPerRun(200, func() {
			if err := l.Append(ps, 1, done); err != nil {
				t.Fatal(err)
			}
		})
	}
	one, many := measure(1), measure(64)
	if many > 1 || many > one+0.5 {
		t.Fatalf("allocations per Append: batch 1 %.2f, batch 64 %.2f", one, many)
	}
	waitFor(t, d, func() bool { return d.Idle() })
}

// TestLargeWriteSplitIntoParts: a multi-MiB O_DIRECT write goes out as several
// ops in flight together and completes as one write.
func TestLargeWriteSplitIntoParts(t *testing.T) {
	d := NewDisk(newRing(t), nil)
	dir := t.TempDir()
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	big := [][]byte{bytes.Repeat([]byte{1}, 1<<20), bytes.Repeat([]byte{2}, 1<<20), bytes.Repeat([]byte{3}, 1<<20+5)}
	if r := appendWait(t, d, l, 1, big...); r.err != nil || r.last != 2 {
		t.Fatalf("%+v", r)
	}
	if s := d.Stats(); s.Writes != 1 {
		t.Fatalf("writes %d", s.Writes)
	}
	l.Close()
	l, err = d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := readAll(t, l, 0)
	if len(got) != 3 || got[2].payload != string(big[2]) {
		t.Fatalf("read %d records", len(got))
	}
}

// TestNewerVersionRecords: a generation-start record rolls the log onto a v4
// segment, a record with its publisher onto v6; readers skip non-data records.
func TestNewerVersionRecords(t *testing.T) {
	dir := t.TempDir()
	d := NewDisk(newRing(t), nil)
	l, err := d.Open(Options{Dir: dir, FsyncMode: FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	appendWait(t, d, l, 1, []byte("a"), []byte("b"))
	var genOff uint64
	ok := false
	if err := l.AppendRecord(Record{Kind: KindGenerationStart, TimestampMicros: 2, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 2, 'n', '1'}},
		func(f, _ uint64, err error) { genOff, ok = f, err == nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, func() bool { return ok })
	appendWait(t, d, l, 3, []byte("c"))
	ok = false
	if err := l.AppendRecord(Record{Publisher: []byte("svc"), TimestampMicros: 4, Payload: []byte("d")}, func(_, _ uint64, err error) { ok = err == nil }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, d, func() bool { return ok })
	if err := l.AppendRecord(Record{Kind: 9}, nil); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("kind 9: %v", err)
	}
	l.Close()
	if genOff != 2 {
		t.Fatalf("generation start at %d", genOff)
	}
	res, err := Inspect(dir, &bytes.Buffer{}, ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var versions []uint16
	for _, s := range res.Segments {
		versions = append(versions, s.Version)
	}
	if fmt.Sprint(versions) != "[3 4 6]" {
		t.Fatalf("segment versions %v", versions)
	}
	l, err = d.Open(Options{Dir: dir, VerifyAllOnOpen: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := fmt.Sprint(readAll(t, l, 0)); got != "[{0 1 a} {1 1 b} {3 3 c} {4 4 d}]" {
		t.Fatal(got)
	}
	var pubs []string
	if err := l.ReadRecords(3, 1<<20, func(r *Record) bool { pubs = append(pubs, fmt.Sprintf("%d:%s", r.Offset, r.Publisher)); return true }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pubs) != "[3: 4:svc]" {
		t.Fatalf("publishers %v", pubs)
	}
	if v, err := Verify(dir, &bytes.Buffer{}, ToolOptions{}); err != nil || v.Records != 5 {
		t.Fatalf("verify %+v %v", v, err)
	}
}

// TestTinyRingManyLogs: with a ring of 2 in-flight slots, refused submissions
// are retried and every append of every log completes.
func TestTinyRingManyLogs(t *testing.T) {
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend), Entries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	d := NewDisk(r, nil)
	var logs []*Log
	for i := 0; i < 6; i++ {
		l, err := d.Open(Options{Dir: filepath.Join(t.TempDir(), fmt.Sprint(i)), FsyncMode: FsyncOnCommit, SegmentBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs = append(logs, l)
	}
	done := 0
	for round := 0; round < 20; round++ {
		for _, l := range logs {
			if err := l.Append([][]byte{payloadOf(round)}, 1, func(_, _ uint64, err error) {
				if err != nil {
					t.Error(err)
				}
				done++
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, d, func() bool { return done == 120 })
	for _, l := range logs {
		if got := readAll(t, l, 0); len(got) != 20 {
			t.Fatalf("%d records", len(got))
		}
	}
}

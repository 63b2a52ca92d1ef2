package core

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"felix/proto"
	"felix/seglog"
)

// everyLog is one LogAddr per log a shard has: the stream shard's four and
// the cache shard's two.
func everyLog() []LogAddr {
	stream := LogAddr{Kind: ShardStream, Name: testStream, Shard: 1}
	cache := LogAddr{Kind: ShardCache, Name: testCache.asStream(), Shard: 1}
	var out []LogAddr
	for _, l := range []proto.ReplicaLog{proto.LogStream, proto.LogProducers, proto.LogGroupCursors, proto.LogDeadLetters} {
		a := stream
		a.Log = l
		out = append(out, a)
	}
	for _, l := range []proto.ReplicaLog{proto.LogCache, proto.LogCounters} {
		a := cache
		a.Log = l
		out = append(out, a)
	}
	return out
}

// copyDisk is a coreDisk under test with a way to drive its completions.
type copyDisk struct {
	coreDisk
	drive func(t *testing.T, cond func() bool)
}

// copyDisks returns two production disks over two data dirs.
func copyDisks(t *testing.T) (src, dst copyDisk) {
	a, b := openTestSeglogDisk(t), openTestSeglogDisk(t)
	return copyDisk{a, a.driveUntil}, copyDisk{b, b.driveUntil}
}

// fakeCopyDisk is a fake disk over a store of its own.
func fakeCopyDisk() copyDisk {
	fake := newFakeDisk(newFakeStore())
	return copyDisk{fake, func(t *testing.T, cond func() bool) {
		for i := 0; !cond(); i++ {
			if i > 100 {
				t.Fatal("condition never met")
			}
			_ = fake.Flush()
			_ = fake.Poll(0)
		}
	}}
}

// logDir is where the production disk keeps addr's log under root: the
// directory names of spec/storage-format.md §6, unchanged by LogAddr.
func logDir(root string, addr LogAddr) string {
	key := seglog.ShardKey{Kind: seglog.ShardStream, Tenant: addr.Name.Tenant, Namespace: addr.Name.Namespace,
		Name: addr.Name.Stream, Shard: uint32(addr.Shard)}
	if addr.Kind == ShardCache {
		key.Kind = seglog.ShardCache
	}
	dir := seglog.ShardDir(root, key)
	switch addr.Log {
	case proto.LogProducers:
		return seglog.CompanionDir(dir, companionProducers)
	case proto.LogGroupCursors:
		return seglog.CompanionDir(dir, seglog.CompanionGroups)
	case proto.LogDeadLetters:
		return seglog.CompanionDir(dir, seglog.CompanionDeadLetters)
	case proto.LogCounters:
		return seglog.CompanionDir(dir, seglog.CompanionCounters)
	}
	return dir
}

// waitAppend runs stage (an append taking done) and drives d until done ran
// without error.
func (d copyDisk) waitAppend(t *testing.T, stage func(done func(first, last uint64, err error)) error) {
	t.Helper()
	ok := false
	if err := stage(func(_, _ uint64, err error) {
		if err != nil {
			t.Errorf("append completion: %v", err)
		}
		ok = true
	}); err != nil {
		t.Fatal(err)
	}
	d.drive(t, func() bool { return ok })
}

// writeEveryKind writes data records (Append, and AppendRecord with, with an
// empty and without a publisher), a generation start and a commit marker to
// the empty log l, and returns them as l must hold them.
func writeEveryKind(t *testing.T, d copyDisk, l shardLog) []seglog.Record {
	t.Helper()
	big := bytes.Repeat([]byte{0xa5}, 5000)
	d.waitAppend(t, func(done func(uint64, uint64, error)) error {
		return l.Append([][]byte{[]byte("first"), {}}, 100, done)
	})
	want := []seglog.Record{{Offset: 0, TimestampMicros: 100, Payload: []byte("first")}, {Offset: 1, TimestampMicros: 100, Payload: []byte{}}}
	for _, r := range []seglog.Record{
		{Kind: seglog.KindGenerationStart, TimestampMicros: 101, Payload: []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 'n', '1'}},
		{Kind: seglog.KindData, TimestampMicros: 102, Publisher: []byte("billing"), Payload: []byte("with publisher")},
		{Kind: seglog.KindData, TimestampMicros: 103, Payload: []byte("no publisher")},
		{Kind: seglog.KindCommitMarker, TimestampMicros: 104, Payload: []byte("commit")},
		{Kind: seglog.KindData, TimestampMicros: 105, Publisher: []byte{}, Payload: []byte("empty publisher")},
	} {
		d.waitAppend(t, func(done func(uint64, uint64, error)) error { return l.AppendRecord(r, done) })
		r.Offset = uint64(len(want))
		want = append(want, r)
	}
	d.waitAppend(t, func(done func(uint64, uint64, error)) error {
		return l.Append([][]byte{big, []byte("last")}, 106, done)
	})
	return append(want, seglog.Record{Offset: 7, TimestampMicros: 106, Payload: big},
		seglog.Record{Offset: 8, TimestampMicros: 106, Payload: []byte("last")})
}

// readRaw returns deep copies of every committed record of l, in pages of
// at most maxBytes.
func readRaw(t *testing.T, l shardLog, maxBytes int) []seglog.Record {
	t.Helper()
	var out []seglog.Record
	for from := l.EarliestOffset(); from < l.CommittedOffset(); {
		n := 0
		if err := l.ReadRaw(from, maxBytes, func(r *seglog.Record) bool {
			c := *r
			c.Payload = bytes.Clone(r.Payload)
			if r.Publisher != nil {
				c.Publisher = append([]byte{}, r.Publisher...)
			}
			out = append(out, c)
			from, n = r.Offset+1, n+1
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("ReadRaw(%d) delivered nothing below committed %d", from, l.CommittedOffset())
		}
	}
	return out
}

// sameRawRecords fails t unless got and want hold the same records offset by
// offset: kind, timestamp, publisher (absent and empty told apart) and
// payload, byte by byte.
func sameRawRecords(t *testing.T, where string, got, want []seglog.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", where, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Offset != w.Offset || g.Kind != w.Kind || g.TimestampMicros != w.TimestampMicros ||
			(g.Publisher == nil) != (w.Publisher == nil) || !bytes.Equal(g.Publisher, w.Publisher) ||
			!bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("%s: offset %d holds %+v, want %+v", where, w.Offset, g, w)
		}
	}
}

// TestRawCopyOfEveryLogIsVerbatim: for every log kind, opened through
// coreDisk.OpenLog by its LogAddr (on the production disk in its
// storage-format directory), records of every record kind copied through
// ReadRaw and AppendAt (pages of 64 bytes, so several batches) into the same
// log of a second data dir read back identical, offset by offset and byte by
// byte, on both disks and after both reopen; the data records read the same
// through ReadCommitted. The fake disk passes the same test.
func TestRawCopyOfEveryLogIsVerbatim(t *testing.T) {
	for _, disk := range []string{"seglog", "fake"} {
		for _, addr := range everyLog() {
			t.Run(disk+"/"+addr.Log.String(), func(t *testing.T) { rawCopy(t, disk, addr) })
		}
	}
}

// rawCopy is TestRawCopyOfEveryLogIsVerbatim for one disk and log.
func rawCopy(t *testing.T, disk string, addr LogAddr) {
	src, dst := fakeCopyDisk(), fakeCopyDisk()
	if disk == "seglog" {
		src, dst = copyDisks(t)
	}
	from, err := src.OpenLog(addr, logOptions{})
	if err != nil {
		t.Fatal(err)
	}
	to, err := dst.OpenLog(addr, logOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := src.coreDisk.(*seglogDisk); ok {
		if _, err := os.Stat(logDir(d.root, addr)); err != nil {
			t.Fatalf("%v is not in its storage-format directory: %v", addr, err)
		}
	}
	writeEveryKind(t, src, from)
	want := readRaw(t, from, 1<<20)
	if len(want) != 9 {
		t.Fatalf("the source log holds %d records, want 9", len(want))
	}
	copyRaw(t, from, to, dst)
	sameRawRecords(t, "copy", readRaw(t, to, 1<<20), want)
	_ = from.Close()
	_ = to.Close()
	for _, d := range []copyDisk{src, dst} {
		l, err := d.OpenLog(addr, logOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameRawRecords(t, "reopened", readRaw(t, l, 1<<20), want)
		if got := dataOffsets(t, l); got != "[0 1 3 4 6 7 8]" {
			t.Fatalf("ReadCommitted delivers offsets %s, want the data records", got)
		}
		_ = l.Close()
	}
}

// copyRaw copies every committed record of from to the tail of to, one
// AppendAt per ReadRaw page of 64 bytes.
func copyRaw(t *testing.T, from, to shardLog, d copyDisk) {
	t.Helper()
	for to.NextOffset() < from.CommittedOffset() {
		page := readRawPage(t, from, to.NextOffset(), 64)
		d.waitAppend(t, func(done func(uint64, uint64, error)) error {
			return to.AppendAt(page[0].Offset, page, done)
		})
	}
}

// readRawPage is one ReadRaw call's records from from, deep-copied.
func readRawPage(t *testing.T, l shardLog, from uint64, maxBytes int) []seglog.Record {
	t.Helper()
	var page []seglog.Record
	if err := l.ReadRaw(from, maxBytes, func(r *seglog.Record) bool {
		c := *r
		c.Payload = bytes.Clone(r.Payload)
		c.Publisher = bytes.Clone(r.Publisher)
		page = append(page, c)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(page) == 0 {
		t.Fatalf("ReadRaw(%d): nothing", from)
	}
	return page
}

// dataOffsets lists the offsets ReadCommitted delivers from the earliest.
func dataOffsets(t *testing.T, l shardLog) string {
	t.Helper()
	var offs []uint64
	if err := readWithOffsets(l, func(off uint64, _ []byte) error { offs = append(offs, off); return nil }); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(offs)
}

// TestAppendAtRefusesOffTheTail: on every log kind, on the production disk
// and on the fake, AppendAt refuses a first offset below and above the tail
// and records that are not consecutive, with an error wrapping
// seglog.ErrNotTail, storing nothing (no callback, the tail unchanged, the
// records read back as before); at the tail it stores.
func TestAppendAtRefusesOffTheTail(t *testing.T) {
	disks := map[string]copyDisk{"seglog": {}, "fake": fakeCopyDisk()}
	for name, d := range disks {
		for _, addr := range everyLog() {
			t.Run(name+"/"+addr.Log.String(), func(t *testing.T) {
				if name == "seglog" {
					d, _ = copyDisks(t)
				}
				l, err := d.OpenLog(addr, logOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				refuseOffTheTail(t, d, l)
			})
		}
	}
}

// refuseOffTheTail checks l's AppendAt refusals after two records.
func refuseOffTheTail(t *testing.T, d copyDisk, l shardLog) {
	t.Helper()
	d.waitAppend(t, func(done func(uint64, uint64, error)) error {
		return l.Append([][]byte{[]byte("a"), []byte("b")}, 1, done)
	})
	before := readRaw(t, l, 1<<20)
	rec := func(off uint64) seglog.Record {
		return seglog.Record{Offset: off, TimestampMicros: 9, Payload: []byte("x")}
	}
	called := false
	for _, c := range []struct {
		name  string
		first uint64
		recs  []seglog.Record
	}{
		{"below the tail", 1, []seglog.Record{rec(1)}},
		{"above the tail", 3, []seglog.Record{rec(3)}},
		{"first record not at first", 2, []seglog.Record{rec(5)}},
		{"gap", 2, []seglog.Record{rec(2), rec(4)}},
		{"out of order", 2, []seglog.Record{rec(3), rec(2)}},
	} {
		err := l.AppendAt(c.first, c.recs, func(uint64, uint64, error) { called = true })
		var nt *seglog.NotTailError
		if !errors.Is(err, seglog.ErrNotTail) || !errors.As(err, &nt) || nt.Tail != 2 {
			t.Fatalf("%s: %v, want a *seglog.NotTailError at tail 2", c.name, err)
		}
		if l.NextOffset() != 2 {
			t.Fatalf("%s: the tail moved to %d", c.name, l.NextOffset())
		}
	}
	_ = d.Flush()
	_ = d.Poll(0)
	if called {
		t.Fatal("a refused AppendAt ran its callback")
	}
	sameRawRecords(t, "after the refusals", readRaw(t, l, 1<<20), before)
	d.waitAppend(t, func(done func(uint64, uint64, error)) error {
		return l.AppendAt(2, []seglog.Record{rec(2), rec(3)}, done)
	})
	sameRawRecords(t, "at the tail", readRaw(t, l, 1<<20), append(before, rec(2), rec(3)))
}

// TestOpenLogRefusesAnInvalidAddress: an unknown proto.ReplicaLog, a log the
// shard's kind has not, an unknown shard kind and a negative shard are
// ErrInvalid, never opened as another log (nothing is created on disk).
func TestOpenLogRefusesAnInvalidAddress(t *testing.T) {
	d := openTestSeglogDisk(t)
	for _, addr := range []LogAddr{
		{Kind: ShardStream, Name: testStream, Log: proto.LogLast + 1},
		{Kind: ShardStream, Name: testStream, Log: proto.LogCache},
		{Kind: ShardCache, Name: testStream, Log: proto.LogStream},
		{Kind: 0, Name: testStream, Log: proto.LogStream},
		{Kind: ShardStream, Name: testStream, Shard: -1, Log: proto.LogStream},
	} {
		if l, err := d.OpenLog(addr, logOptions{}); !errors.Is(err, ErrInvalid) || l != nil {
			t.Fatalf("OpenLog(%v): %v, want ErrInvalid", addr, err)
		}
	}
	entries, err := os.ReadDir(d.root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("invalid addresses created %v", entries)
	}
}

// TestShardLogReplicationSurface: the production log and the fake behave
// alike on what replication uses besides the copy: DurableOffset follows a
// completed on_commit append; AddEpoch refuses a generation that does not
// grow; TruncateSuffix refuses while an append is in flight, then drops the
// records and the epochs from its offset; Reset restarts the log empty at
// its base, epochs gone, and AppendAt continues there.
func TestShardLogReplicationSurface(t *testing.T) {
	for _, disk := range []string{"seglog", "fake"} {
		t.Run(disk, func(t *testing.T) {
			d := fakeCopyDisk()
			if disk == "seglog" {
				d, _ = copyDisks(t)
			}
			l, err := d.OpenLog(LogAddr{Kind: ShardStream, Name: testStream, Log: proto.LogStream}, logOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			replicationSurface(t, d, l)
		})
	}
}

func replicationSurface(t *testing.T, d copyDisk, l shardLog) {
	t.Helper()
	for i := range 3 {
		d.waitAppend(t, func(done func(uint64, uint64, error)) error {
			return l.Append([][]byte{[]byte("a"), []byte("b")}, int64(i), done)
		})
	}
	if l.DurableOffset() != 6 {
		t.Fatalf("durable offset %d after 6 on_commit records", l.DurableOffset())
	}
	if err := l.AddEpoch(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := l.AddEpoch(2, 4); err != nil {
		t.Fatal(err)
	}
	if err := l.AddEpoch(2, 5); !errors.Is(err, seglog.ErrBadOptions) {
		t.Fatalf("AddEpoch of an old generation: %v", err)
	}
	if err := l.Append([][]byte{[]byte("c")}, 9, func(uint64, uint64, error) {}); err != nil {
		t.Fatal(err)
	}
	if err := l.TruncateSuffix(3); !errors.Is(err, seglog.ErrBusy) {
		t.Fatalf("TruncateSuffix with an append in flight: %v", err)
	}
	d.drive(t, func() bool { return l.CommittedOffset() == 7 })
	if err := l.TruncateSuffix(3); err != nil {
		t.Fatal(err)
	}
	if l.NextOffset() != 3 || l.CommittedOffset() != 3 || fmt.Sprint(l.Epochs()) != "[{1 0}]" {
		t.Fatalf("after TruncateSuffix(3): next %d committed %d epochs %v", l.NextOffset(), l.CommittedOffset(), l.Epochs())
	}
	if err := l.Reset(50); err != nil {
		t.Fatal(err)
	}
	if l.EarliestOffset() != 50 || l.NextOffset() != 50 || l.DurableOffset() != 50 || len(l.Epochs()) != 0 {
		t.Fatalf("after Reset(50): earliest %d next %d durable %d epochs %v",
			l.EarliestOffset(), l.NextOffset(), l.DurableOffset(), l.Epochs())
	}
	rec := seglog.Record{Offset: 50, TimestampMicros: 3, Kind: seglog.KindGenerationStart, Payload: []byte("g")}
	d.waitAppend(t, func(done func(uint64, uint64, error)) error { return l.AppendAt(50, []seglog.Record{rec}, done) })
	sameRawRecords(t, "after Reset", readRaw(t, l, 1<<20), []seglog.Record{rec})
}

package core

import (
	"context"
	"errors"
	"testing"
	"time"
)

// newOptionsEngine is a one-core engine on the real seglog disk with 4 KiB
// segments (a 1000-byte record seals a segment every few records) and a fake
// clock: record timestamps and the retention timer follow clk.
func newOptionsEngine(t *testing.T, clk *fakeClock, configure func(*Config)) *Engine {
	t.Helper()
	cfg := Config{Cores: 1, DataDir: t.TempDir(), Fsync: FsyncOnCommit, NoPinning: true, SegmentBytes: 4096, Clock: clk}
	if configure != nil {
		configure(&cfg)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// fill creates spec's stream and publishes n 1000-byte records to it.
func fill(t *testing.T, e *Engine, spec StreamSpec, n int) {
	t.Helper()
	if err := e.CreateStream(spec); err != nil {
		t.Fatalf("CreateStream(%v): %v", spec.Name, err)
	}
	record := make([]byte, 1000)
	for range n {
		if _, err := publishSync(t, e, &PublishRequest{Stream: spec.Name, Payloads: [][]byte{record}}); err != nil {
			t.Fatal(err)
		}
	}
}

func earliest(t *testing.T, e *Engine, name StreamName) uint64 {
	t.Helper()
	info, err := e.StreamInfo(name)
	if err != nil {
		t.Fatal(err)
	}
	return info.EarliestOffsets[0]
}

// A stream's own RetentionAge drops its old segments when the core's
// retention timer fires, although the engine sets no retention (so the timer
// runs because of the stream); a stream without one keeps everything.
func TestStreamRetentionAgeDropsOnlyItsOwnSegments(t *testing.T) {
	clk := &fakeClock{}
	e := newOptionsEngine(t, clk, nil)
	aged := StreamName{Tenant: "t1", Namespace: "default", Stream: "aged"}
	kept := StreamName{Tenant: "t1", Namespace: "default", Stream: "kept"}
	fill(t, e, StreamSpec{Name: aged, Shards: 1, Durable: true, RetentionAge: time.Hour}, 40)
	fill(t, e, StreamSpec{Name: kept, Shards: 1, Durable: true}, 40)

	fire := func() {
		_ = e.runOn(e.cores[0], func(c *core) error { c.timers.run(c.clock.MonoNanos()); return nil })
	}
	clk.Advance(30 * time.Minute) // past the 60 s timer, not past the age
	fire()
	if got := earliest(t, e, aged); got != 0 {
		t.Fatalf("records younger than the stream's hour were dropped: earliest %d", got)
	}
	clk.Advance(time.Hour)
	fire()
	if got := earliest(t, e, aged); got == 0 || got >= 40 {
		t.Fatalf("stream with RetentionAge 1h, records 90 min old: earliest %d, want sealed segments dropped", got)
	}
	if got := earliest(t, e, kept); got != 0 {
		t.Fatalf("stream without retention lost its head: earliest %d", got)
	}
	if spec := e.lookup(aged).spec; spec.RetentionAge != time.Hour {
		t.Fatalf("spec kept %+v", spec)
	}
}

// The stream's value wins over the engine's, bound by bound: with an engine
// RetentionBytes of 8 KiB, a stream that sets 1 GiB keeps its 40 KB and a
// stream that sets nothing is cut to about 8 KiB.
func TestStreamRetentionBytesWinsOverTheEngine(t *testing.T) {
	e := newOptionsEngine(t, &fakeClock{}, func(c *Config) { c.RetentionBytes = 8192 })
	big := StreamName{Tenant: "t1", Namespace: "default", Stream: "big"}
	dflt := StreamName{Tenant: "t1", Namespace: "default", Stream: "default"}
	fill(t, e, StreamSpec{Name: big, Shards: 1, Durable: true, RetentionBytes: 1 << 30}, 40)
	fill(t, e, StreamSpec{Name: dflt, Shards: 1, Durable: true}, 40)
	_ = e.runOn(e.cores[0], func(c *core) error { c.enforceRetention(time.UnixMicro(c.clock.WallMicros())); return nil })
	if got := earliest(t, e, big); got != 0 {
		t.Fatalf("stream retention 1 GiB over the engine's 8 KiB: earliest %d, want 0", got)
	}
	if got := earliest(t, e, dflt); got == 0 || 40-got > 16 {
		t.Fatalf("stream on the engine's 8 KiB: earliest %d", got)
	}
}

// SyncOnCommit: under engine-wide periodic fsync (interval one hour, so it
// never runs here), a SyncOnCommit stream's publish is acknowledged only once
// its record is on disk (DurableOffset), while a plain stream's is
// acknowledged once written.
func TestSyncOnCommitAcksAfterTheFsync(t *testing.T) {
	e := newOptionsEngine(t, &fakeClock{}, func(c *Config) { c.Fsync, c.FsyncInterval = FsyncPeriodic, time.Hour })
	synced := StreamName{Tenant: "t1", Namespace: "default", Stream: "quorum"}
	plain := StreamName{Tenant: "t1", Namespace: "default", Stream: "leader"}
	fill(t, e, StreamSpec{Name: synced, Shards: 1, Durable: true, SyncOnCommit: true}, 3)
	fill(t, e, StreamSpec{Name: plain, Shards: 1, Durable: true}, 3)
	durable := func(name StreamName) (committed, onDisk uint64) {
		_ = e.runOn(e.cores[0], func(*core) error {
			l := e.lookup(name).shards[0].records.(*seglogLog).log
			committed, onDisk = l.CommittedOffset(), l.DurableOffset()
			return nil
		})
		return committed, onDisk
	}
	if c, d := durable(synced); c != 3 || d != 3 {
		t.Fatalf("SyncOnCommit stream after 3 acked publishes: committed %d, durable %d; want 3/3", c, d)
	}
	if c, d := durable(plain); c != 3 || d != 0 {
		t.Fatalf("periodic stream after 3 acked publishes: committed %d, durable %d; want 3/0 (no fsync yet)", c, d)
	}
}

func TestStreamOptionsValidation(t *testing.T) {
	e := newOptionsEngine(t, &fakeClock{}, nil)
	name := StreamName{Tenant: "t1", Namespace: "default", Stream: "bad"}
	for _, spec := range []StreamSpec{
		{Name: name, Shards: 1, Durable: true, RetentionBytes: -1},
		{Name: name, Shards: 1, Durable: true, RetentionAge: -time.Second},
		{Name: name, Shards: 1, RetentionAge: time.Hour},
		{Name: name, Shards: 1, RetentionBytes: 1 << 20},
		{Name: name, Shards: 1, SyncOnCommit: true},
	} {
		if err := e.CreateStream(spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateStream(%+v) = %v, want ErrInvalid", spec, err)
		}
	}
	ok := StreamSpec{Name: name, Shards: 1, Durable: true, RetentionAge: time.Hour}
	if err := e.CreateStream(ok); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(ok); err != nil {
		t.Fatalf("same spec again: %v", err)
	}
	other := ok
	other.RetentionAge = 2 * time.Hour
	if err := e.CreateStream(other); !errors.Is(err, ErrExists) {
		t.Fatalf("open stream with another retention: %v, want ErrExists", err)
	}
}

package core

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestAckOnCommitWaitsForTheCompletion(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.hold(true)
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 3)})
	h.step(3)
	if a.calls != 0 {
		t.Fatalf("acked before the append completed: %+v", a)
	}
	h.hold(false)
	h.step(1)
	want := PublishResult{Shard: 0, FirstOffset: 0, LastOffset: 2, Committed: true}
	if a.calls != 1 || a.err != nil || a.res != want {
		t.Fatalf("ack = %+v, want %+v once", a, want)
	}
}

func TestAckModes(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.hold(true)
	none := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("n", 2), Ack: AckNone})
	enq := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("e", 1), Ack: AckOnEnqueue})
	commit := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("c", 1), Ack: AckOnCommit})
	h.step(1)
	if none.calls != 1 || none.res.FirstOffset != 0 || none.res.LastOffset != 1 || none.res.Committed {
		t.Fatalf("ack none: %+v", none)
	}
	if enq.calls != 1 || enq.res.FirstOffset != 2 || enq.res.Committed {
		t.Fatalf("ack on enqueue: %+v", enq)
	}
	if commit.calls != 0 {
		t.Fatalf("ack on commit before the commit: %+v", commit)
	}
	h.hold(false)
	h.step(1)
	if commit.calls != 1 || commit.res.FirstOffset != 3 || !commit.res.Committed {
		t.Fatalf("ack on commit: %+v", commit)
	}
	if none.calls != 1 || enq.calls != 1 {
		t.Fatal("an early ack ran twice")
	}
}

func TestInMemoryPublishAssignsOffsets(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("m", 4)})
	b := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("m", 1)})
	h.step(1)
	if a.res.FirstOffset != 0 || a.res.LastOffset != 3 || b.res.FirstOffset != 4 || !b.res.Committed {
		t.Fatalf("acks %+v %+v", a, b)
	}
}

func TestRoutingKeysRoundRobinAndExplicitShard(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	mod := StreamName{Tenant: "t", Namespace: "n", Stream: "mod"}
	jump := StreamName{Tenant: "t", Namespace: "n", Stream: "jump"}
	h.create(StreamSpec{Name: mod, Shards: 5})
	h.create(StreamSpec{Name: jump, Shards: 5, Routing: RoutingJumpHash})
	key := []byte("customer-42")
	var acks []*ack
	for range 3 {
		acks = append(acks, h.publish(routed(t, h.e, &PublishRequest{Stream: mod, Payloads: payloads("k", 1)}, key)))
		acks = append(acks, h.publish(routed(t, h.e, &PublishRequest{Stream: jump, Payloads: payloads("k", 1)}, key)))
	}
	var rr []*ack
	for range 10 {
		rr = append(rr, h.publish(routed(t, h.e, &PublishRequest{Stream: mod, Payloads: payloads("r", 1)}, nil)))
	}
	pinned := h.publish(&PublishRequest{Stream: mod, Shard: 3, Payloads: payloads("p", 1)})
	h.step(2)
	for i, a := range acks {
		want := RouteKey(RoutingModulo, key, 5)
		if i%2 == 1 {
			want = RouteKey(RoutingJumpHash, key, 5)
		}
		if a.err != nil || a.res.Shard != want {
			t.Fatalf("keyed publish %d went to shard %d (%v), want %d", i, a.res.Shard, a.err, want)
		}
	}
	counts := make([]int, 5)
	for _, a := range rr {
		counts[a.res.Shard]++
	}
	if !reflect.DeepEqual(counts, []int{2, 2, 2, 2, 2}) {
		t.Fatalf("round-robin spread %v", counts)
	}
	if pinned.res.Shard != 3 {
		t.Fatalf("explicit-shard publish went to shard %d", pinned.res.Shard)
	}
	if err := h.e.Publish(&PublishRequest{Stream: mod, Shard: 5, Payloads: payloads("p", 1)}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("publish to shard 5 of 5: %v", err)
	}
}

func TestJumpHashIsConsistent(t *testing.T) {
	moved := 0
	const keys = 10000
	for k := uint64(0); k < keys; k++ {
		h := KeyHash(u64payload(k))
		a, b := JumpHash(h, 10), JumpHash(h, 11)
		if a < 0 || a >= 10 || b < 0 || b >= 11 {
			t.Fatalf("bucket out of range: %d %d", a, b)
		}
		if a != b {
			if b != 10 {
				t.Fatalf("key %d moved between old buckets %d → %d", k, a, b)
			}
			moved++
		}
	}
	if moved < keys/11/2 || moved > keys/11*2 {
		t.Fatalf("%d of %d keys moved growing 10 → 11 buckets, want about %d", moved, keys, keys/11)
	}
	if JumpHash(123, 0) != 0 || JumpHash(123, 1) != 0 {
		t.Fatal("degenerate bucket counts must map to 0")
	}
}

func TestPublishValidation(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	bad := []*PublishRequest{
		{Stream: testStream},
		{Stream: testStream, Payloads: payloads("x", 1), Ack: AckOnCommit + 1},
		{Stream: testStream, Payloads: payloads("x", 1), ProducerID: string(make([]byte, 256))},
	}
	for i, req := range bad {
		if err := h.e.Publish(req, func(PublishResult, error) { t.Fatal("done called") }); !errors.Is(err, ErrInvalid) {
			t.Errorf("case %d: %v, want ErrInvalid", i, err)
		}
	}
	other := StreamName{Tenant: "t", Namespace: "n", Stream: "missing"}
	if err := h.e.Publish(&PublishRequest{Stream: other, Payloads: payloads("x", 1)}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown stream: %v", err)
	}
}

func TestFullInboxIsOverloaded(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.InboxCapacity = 4 })
	h.create(StreamSpec{Name: testStream, Shards: 1})
	var acks []*ack
	for range 4 {
		acks = append(acks, h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}))
	}
	err := h.e.Publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}, func(PublishResult, error) {})
	if !errors.Is(err, ErrOverloaded) {
		t.Fatalf("fifth publish into an inbox of 4: %v", err)
	}
	h.step(1)
	for _, a := range acks {
		if a.calls != 1 || a.err != nil {
			t.Fatalf("queued publish: %+v", a)
		}
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
}

func TestStorageFailureIsTypedAndSticky(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	injected := errors.New("injected EIO")
	store.completeErr = injected
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
	h.step(2)
	if !errors.Is(a.err, ErrStorageFailed) || !errors.Is(a.err, injected) {
		t.Fatalf("failed commit: %v", a.err)
	}
	store.completeErr = nil
	b := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
	h.step(1)
	if !errors.Is(b.err, ErrStorageFailed) {
		t.Fatalf("publish after a storage failure: %v", b.err)
	}
}

func TestAppendErrorIsTyped(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	store.appendErr = errors.New("injected ENOSPC")
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
	h.step(1)
	if !errors.Is(a.err, ErrStorageFailed) || a.calls != 1 {
		t.Fatalf("append error: %+v", a)
	}
}

func TestPeriodicFsyncTimer(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.Fsync = FsyncPeriodic; c.FsyncInterval = 250 * time.Millisecond })
	h.step(1)
	if h.disks[0].syncs != 0 {
		t.Fatal("synced before the interval")
	}
	h.clock.Advance(250 * time.Millisecond)
	h.step(1)
	h.clock.Advance(100 * time.Millisecond)
	h.step(1)
	if h.disks[0].syncs != 1 {
		t.Fatalf("syncs after 350 ms = %d, want 1", h.disks[0].syncs)
	}
	h.clock.Advance(150 * time.Millisecond)
	h.step(1)
	if h.disks[0].syncs != 2 {
		t.Fatalf("syncs after 500 ms = %d, want 2", h.disks[0].syncs)
	}
}

func TestCatalog(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	spec := StreamSpec{Name: testStream, Shards: 3, Durable: true}
	h.create(spec)
	h.create(spec) // same spec: no-op
	other := spec
	other.Shards = 4
	if err := h.e.CreateStream(other); !errors.Is(err, ErrExists) {
		t.Fatalf("recreate with other shards: %v", err)
	}
	if err := h.e.CreateStream(StreamSpec{Name: StreamName{Tenant: "t"}, Shards: 1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
	h.publish(&PublishRequest{Stream: testStream, Shard: 2, Payloads: payloads("x", 5)})
	h.step(2)
	info, err := h.e.StreamInfo(testStream)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.NextOffsets, []uint64{0, 0, 5}) || info.Spec != spec {
		t.Fatalf("info %+v", info)
	}
	if got := h.e.ListStreams(); len(got) != 1 || got[0] != spec {
		t.Fatalf("list %+v", got)
	}
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	if _, err := nextNow(t, sub); !errors.Is(err, ErrNotFound) {
		t.Fatalf("subscription after delete: %v", err)
	}
	if err := h.e.DeleteStream(testStream); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if len(h.store.logs) != 0 {
		t.Fatalf("logs left after delete: %d", len(h.store.logs))
	}
	h.create(spec) // the name is free again
}

func TestDurableNeedsDataDir(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.DataDir = "" })
	if err := h.e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); !errors.Is(err, ErrNoDurableStorage) {
		t.Fatalf("durable stream without a data dir: %v", err)
	}
}

func TestCloseFailsQueuedAndEndsSubscriptions(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	inflight := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)})
	h.step(1) // staged; completes during the stop
	h.hold(false)
	queued := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("y", 1)})
	h.close()
	if queued.calls != 1 || !errors.Is(queued.err, ErrClosed) {
		t.Fatalf("queued publish at close: %+v", queued)
	}
	if inflight.calls != 1 {
		t.Fatalf("in-flight publish at close: %+v", inflight)
	}
	if _, err := nextNow(t, sub); !errors.Is(err, ErrClosed) {
		t.Fatalf("subscription after close: %v", err)
	}
	if err := h.e.Publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1)}, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	for _, d := range h.disks {
		if !d.closed {
			t.Fatal("disk left open")
		}
	}
}

// The engine reads no environment (issue 14 item 4): FELIX_CORES, once read
// here, is the broker's deprecated alias of FELIX_CORE_SHARDS now, and
// Config.Cores 0 means one core per allowed CPU whatever it says.
func TestConfigCoresIgnoresEnvironment(t *testing.T) {
	t.Setenv("FELIX_CORES", "3")
	h := newHarness(t, 3, newFakeStore(), nil)
	if h.e.Cores() != 3 {
		t.Fatalf("Cores 3 gave %d cores", h.e.Cores())
	}
	t.Setenv("FELIX_CORES", "zero")
	if _, err := NewEngine(Config{Cores: -1, manual: true}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Cores -1: %v", err)
	}
	cfg := Config{}
	if err := cfg.normalize(); err != nil || cfg.Cores != max(1, len(allowedCPUs())) {
		t.Fatalf("default cores %d under FELIX_CORES=zero, allowed CPUs %v: %v", cfg.Cores, allowedCPUs(), err)
	}
}

func TestSubscribeValidation(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 2})
	cases := []struct {
		req  SubscribeRequest
		want error
	}{
		{SubscribeRequest{Stream: testStream, Policy: Block + 1}, ErrInvalid},
		{SubscribeRequest{Stream: testStream, Start: StartOffset + 1}, ErrInvalid},
		{SubscribeRequest{Stream: testStream, QueueCapacity: -1}, ErrInvalid},
		{SubscribeRequest{Stream: testStream, Shard: 2}, ErrNotFound},
		{SubscribeRequest{Stream: testStream, Shard: -1}, ErrNotFound},
		{SubscribeRequest{Stream: StreamName{Tenant: "x", Namespace: "y", Stream: "z"}}, ErrNotFound},
	}
	for i, c := range cases {
		if _, err := h.e.Subscribe(c.req); !errors.Is(err, c.want) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	a, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	b, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Shard: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID() == 0 || a.ID() == b.ID() {
		t.Fatalf("subscription ids %d and %d", a.ID(), b.ID())
	}
}

func TestRetentionTimer(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.RetentionBytes = 1 << 20; c.RetentionInterval = time.Minute })
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	records := h.store.logs[fakeLogKey(logRecords, testStream, 0)]
	h.clock.Advance(59 * time.Second)
	h.step(1)
	if records.retention != 0 {
		t.Fatal("retention ran before its interval")
	}
	h.clock.Advance(time.Second)
	h.step(1)
	h.clock.Advance(time.Minute)
	h.step(1)
	if records.retention != 2 {
		t.Fatalf("retention ran %d times in two intervals", records.retention)
	}
	if h.store.logs[fakeLogKey(logProducers, testStream, 0)].retention != 0 {
		t.Fatal("retention ran on the producers log")
	}
}

// TestUnkeyedIdempotentResendMeetsItsWindow: a batch re-sent with the same
// producer id and sequence on a multi-shard stream without a key must reach
// the shard that recorded it and be answered as a duplicate, never appended
// again on another shard (found by e2e/crash_test.go; docs/soak.md).
func TestUnkeyedIdempotentResendMeetsItsWindow(t *testing.T) {
	h := newHarness(t, 2, newFakeStore(), nil)
	name := StreamName{Tenant: "t", Namespace: "n", Stream: "idem"}
	h.create(StreamSpec{Name: name, Shards: 4})
	shardsUsed := map[int]bool{}
	for seq := uint64(1); seq <= 32; seq++ {
		first := h.publish(routed(t, h.e, &PublishRequest{Stream: name, ProducerID: "p-1", Sequence: seq, Payloads: payloads("a", 2)}, nil))
		h.step(2)
		again := h.publish(routed(t, h.e, &PublishRequest{Stream: name, ProducerID: "p-1", Sequence: seq, Payloads: payloads("a", 2)}, nil))
		h.step(2)
		if first.err != nil || again.err != nil {
			t.Fatalf("seq %d: %v / %v", seq, first.err, again.err)
		}
		if !again.res.Duplicate || again.res.Shard != first.res.Shard || again.res.FirstOffset != first.res.FirstOffset {
			t.Fatalf("seq %d: re-send answered %+v, first %+v", seq, again.res, first.res)
		}
		shardsUsed[first.res.Shard] = true
	}
	if len(shardsUsed) < 2 {
		t.Fatalf("32 sequences used only shards %v: idempotent publishes must still spread", shardsUsed)
	}
}

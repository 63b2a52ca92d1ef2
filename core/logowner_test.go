package core

import (
	"errors"
	"testing"
	"time"
)

// bareCore is a bare core for logOwner tests: a fake clock, the timer list
// and an FsyncInterval of one second.
func bareCore() (*core, *fakeClock) {
	clk := &fakeClock{}
	return &core{engine: &Engine{cfg: Config{FsyncInterval: time.Second}}, clock: clk}, clk
}

// durableStub is a shardLog whose DurableOffset the test sets.
type durableStub struct {
	shardLog
	durable uint64
}

func (l *durableStub) DurableOffset() uint64 { return l.durable }

// WhenIdle runs at once on an idle owner and otherwise right after the
// completion that leaves no append in flight, in registration order.
func TestLogOwnerWhenIdle(t *testing.T) {
	c, _ := bareCore()
	var o logOwner
	o.initOwner(c, nil, nil)
	var ran []int
	o.WhenIdle(func() { ran = append(ran, 0) })
	if len(ran) != 1 {
		t.Fatalf("WhenIdle on an idle owner ran %v, want at once", ran)
	}
	o.begin()
	o.compactBegun()
	o.WhenIdle(func() { ran = append(ran, 1) })
	o.WhenIdle(func() { ran = append(ran, 2) })
	o.end()
	if len(ran) != 1 || o.idleNow() {
		t.Fatalf("ran %v with a compaction in flight", ran)
	}
	o.compactEnded()
	if len(ran) != 3 || ran[1] != 1 || ran[2] != 2 || !o.idleNow() || o.compacting != 0 {
		t.Fatalf("after the last completion ran %v (compacting %d)", ran, o.compacting)
	}
	o.begin()
	o.WhenIdle(func() { ran = append(ran, 3) })
	o.closeOwner()
	o.end()
	if len(ran) != 3 {
		t.Fatalf("a closed owner ran its idle waiter: %v", ran)
	}
}

// OnDurable runs at once when the main log is durable far enough (or in
// memory), after a completion that gets it there, or from the periodic check
// (FsyncInterval) when an fdatasync moved it without a completion; never
// after the owner closed.
func TestLogOwnerOnDurable(t *testing.T) {
	c, clk := bareCore()
	var o logOwner
	o.initOwner(c, nil, nil)
	var ran []uint64
	on := func(off uint64) { o.OnDurable(off, func() { ran = append(ran, off) }) }
	on(100) // in memory: nothing to wait for
	log := &durableStub{durable: 5}
	o.durableLog = log
	on(5)
	on(8)
	on(7)
	if len(ran) != 2 || ran[1] != 5 {
		t.Fatalf("ran %v, want 100 and 5 at once", ran)
	}
	if _, ok := c.timers.next(); !ok {
		t.Fatal("no periodic durability check while waiters wait")
	}
	log.durable = 7
	o.begin()
	o.end()
	if len(ran) != 3 || ran[2] != 7 {
		t.Fatalf("after a completion at durable 7 ran %v", ran)
	}
	log.durable = 9
	clk.Advance(time.Second)
	c.timers.run(c.clock.MonoNanos())
	if len(ran) != 4 || ran[3] != 8 {
		t.Fatalf("after the periodic check at durable 9 ran %v", ran)
	}
	if _, ok := c.timers.next(); ok {
		t.Fatal("the periodic check stays scheduled with no waiter")
	}
	on(12)
	o.closeOwner()
	log.durable = 20
	clk.Advance(time.Second)
	c.timers.run(c.clock.MonoNanos())
	o.settleIdle()
	if len(ran) != 4 {
		t.Fatalf("a closed owner ran a durable waiter: %v", ran)
	}
	if _, ok := c.timers.next(); ok {
		t.Fatal("closing left the periodic check scheduled")
	}
}

// fail sticks at the first error and runs the shard's hook once;
// closeWhenIdle fails with the reason at once and closes (through the
// shard's hook, with remove) only when the last append completed; on a
// closed owner it answers at once.
func TestLogOwnerFailAndCloseWhenIdle(t *testing.T) {
	c, _ := bareCore()
	var o logOwner
	var failures []error
	var closes []bool
	closeErr := errors.New("remove failed")
	o.initOwner(c, func(err error) { failures = append(failures, err) }, func(reason error, remove bool) error {
		if !errors.Is(reason, ErrNotFound) {
			t.Errorf("closed with %v", reason)
		}
		closes = append(closes, remove)
		o.closeOwner()
		return closeErr
	})
	o.begin()
	o.begin()
	done := make(chan error, 2)
	o.closeWhenIdle(ErrNotFound, true, done)
	o.fail(ErrStorageFailed)
	if len(failures) != 1 || !errors.Is(o.failed, ErrNotFound) {
		t.Fatalf("failures %v, failed %v: want one, ErrNotFound", failures, o.failed)
	}
	o.end()
	if len(closes) != 0 || len(done) != 0 {
		t.Fatal("closed with an append in flight")
	}
	o.end()
	if len(closes) != 1 || !closes[0] || len(done) != 1 || <-done != closeErr {
		t.Fatalf("closes %v after the last completion", closes)
	}
	o.closeWhenIdle(ErrNotFound, false, done)
	if len(closes) != 2 || len(done) != 1 {
		t.Fatalf("close of a closed owner: closes %v, %d answers", closes, len(done))
	}
}

// compact counts an accepted compaction as in flight and a refused one fails
// the shard with a storage error.
func TestLogOwnerCompact(t *testing.T) {
	c, _ := bareCore()
	var o logOwner
	var failures []error
	o.initOwner(c, func(err error) { failures = append(failures, err) }, nil)
	d := newFakeDisk(newFakeStore())
	l, err := d.OpenLog(LogAddr{Kind: ShardStream, Name: testStream, Log: logProducers}, logOptions{})
	if err != nil {
		t.Fatal(err)
	}
	completed := false
	if !o.compact(l, "compact", [][]byte{[]byte("live")}, 1, func(_, _ uint64, err error) {
		completed = err == nil
		o.compactEnded()
	}) {
		t.Fatal("compaction refused")
	}
	if o.compacting != 1 || o.idleNow() {
		t.Fatalf("compacting %d, idle %v with a compaction in flight", o.compacting, o.idleNow())
	}
	_ = d.Flush()
	_ = d.Poll(0)
	if !completed || o.compacting != 0 || !o.idleNow() {
		t.Fatalf("after completion: completed %v, compacting %d", completed, o.compacting)
	}
	d.store.appendErr = errInjected
	if o.compact(l, "compact", [][]byte{[]byte("live")}, 1, nil) || !errors.Is(o.failed, ErrStorageFailed) || len(failures) != 1 {
		t.Fatalf("a refused compaction: failed %v, failures %v", o.failed, failures)
	}
	if o.compacting != 0 || !o.idleNow() {
		t.Fatal("a refused compaction counted as in flight")
	}
}

// A durable stream shard counts its publish in flight on its logOwner:
// WhenIdle and OnDurable registered while the append is held wait for its
// completion, which also acknowledges the publish; then the shard is idle.
func TestStreamShardWaitsThroughItsLogOwner(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	defer h.close()
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	s := h.e.lookup(testStream).shards[0]
	h.hold(true)
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 2)})
	h.step(2)
	if s.appending != 1 || a.calls != 0 {
		t.Fatalf("held publish: %d appends in flight, %d answers", s.appending, a.calls)
	}
	idle, durable := false, false
	s.WhenIdle(func() { idle = a.calls == 1 })
	s.OnDurable(2, func() { durable = true })
	if idle || durable {
		t.Fatal("waiters ran with the append in flight")
	}
	h.hold(false)
	h.step(2)
	if !idle || !durable || a.err != nil || s.appending != 0 {
		t.Fatalf("after the completion: idle %v (after the ack), durable %v, ack %v, %d in flight", idle, durable, a.err, s.appending)
	}
}

// A close that waits only for a compaction of the producers log finishes
// when that compaction completes (the compaction is an append in flight of
// the shard's logOwner; before the owner, its completion did not retry the
// close, which then waited for the next publish).
func TestStreamShardCloseWaitsForProducerCompaction(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(cfg *Config) { cfg.ProducerWindow = 1 })
	defer h.close()
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	s := h.e.lookup(testStream).shards[0]
	for seq := uint64(0); !s.producerCompacting; seq++ {
		if seq > 4*64+8 {
			t.Fatal("the producers log never compacted")
		}
		a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("p", 1), ProducerID: "p", Sequence: seq})
		for range 3 {
			if h.step(1); s.producerCompacting {
				break
			}
		}
		if a.calls != 1 || a.err != nil {
			t.Fatalf("publish %d: %d answers, %v", seq, a.calls, a.err)
		}
	}
	h.hold(true)
	h.step(1)
	if s.appending != 1 || s.compacting != 1 {
		t.Fatalf("%d appends, %d compactions in flight; want the compaction alone", s.appending, s.compacting)
	}
	closed := make(chan error, 1)
	s.closeWhenIdle(ErrNotFound, false, closed)
	if len(closed) != 0 || s.closed {
		t.Fatal("closed with the compaction in flight")
	}
	h.hold(false)
	h.step(2)
	if len(closed) != 1 || !s.closed {
		t.Fatal("the close did not finish when the compaction completed")
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

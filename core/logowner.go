package core

import "fmt"

// logOwner is the lifecycle every shard kind keeps of its logs, one copy for
// the stream shard (shard.go, producer.go), the cache shard (cache_shard.go)
// and a stream shard's group state (group_shard.go), each embedding it: the
// count of appends in flight, the sticky failure, close-when-idle, the count
// of compactions in flight, and waiters for idleness (WhenIdle) and
// durability (OnDurable). Core goroutine only, like the shard.
//
// A shard calls begin after each append (or compaction) its log accepted and
// end at the close of that append's completion callback, after the shard
// handled it: end settles (settleIdle: runs the idle and durable waiters,
// finishes a pending close). The two are a counter and a test on the append
// path (no allocation, no closure per append).
type logOwner struct {
	ownerCore *core
	// durableLog is the log OnDurable watches: the shard's main log (the
	// record log, the cache log, the group-cursor log); nil in memory.
	durableLog shardLog
	// appending counts appends and compactions accepted and not completed,
	// over all the owner's logs.
	appending int
	// compacting counts compactions in flight (compactBegun).
	compacting int
	// failed is sticky: ErrStorageFailed-wrapped, or the close reason.
	failed       error
	closed       bool
	pendingClose *pendingClose
	// failHook is the shard's reaction to its first failure (fail);
	// closeHook closes it (closeWhenIdle). Both bound once when it opens.
	failHook  func(error)
	closeHook func(reason error, remove bool) error

	idle         []func()
	durable      []durableWaiter
	durableTimer coreTimer
}

// pendingClose is a close waiting for the owner's appends in flight.
type pendingClose struct {
	reason error
	remove bool
	done   chan error
}

// durableWaiter is an OnDurable callback.
type durableWaiter struct {
	offset uint64
	fn     func()
}

// initOwner binds the owner to its core and its shard's fail and close.
func (o *logOwner) initOwner(c *core, failHook func(error), closeHook func(reason error, remove bool) error) {
	o.ownerCore, o.failHook, o.closeHook = c, failHook, closeHook
	o.durableTimer = coreTimer{index: -1, fn: o.durableTick}
}

// begin counts one append (or compaction) the log accepted.
func (o *logOwner) begin() { o.appending++ }

// end counts one completed append; call it last in the completion callback.
func (o *logOwner) end() {
	o.appending--
	if o.appending == 0 || len(o.durable) > 0 {
		o.settleIdle()
	}
}

// compactBegun counts a compaction the log accepted (compacting, and an
// append in flight); compactEnded is its completion.
func (o *logOwner) compactBegun() { o.compacting++; o.begin() }
func (o *logOwner) compactEnded() { o.compacting--; o.end() }

// idleNow reports whether no append of the owner's logs is in flight.
func (o *logOwner) idleNow() bool { return o.appending == 0 }

// fail makes the shard refuse everything from now on with err: the first
// failure sticks and runs the shard's failHook (answering its waiters); later
// ones are ignored.
func (o *logOwner) fail(err error) {
	if o.failed != nil {
		return
	}
	o.failed = err
	if o.failHook != nil {
		o.failHook(err)
	}
}

// closeWhenIdle refuses new operations with reason at once (fail) and closes
// the shard (deleting its logs when remove) once no append is in flight — at
// once when none is or the shard is closed already; done receives the
// outcome of the shard's close.
func (o *logOwner) closeWhenIdle(reason error, remove bool, done chan error) {
	o.fail(reason)
	o.pendingClose = &pendingClose{reason: reason, remove: remove, done: done}
	if o.closed {
		o.pendingClose = nil
		done <- o.closeHook(reason, remove)
		return
	}
	o.settleIdle()
}

// WhenIdle runs fn on the core once no append of the owner's logs is in
// flight: at once when idle, else right after the completion that makes it
// so. Waiters of a shard that closes first never run.
func (o *logOwner) WhenIdle(fn func()) {
	if o.idleNow() {
		fn()
		return
	}
	o.idle = append(o.idle, fn)
}

// OnDurable runs fn on the core once the main log's DurableOffset reaches
// offset (durable_offset >= offset): at once when it has, or when the owner
// has no log (in memory); else after the append completion or the periodic
// fdatasync (checked every Config.FsyncInterval) that gets it there. Waiters
// of a shard that closes first never run; under fsync none the offset only
// grows at rollover and close.
func (o *logOwner) OnDurable(offset uint64, fn func()) {
	if o.durableLog == nil || o.durableLog.DurableOffset() >= offset {
		fn()
		return
	}
	o.durable = append(o.durable, durableWaiter{offset: offset, fn: fn})
	if o.durableTimer.index < 0 {
		c := o.ownerCore
		c.timers.schedule(&o.durableTimer, c.clock.MonoNanos()+int64(c.engine.cfg.FsyncInterval))
	}
}

// settleIdle runs the idle waiters and a pending close once idle, and the
// durable waiters whose offset the main log reached.
func (o *logOwner) settleIdle() {
	if len(o.durable) > 0 {
		o.runDurable()
	}
	if !o.idleNow() {
		return
	}
	for len(o.idle) > 0 && o.idleNow() && !o.closed {
		fn := o.idle[0]
		o.idle[0] = nil
		o.idle = o.idle[1:]
		fn()
	}
	if pc := o.pendingClose; pc != nil && o.idleNow() {
		o.pendingClose = nil
		pc.done <- o.closeHook(pc.reason, pc.remove)
	}
}

// runDurable runs, in offset order of registration, every durable waiter
// whose offset the main log reached.
func (o *logOwner) runDurable() {
	if o.durableLog == nil || o.closed {
		return
	}
	durable := o.durableLog.DurableOffset()
	kept := o.durable[:0]
	var ready []durableWaiter
	for _, w := range o.durable {
		if w.offset <= durable {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(o.durable[len(kept):])
	o.durable = kept
	for _, w := range ready {
		w.fn()
	}
}

// durableTick is the durable waiters' timer: the periodic fdatasync moves
// DurableOffset without an append completion.
func (o *logOwner) durableTick(now int64) {
	o.runDurable()
	if len(o.durable) > 0 && !o.closed {
		o.ownerCore.timers.schedule(&o.durableTimer, now+int64(o.ownerCore.engine.cfg.FsyncInterval))
	}
}

// closeOwner marks the owner closed: its waiters are dropped, its timer
// stopped. The shard closes its logs.
func (o *logOwner) closeOwner() {
	o.closed = true
	clear(o.idle)
	o.idle = nil
	clear(o.durable)
	o.durable = nil
	if o.ownerCore != nil {
		o.ownerCore.timers.stop(&o.durableTimer)
	}
}

// compact starts a compaction of l (shardLog.Compact: live appended at the
// tail, the head dropped once that completed) counted by the owner; done
// must call compactEnded last. A refusal fails the shard with what.
func (o *logOwner) compact(l shardLog, what string, live [][]byte, ts int64, done func(first, last uint64, err error)) bool {
	if err := l.Compact(live, ts, done); err != nil {
		o.fail(storageError(what, err))
		return false
	}
	o.compactBegun()
	return true
}

// replayReadBytes is the page size of readAll and readWithOffsets.
const replayReadBytes = 1 << 20

// readAll feeds every committed data record of l to fn, in order.
func readAll(l logReader, fn func([]byte) error) error {
	return readWithOffsets(l, func(_ uint64, p []byte) error { return fn(p) })
}

// readWithOffsets feeds every committed data record of l to fn with its
// offset, in order, in pages of replayReadBytes; fn's error stops the replay
// and is returned.
func readWithOffsets(l logReader, fn func(uint64, []byte) error) error {
	next := l.EarliestOffset()
	for next < l.CommittedOffset() {
		var ferr error
		from := next
		err := l.ReadCommitted(from, replayReadBytes, func(off uint64, _ int64, p []byte) bool {
			next = off + 1
			ferr = fn(off, p)
			return ferr == nil
		})
		if err != nil {
			return err
		}
		if ferr != nil {
			return ferr
		}
		if next == from {
			return fmt.Errorf("core: read of %d returned nothing below committed %d", from, l.CommittedOffset())
		}
	}
	return nil
}

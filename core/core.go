package core

import (
	"runtime"
	"sync/atomic"
	"time"

	felixclock "felix/clock"
)

// maxBlock bounds one wait of an idle core with no timer due, so a lost
// wake-up (which the sleep protocol rules out) could not hang it for long.
const maxBlock = time.Second

// core is one thread-per-core executor. Every field below inbox is owned by
// the core goroutine (or by the test stepping a manual engine).
type core struct {
	id     int
	engine *Engine
	inbox  *inbox
	clock  felixclock.Clock
	// stopRequested is set by Engine.Close from any goroutine.
	stopRequested atomic.Bool

	disk      coreDisk
	timers    timerList
	batch     []message
	shards    map[*streamShard]struct{}
	stalled   []*streamShard // shards with a full Block subscriber
	onStop    []func()       // close hooks of extension shard types
	stopping  bool
	stopped   bool
	stopTurns int
	idleTurns int // consecutive turns without work (see Config.IdleTurns)

	// The per-core state of the other shard types, nil until first use:
	// cache_shard.go (cacheTable, through c.cacheTable()) and group_table.go
	// (groupTable, through c.groupTable()).
	cacheShards *cacheTable
	groupShards *groupTable
	// roles is the role and generation of every shard open on the core
	// (shardapi_state.go).
	roles shardRoles

	syncTimer      coreTimer
	retentionTimer coreTimer
	metrics        *coreMetrics
}

func newCore(e *Engine, id int) *core {
	c := &core{
		id:     id,
		engine: e,
		inbox:  newInbox(e.cfg.InboxCapacity),
		clock:  e.cfg.Clock,
		batch:  make([]message, 0, e.cfg.DrainBatch),
		shards: map[*streamShard]struct{}{},
	}
	c.syncTimer = coreTimer{index: -1, fn: c.periodicSync}
	c.retentionTimer = coreTimer{index: -1, fn: c.retentionTick}
	c.metrics = newCoreMetrics(e.cfg.Metrics, c)
	return c
}

// init creates the core's disk on the calling goroutine (its ring's owner).
func (c *core) init() error {
	d, err := c.engine.cfg.newDisk(c.id)
	if err != nil {
		return err
	}
	c.disk = d
	cfg := &c.engine.cfg
	if cfg.DataDir != "" && cfg.Fsync == FsyncPeriodic {
		c.timers.schedule(&c.syncTimer, c.clock.MonoNanos()+int64(cfg.FsyncInterval))
	}
	if cfg.DataDir != "" && (cfg.RetentionBytes > 0 || cfg.RetentionAge > 0) {
		c.scheduleRetention()
	}
	return nil
}

// scheduleRetention starts the retention timer unless it runs already: at
// start when the engine sets a retention bound, else when the first shard of
// a stream with its own bound opens on c (openShard).
func (c *core) scheduleRetention() {
	if c.retentionTimer.index < 0 {
		c.timers.schedule(&c.retentionTimer, c.clock.MonoNanos()+int64(c.engine.cfg.RetentionInterval))
	}
}

// run is the core goroutine: lock to a thread, pin it, create the ring,
// loop until stopped.
func (c *core) run(cpu int, started chan<- error) {
	defer c.engine.exited.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cpu >= 0 {
		c.metrics.pinned.Store(pinThread(cpu) == nil)
	}
	if err := c.init(); err != nil {
		c.stopped = true
		c.failQueued()
		started <- err
		return
	}
	started <- nil
	for !c.stopped {
		c.step(true)
	}
}

// step is one turn of the core loop (docs/architecture.md, core): drain a
// bounded batch of the inbox → apply each message → serve shards held by a
// Block subscriber → Flush staged appends → Poll the disk (blocking only
// when the inbox is empty and the core said so) → run due timers. It
// reports whether the turn did work (drained a message, served a held shard
// or fired a timer); Engine.Step, the manual engines' seam, returns it.
func (c *core) step(mayBlock bool) bool {
	if !c.stopping && c.stopRequested.Load() {
		c.stopping = true
	}
	c.batch = c.inbox.drain(c.batch[:0])
	drained := len(c.batch)
	if drained > 0 {
		c.metrics.drainBatch.Update(float64(drained))
	}
	for i := range c.batch {
		c.dispatch(&c.batch[i])
		c.batch[i] = message{}
	}
	progressed := c.serveStalled()
	worked := drained > 0 || progressed
	c.flush()
	block := time.Duration(0)
	if mayBlock && c.stopping {
		block = time.Millisecond // waiting for appends in flight
	}
	if drained > 0 || progressed {
		c.idleTurns = 0
	} else if c.idleTurns < c.engine.cfg.IdleTurns {
		// Recently busy: look again after yielding the thread's P instead of
		// paying a kernel sleep and wake-up for a message that is
		// probably on its way. Bounded: an idle core sleeps soon.
		c.idleTurns++
		runtime.Gosched()
		progressed = true
	}
	if mayBlock && !c.stopping && drained < cap(c.batch) && !progressed && c.inbox.prepareSleep() {
		if c.serveStalled() {
			c.inbox.awake()
			c.flush()
		} else {
			block = c.untilNextTimer()
		}
	}
	if err := c.disk.Poll(block); err != nil {
		c.failAllShards(storageError("poll", err))
	}
	if block > 0 {
		c.inbox.awake()
	}
	if c.timers.run(c.clock.MonoNanos()) > 0 {
		worked = true
	}
	if c.stopping {
		c.finishStop()
	}
	return worked
}

func (c *core) flush() {
	if err := c.disk.Flush(); err != nil {
		c.failAllShards(storageError("flush", err))
	}
}

// untilNextTimer is how long the core may sleep: until its next timer, at
// most maxBlock, at least 1 ns (a due timer still polls the ring once).
func (c *core) untilNextTimer() time.Duration {
	at, ok := c.timers.next()
	if !ok {
		return maxBlock
	}
	d := time.Duration(at - c.clock.MonoNanos())
	return min(max(d, 1), maxBlock)
}

func (c *core) dispatch(m *message) {
	switch m.kind {
	case msgPublish:
		if err := c.streamRefusal(m.shard); err != nil { // a follower, or closed by CloseShard
			m.done(PublishResult{}, err)
			return
		}
		m.shard.publish(m.req, m.done, m.enqueuedNanos)
	case msgOp:
		m.op.apply(c)
	}
}

// wake makes the core look at its inbox and stalled shards again. Any
// goroutine.
func (c *core) wake() {
	if c.inbox.wakeRequest() && c.disk != nil {
		_ = c.disk.Wake()
	}
}

// serveStalled lets shards whose Block subscribers drained resume; it
// reports whether any made progress.
func (c *core) serveStalled() bool {
	if len(c.stalled) == 0 {
		return false
	}
	progressed := false
	kept := c.stalled[:0]
	for _, s := range c.stalled {
		if s.serveBlocked() {
			progressed = true
		}
		if len(s.blocking) > 0 {
			kept = append(kept, s)
		}
	}
	clear(c.stalled[len(kept):])
	c.stalled = kept
	return progressed
}

func (c *core) markStalled(s *streamShard) {
	for _, x := range c.stalled {
		if x == s {
			return
		}
	}
	c.stalled = append(c.stalled, s)
}

func (c *core) periodicSync(now int64) {
	if err := c.disk.SyncAll(); err != nil {
		c.failAllShards(storageError("fsync", err))
	}
	c.timers.schedule(&c.syncTimer, now+int64(c.engine.cfg.FsyncInterval))
}

func (c *core) retentionTick(now int64) {
	c.enforceRetention(time.UnixMicro(c.clock.WallMicros()))
	c.timers.schedule(&c.retentionTimer, now+int64(c.engine.cfg.RetentionInterval))
}

// enforceRetention applies the retention bounds to every durable shard's
// record log; a failure fails that shard.
func (c *core) enforceRetention(now time.Time) {
	for s := range c.shards {
		r, ok := s.records.(logRetainer)
		if !ok || s.closed {
			continue
		}
		if _, err := r.EnforceRetention(now); err != nil {
			s.fail(storageError("retention", err))
		}
	}
}

func (c *core) failAllShards(err error) {
	for s := range c.shards {
		s.fail(err)
	}
}

// requestStop asks the core to stop (any goroutine). The stop message goes
// through the inbox's closing: queued messages are failed with ErrClosed.
func (c *core) requestStop() {
	for _, m := range c.inbox.close() {
		failMessage(m, ErrClosed)
	}
	c.stopRequested.Store(true)
	if c.disk != nil {
		_ = c.disk.Wake()
	}
}

func failMessage(m message, err error) {
	switch m.kind {
	case msgPublish:
		m.done(PublishResult{}, err)
	case msgOp:
		m.op.fail(err)
	}
}

func (c *core) failQueued() {
	for _, m := range c.inbox.close() {
		failMessage(m, ErrClosed)
	}
}

// stopSteps bounds how many loop turns a stopping core waits for appends in
// flight before failing them.
const stopSteps = 100000

// finishStop runs on a stopping core after each turn: once no append is in
// flight (or after stopSteps turns), it closes every shard and the disk.
func (c *core) finishStop() {
	c.stopTurns++
	if c.stopTurns < stopSteps {
		for s := range c.shards {
			if s.inflight.len() > 0 || s.producerPending.len() > 0 || s.producerCompacting {
				return
			}
		}
	}
	for s := range c.shards {
		s.close(ErrClosed)
	}
	for _, hook := range c.onStop {
		hook()
	}
	c.timers = timerList{}
	_ = c.disk.Close()
	c.stopped = true
}

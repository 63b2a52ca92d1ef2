package core

import (
	"fmt"
	"sync/atomic"
	"time"

	"felix/proto"
)

// streamShard is one shard of a stream: its log (durable) or replay ring
// (in-memory), its subscribers and its idempotent-producer window. Every
// field is owned by core c; other goroutines only hold the pointer. The
// embedded logOwner carries its appends in flight (records, producer keys,
// compactions), its sticky failure (failed; ErrStorageFailed-wrapped, or
// ErrNotFound after delete), closed and the close waiting for idleness.
type streamShard struct {
	logOwner
	c       *core
	name    StreamName
	index   int
	durable bool

	records     shardLog // durable only
	producerLog shardLog // durable only: idempotent keys (producer.go)
	// openedFollower: the shard was opened as a follower of its replica set (before its
	// placement is recorded in core.roles): its logs hold only what its leader wrote, so
	// recovery writes nothing of its own (follows).
	openedFollower bool
	replay         *replayRing // in-memory only
	next           uint64      // in-memory: next offset

	// fanoutNext is the first offset not yet handed to subscribers: live
	// subscriptions registered now receive every batch from here on.
	fanoutNext uint64

	// Commit and release (release.go): committed is one past the last record
	// whose append completed; released (<= committed) is the release mark,
	// below which records are acknowledged, delivered and readable;
	// unreleased holds the committed batches not yet wholly below it.
	consistency   Consistency
	hasReplicaSet bool
	committed     uint64
	released      uint64
	unreleased    fifo[inflightPublish]

	inflight        fifo[inflightPublish]
	producers       *producerWindow
	producerPending fifo[*producerEntry] // entries whose key record is in flight
	producerScratch []byte
	producerArgs    [1][]byte
	// producerCompacting is set while a compaction of the producers log is
	// in flight (one at a time; also counted by the logOwner).
	producerCompacting bool

	subs     []*Subscription
	blocking []*Subscription // Block subscribers with a full queue
	held     fifo[heldPublish]
	stall    coreTimer

	onAppended  func(first, last uint64, err error) // bound once: no per-append closure
	onLogged    func(first, last uint64, err error)
	onCompacted func(first, last uint64, err error)
	metrics     *shardMetrics

	// onCommit, when set, runs each time a batch of the records log
	// committed, after its fanout: the shard's group state wakes its parked
	// polls (group_shard.go recordsCommitted).
	onCommit func()
	// onClose, when set, runs once when the shard closes, with the reason:
	// the shard's group state answers its parked polls (group_shard.go streamClosed).
	onClose func(error)

	// damage is the first damage found in the record log (damage.go; any
	// goroutine); stopVerify cancels the startup check of its sealed segments.
	damage     atomic.Pointer[DamageError]
	stopVerify func()
	// unservable is set when the logs could not open for damage
	// (openDamaged): the shard refuses publishes and subscriptions with it.
	unservable *DamageError
	// logOpts are the stream's own log options (reopens use them); the
	// storage retry (storage_retry.go) runs retryTimer every retryDelay.
	logOpts    logOptions
	retryTimer coreTimer
	retryDelay time.Duration
}

// inflightPublish is a durable publish staged in the log, waiting for its
// append to complete (appends of one log complete in order).
type inflightPublish struct {
	first, last uint64
	frame       []byte                     // with offsets; nil when nobody subscribed at append time
	done        func(PublishResult, error) // nil when already acknowledged
	producer    *producerEntry             // idempotent publishes
	stagedNanos int64
}

// heldPublish is a publish waiting for the shard (a full Block subscriber)
// or for the original of a duplicate idempotent publish.
type heldPublish struct {
	req           *PublishRequest
	done          func(PublishResult, error)
	enqueuedNanos int64
}

// openStreamShard opens (recovering) shard index of meta's stream on c; a follower's
// recovery writes nothing to its logs (follows).
func (c *core) openStreamShard(spec *StreamSpec, index int, follower bool) (*streamShard, error) {
	cfg := &c.engine.cfg
	s := &streamShard{c: c, name: spec.Name, index: index, durable: spec.Durable, consistency: spec.Consistency,
		openedFollower: follower}
	s.onAppended = s.appended
	s.onLogged = s.producerLogged
	s.onCompacted = s.producerCompacted
	s.stall = coreTimer{index: -1, fn: s.stallExpired}
	s.retryTimer = coreTimer{index: -1, fn: s.retryStorage}
	s.logOpts = spec.logOptions()
	s.initOwner(c, s.failHeld, s.closeAndRemove)
	s.producers = newProducerWindow(cfg.ProducerWindow)
	if spec.Durable {
		if err := s.openLogs(s.logOpts); err != nil && !s.openDamaged(err) { // damage.go
			return nil, err
		}
		s.durableLog = s.records
		s.fanoutNext = s.records.NextOffset()
		s.committed, s.released = s.fanoutNext, s.fanoutNext
		s.reopenReleaseMark() // replicate_mark.go: a replicated Quorum shard holds its recovered tail
		defer s.startVerify() // damage.go, once the metrics exist
	} else {
		size := spec.MemoryReplayRecords
		if size == 0 {
			size = cfg.MemoryReplayRecords
		}
		s.replay = newReplayRing(size)
	}
	s.metrics = newShardMetrics(cfg.Metrics, s)
	c.shards[s] = struct{}{}
	if s.unservable != nil {
		s.fail(s.unservable)
	}
	return s, nil
}

// logAddr names the shard's log of kind log (incarnation 0).
func (s *streamShard) logAddr(log proto.ReplicaLog) LogAddr {
	return LogAddr{Kind: ShardStream, Name: s.name, Shard: s.index, Log: log}
}

// openLogs opens the record and producers logs with the stream's own
// options and rebuilds the producer window.
func (s *streamShard) openLogs(opts logOptions) error {
	var err error
	if s.records, err = s.c.disk.OpenLog(s.logAddr(proto.LogStream), opts); err != nil {
		return storageError(fmt.Sprintf("open %s shard %d", s.name, s.index), err)
	}
	if s.producerLog, err = s.c.disk.OpenLog(s.logAddr(proto.LogProducers), opts); err != nil {
		_ = s.records.Close()
		return storageError(fmt.Sprintf("open producers of %s shard %d", s.name, s.index), err)
	}
	if err = s.recoverProducers(); err != nil {
		_ = s.records.Close()
		_ = s.producerLog.Close()
		return storageError(fmt.Sprintf("recover producers of %s shard %d", s.name, s.index), err)
	}
	return nil
}

// nextOffset is the offset the next record will take.
func (s *streamShard) nextOffset() uint64 {
	if s.durable {
		return s.records.NextOffset()
	}
	return s.next
}

// earliestOffset is the oldest offset a subscriber can still read.
func (s *streamShard) earliestOffset() uint64 {
	if s.durable {
		return s.records.EarliestOffset()
	}
	return s.replay.earliest(s.next)
}

// publish takes one publish message on the core.
func (s *streamShard) publish(req *PublishRequest, done func(PublishResult, error), enqueued int64) {
	switch {
	case s.closed:
		done(PublishResult{}, ErrNotFound)
	case s.failed != nil:
		done(PublishResult{}, s.failed)
	case len(s.blocking) > 0 || s.held.len() > 0:
		if s.held.len() >= s.c.engine.cfg.HeldPublishes {
			done(PublishResult{}, ErrOverloaded)
			return
		}
		s.held.push(heldPublish{req: req, done: done, enqueuedNanos: enqueued})
	default:
		s.apply(req, done, enqueued)
	}
}

// apply appends one batch (durable) or stores and fans it out (in-memory).
func (s *streamShard) apply(req *PublishRequest, done func(PublishResult, error), enqueued int64) {
	if req.ProducerID != "" && s.producers.duplicate(s, heldPublish{req: req, done: done}) {
		return
	}
	ts := req.TimestampMicros
	if ts == 0 {
		ts = s.c.clock.WallMicros()
	}
	now := s.c.clock.MonoNanos()
	s.metrics.appendWait.Update(float64(now-enqueued) / 1e9)
	s.metrics.batch.Update(float64(len(req.Payloads)))
	if !s.durable {
		s.applyMemory(req, done)
		return
	}
	first := s.records.NextOffset()
	last := first + uint64(len(req.Payloads)) - 1
	var frame []byte
	if len(s.subs) > 0 {
		frame = encodeEventFrame(true, first, req.Payloads)
	}
	entry := inflightPublish{first: first, last: last, frame: frame, stagedNanos: now}
	// The key is staged before the records: the record log writes after the
	// producers log (openLogs), so a kill never leaves these records on disk
	// without their key (producer.go, "Durability").
	if req.ProducerID != "" {
		entry.producer = s.producers.begin(req.ProducerID, req.Sequence, first, last)
		s.logProducer(entry.producer)
	}
	if err := s.records.Append(req.Payloads, ts, s.onAppended); err != nil {
		err = s.writeFailed("append", err) // storage_retry.go
		s.fail(err)
		if entry.producer != nil {
			s.producers.abort(s, entry.producer, err)
		}
		done(PublishResult{}, err)
		return
	}
	s.begin()
	if ackMode(req.Ack, true) == AckOnCommit {
		entry.done = done
	} else {
		done(PublishResult{Shard: s.index, FirstOffset: first, LastOffset: last}, nil)
	}
	s.inflight.push(entry)
}

// ackMode resolves AckDefault.
func ackMode(m AckMode, durable bool) AckMode {
	if m == AckDefault {
		if durable {
			return AckOnCommit
		}
		return AckOnEnqueue
	}
	return m
}

func (s *streamShard) applyMemory(req *PublishRequest, done func(PublishResult, error)) {
	n := len(req.Payloads)
	first := s.next
	last := first + uint64(n) - 1
	s.next += uint64(n)
	frame := encodeEventFrame(false, first, req.Payloads)
	s.replay.add(replayBatch{base: first, count: n, frame: frame})
	s.fanout(first, n, frame)
	if req.ProducerID != "" {
		p := s.producers.begin(req.ProducerID, req.Sequence, first, last)
		p.committed, p.logged = true, true
		s.producers.settle(s, p)
	}
	done(PublishResult{Shard: s.index, FirstOffset: first, LastOffset: last, Committed: true}, nil)
}

// appended is the records log's append callback (runs in Poll, on the core).
func (s *streamShard) appended(first, last uint64, err error) {
	if s.inflight.len() == 0 {
		panic(fmt.Sprintf("core: %s shard %d: append completion [%d, %d] with nothing in flight", s.name, s.index, first, last))
	}
	e := s.inflight.pop()
	if err == nil && (e.first != first || e.last != last) {
		panic(fmt.Sprintf("core: %s shard %d: append completed [%d, %d], expected [%d, %d]", s.name, s.index, first, last, e.first, e.last))
	}
	if err != nil {
		err = s.writeFailed("commit", err) // storage_retry.go: a *WriteError, retried
		s.fail(err)
		if e.producer != nil {
			s.producers.abort(s, e.producer, err)
		}
		if e.done != nil {
			e.done(PublishResult{}, err)
		}
		s.end()
		return
	}
	s.metrics.commit.Update(float64(s.c.clock.MonoNanos()-e.stagedNanos) / 1e9)
	s.committed = last + 1
	s.unreleased.push(e)
	if s.releasesAtCommit() {
		s.releaseTo(s.committed)
	}
	s.end()
}

// readFrame re-reads a committed batch from the log and encodes it: for a
// batch appended before its first subscriber registered.
func (s *streamShard) readFrame(first uint64, count int) []byte {
	var b frameBuilder
	b.reset(true, first, 4096)
	end := first + uint64(count)
	err := s.records.ReadCommitted(first, 1<<30, func(off uint64, _ int64, p []byte) bool {
		if off >= end {
			return false
		}
		b.add(p)
		return true
	})
	if err != nil || b.count != count {
		s.fail(storageError("read back", fmt.Errorf("batch at %d: %d of %d records: %v", first, b.count, count, err)))
		return nil
	}
	return b.finish()
}

// endSubscribers ends every live subscription of the shard with err.
func (s *streamShard) endSubscribers(err error) {
	for _, sub := range s.subs {
		sub.end(err)
	}
	for _, sub := range s.blocking {
		sub.end(err)
	}
	clear(s.subs)
	s.subs = s.subs[:0]
}

// failHeld is the shard's logOwner.failHook: its first failure (err) fails
// the publishes it holds; fail (logOwner) makes it refuse publishes from now on.
func (s *streamShard) failHeld(err error) {
	s.metrics.failed.Store(1)
	for s.held.len() > 0 {
		h := s.held.pop()
		h.done(PublishResult{}, err)
	}
	s.startRetry(err) // storage_retry.go: an I/O failure of the log is retried
}

// close ends the shard (stream deleted, or core stopping): subscribers end
// with err, held publishes fail, logs close. In-flight appends must have
// completed.
func (s *streamShard) close(err error) {
	if s.closed {
		return
	}
	s.fail(err)
	s.closeOwner()
	if s.onClose != nil {
		s.onClose(err)
	}
	s.endSubscribers(err)
	s.subs, s.blocking = nil, nil
	s.dropUnreleased(err)
	s.c.timers.stop(&s.stall)
	s.c.timers.stop(&s.retryTimer)
	if s.stopVerify != nil {
		s.stopVerify()
	}
	if s.records != nil {
		s.closeReleaseMark() // replicate_mark.go
		_ = s.records.Close()
		_ = s.producerLog.Close()
	}
	s.metrics.unregister()
	delete(s.c.shards, s)
}

// closeAndRemove is the shard's logOwner.closeHook (closeWhenIdle, once no
// append is in flight): it closes the shard and, when remove, deletes its
// logs.
func (s *streamShard) closeAndRemove(reason error, remove bool) error {
	s.close(reason)
	if remove && s.durable {
		return s.c.disk.RemoveLogs(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index})
	}
	return nil
}

// openShard opens shard index of spec's stream on c (as a follower of its replica set
// when follower: see follows), its logs with the stream's own options (StreamSpec
// retention and SyncOnCommit, passed to
// coreDisk.OpenLog) and, when the stream sets a retention bound, makes sure
// c's retention timer runs (Config.RetentionInterval) even if the engine
// sets none.
func (c *core) openShard(spec *StreamSpec, index int, follower bool) (*streamShard, error) {
	s, err := c.openStreamShard(spec, index, follower)
	if err == nil && spec.Durable && spec.hasRetention() {
		c.scheduleRetention()
	}
	return s, err
}

// follows reports whether s is a follower of its replica set: its placement's role, or
// before the placement is recorded, the role it was opened as. A follower's logs hold
// only what its leader wrote at the leader's offsets (seeds/internal-protocol.txt,
// "Replication"): recovery and the group replay write nothing of their own there (no
// producer fence, no cut of a torn batch, no group repair records); a promotion rebuilds
// that state and writes what it owes as the leader (replicate_promote.go).
func (s *streamShard) follows() bool {
	if p := s.c.roles.streams[s]; p != nil {
		return p.role == RoleFollower
	}
	return s.openedFollower
}

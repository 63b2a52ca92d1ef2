package core

import (
	"errors"
	"fmt"
	"time"

	"felix/core/groups"
)

// Consumer groups on durable stream shards (docs/groups.md; spec/client-protocol.md
// §8.3). The state machine of one shard's groups is core/groups; this file keeps one
// groupShard per stream shard that has been used by a group operation, in the core's
// groupShards slot, with the shard's two companion logs (seglog "groups" and
// "dead-letters" directories), and drives it: appends its effects, releases answers
// once their records are durable, expires leases and answers parked polls from one
// core timer.

// groupReadBytes bounds one read of a companion log during replay.
const groupReadBytes = 1 << 20

// GroupRecord is one record handed out by GroupPoll. Payload is a copy owned by the
// caller.
type GroupRecord struct {
	Offset          uint64
	Delivery        uint32 // 1 for the first delivery
	TimestampMicros int64
	Payload         []byte
}

// GroupPollRequest is one consumer's poll of a group on one durable stream shard.
type GroupPollRequest struct {
	Stream     StreamName
	Shard      int
	Group      string
	Consumer   uint64        // chosen by the caller, e.g. one per connection and group
	MaxRecords int           // 1..; capped by the group's max records per poll
	MaxWait    time.Duration // 0: answer at once, possibly empty; else park up to this long
	// MaxBytes bounds the payload bytes of one answer (0: no bound). The records
	// leased beyond it are given back (groups.Shard.Return: ready at once, delivery
	// count unchanged) for the next poll; the first record is handed out even when
	// it alone is larger. The broker derives it from its frame size, since an answer
	// too large to send would be lost every time it is redelivered.
	MaxBytes int
}

// GroupAckRequest acks (GroupAck) or nacks (GroupNack) leased records. A Ref with
// Delivery 0 means the consumer's current lease.
type GroupAckRequest struct {
	Stream   StreamName
	Shard    int
	Group    string
	Consumer uint64
	Refs     []groups.Ref
	// DelayMillis is a nack's redelivery delay; negative = the group's default.
	// Ignored by GroupAck.
	DelayMillis int64
}

// DeadLettersRequest lists a group's dead letters with offset >= From, at most Limit.
type DeadLettersRequest struct {
	Stream StreamName
	Shard  int
	Group  string
	From   uint64
	Limit  int
}

// RedriveRequest puts dead letters back into delivery.
type RedriveRequest struct {
	Stream  StreamName
	Shard   int
	Group   string
	Offsets []uint64
}

// GroupPoll leases up to req.MaxRecords records of the group to req.Consumer
// (docs/groups.md). The group is created on first use. With no record available and
// req.MaxWait > 0 the poll is parked on the core (which keeps serving) and answered
// when records commit or MaxWait passes (then with no records). done runs on the
// shard's core, after the delivery records are durable, and must not block.
// Errors (here or in done): ErrNotFound, ErrInvalid (in-memory stream, bad request,
// wrapping the groups error), ErrOverloaded, ErrClosed, ErrStorageFailed-wrapped.
func (e *Engine) GroupPoll(req GroupPollRequest, done func([]GroupRecord, error)) error {
	if req.MaxRecords < 1 || req.MaxWait < 0 || req.MaxBytes < 0 {
		return fmt.Errorf("%w: max records %d, max wait %v, max bytes %d", ErrInvalid, req.MaxRecords, req.MaxWait, req.MaxBytes)
	}
	s, err := e.groupStreamShard(req.Stream, req.Shard)
	if err != nil {
		return err
	}
	return e.post(s.c, message{kind: msgOp, op: &groupPollOp{shard: s, req: req, done: done}})
}

// GroupAck acknowledges leased records. done receives nil, or an error wrapping a
// *groups.OffsetsError for refused offsets (groups.ErrLeaseExpired /
// groups.ErrNotLeased; the other offsets were acked), groups.ErrUnknownGroup, or the
// errors of GroupPoll. It runs after the ack's cursor record is durable.
func (e *Engine) GroupAck(req GroupAckRequest, done func(error)) error {
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		return gs.sm.Ack(req.Group, groups.ConsumerID(req.Consumer), req.Refs, now)
	}, done)
}

// GroupNack gives leased records back for redelivery after req.DelayMillis (or
// dead-letters those that reached max deliveries). Errors as GroupAck.
func (e *Engine) GroupNack(req GroupAckRequest, done func(error)) error {
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		return gs.sm.Nack(req.Group, groups.ConsumerID(req.Consumer), req.Refs, req.DelayMillis, now)
	}, done)
}

// DeadLetters lists dead letters of a group in offset order; done receives them and
// the offset to continue from (spec/client-protocol.md §8.3 next_from).
// Errors: groups.ErrUnknownGroup, groups.ErrInvalidRequest, and those of GroupPoll.
func (e *Engine) DeadLetters(req DeadLettersRequest, done func([]groups.DeadLetter, uint64, error)) error {
	var list []groups.DeadLetter
	var next uint64
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, _ int64) (groups.Token, error) {
		var err error
		list, next, err = gs.sm.DeadLetters(nil, req.Group, req.From, req.Limit)
		return gs.sm.CurrentToken(), err
	}, func(err error) { done(list, next, err) })
}

// Redrive puts dead letters back into delivery; done receives how many were redriven
// and an error wrapping *groups.OffsetsError (groups.ErrNotDead) for the others.
func (e *Engine) Redrive(req RedriveRequest, done func(int, error)) error {
	n := 0
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		var tok groups.Token
		var err error
		n, tok, err = gs.sm.Redrive(req.Group, req.Offsets, now)
		return tok, err
	}, func(err error) { done(n, err) })
}

// CreateGroup creates a group on one stream shard with cfg (zero fields take the
// defaults of docs/groups.md), starting at the shard's oldest retained offset. An
// existing group is left as it is (nil). done runs once the create record is durable.
// Errors: ErrInvalid wrapping groups.ErrInvalidGroupName / ErrInvalidRequest /
// ErrGroupIDCollision, and those of GroupPoll.
func (e *Engine) CreateGroup(name StreamName, shard int, group string, cfg groups.GroupConfig, done func(error)) error {
	return e.groupOp(name, shard, func(gs *groupShard, _ int64) (groups.Token, error) {
		return gs.sm.CreateGroup(group, cfg, gs.stream.records.EarliestOffset())
	}, done)
}

// groupStreamShard returns the durable stream shard a group operation targets.
func (e *Engine) groupStreamShard(name StreamName, shard int) (*streamShard, error) {
	meta := e.lookup(name)
	if meta == nil {
		return nil, ErrNotFound
	}
	if shard < 0 || shard >= len(meta.shards) {
		return nil, fmt.Errorf("%w: %s has no shard %d", ErrNotFound, name, shard)
	}
	if !meta.spec.Durable {
		return nil, fmt.Errorf("%w: consumer groups need a durable stream (%s)", ErrInvalid, name)
	}
	return meta.shards[shard], nil
}

// groupOp posts fn to the shard's core; done gets fn's error once fn's token is durable.
func (e *Engine) groupOp(name StreamName, shard int, fn func(*groupShard, int64) (groups.Token, error), done func(error)) error {
	s, err := e.groupStreamShard(name, shard)
	if err != nil {
		return err
	}
	return e.post(s.c, message{kind: msgOp, op: &groupFuncOp{shard: s, fn: fn, done: done}})
}

type groupFuncOp struct {
	shard *streamShard
	fn    func(*groupShard, int64) (groups.Token, error)
	done  func(error)
}

func (o *groupFuncOp) fail(err error) { o.done(err) }

func (o *groupFuncOp) apply(c *core) {
	gs, err := c.groupShardOf(o.shard)
	if err != nil {
		o.done(err)
		return
	}
	tok, opErr := o.fn(gs, c.wallMillis())
	if opErr != nil && tok == 0 {
		o.done(groupError(opErr))
		return
	}
	gs.after(tok, func(err error) {
		if err == nil {
			err = groupError(opErr)
		}
		o.done(err)
	})
	gs.flush()
	if len(gs.parked) > 0 { // a nack or redrive may have made records ready
		gs.retryParked(c.clock.MonoNanos())
		c.groupTable().arm()
	}
}

// groupError maps state-machine errors onto the engine's sentinels where one fits;
// the groups sentinel stays reachable with errors.Is.
func groupError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, groups.ErrInvalidRequest), errors.Is(err, groups.ErrInvalidGroupName),
		errors.Is(err, groups.ErrGroupIDCollision):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

func (c *core) wallMillis() int64 { return c.clock.WallMicros() / 1000 }

// groupPollOp is a GroupPoll on its core; parked in its groupShard while it waits.
type groupPollOp struct {
	shard    *streamShard
	req      GroupPollRequest
	done     func([]GroupRecord, error)
	gs       *groupShard
	deadline int64 // MonoNanos when a parked poll answers empty
	leases   []groups.Lease
}

func (o *groupPollOp) fail(err error) { o.done(nil, err) }

func (o *groupPollOp) apply(c *core) {
	gs, err := c.groupShardOf(o.shard)
	if err != nil {
		o.done(nil, err)
		return
	}
	o.gs = gs
	o.deadline = c.clock.MonoNanos() + int64(o.req.MaxWait)
	if !o.try(o.req.MaxWait == 0) {
		gs.parked = append(gs.parked, o)
		c.groupTable().arm()
	}
}

// try polls the state machine. It reports whether the poll is answered: records
// were leased, an error occurred, or final (answer even when empty).
func (o *groupPollOp) try(final bool) bool {
	gs, log := o.gs, o.shard.records
	leases, tok, err := gs.sm.Poll(o.leases[:0], groups.PollRequest{
		Group:      o.req.Group,
		Consumer:   groups.ConsumerID(o.req.Consumer),
		MaxRecords: o.req.MaxRecords,
		NowMillis:  gs.c.wallMillis(),
		Window:     groups.Window{Earliest: log.EarliestOffset(), End: log.CommittedOffset()},
	})
	o.leases = leases
	if err != nil {
		o.done(nil, groupError(err))
		return true
	}
	if len(leases) == 0 && !final {
		gs.flush() // a create record, if the poll created the group
		return false
	}
	gs.after(tok, o.answer)
	gs.flush()
	return true
}

// answer reads the leased records' payloads and hands them out (their delivery
// records are durable now). Leases beyond req.MaxBytes are given back for the next
// poll, which a parked poll may be (the group timer retries those).
func (o *groupPollOp) answer(err error) {
	if err != nil {
		o.done(nil, err)
		return
	}
	recs, used, err := readLeased(o.shard.records, o.leases, o.req.MaxBytes)
	if err != nil {
		o.done(nil, storageError("read group records", err))
		return
	}
	if used < len(o.leases) {
		o.giveBack(o.leases[used:])
	}
	o.done(recs, nil)
}

// giveBack returns leases the answer could not carry to the group (groups.Shard.Return).
func (o *groupPollOp) giveBack(leases []groups.Lease) {
	gs := o.gs
	if gs.failed != nil {
		return
	}
	refs := make([]groups.Ref, len(leases))
	for i, l := range leases {
		refs[i] = groups.Ref{Offset: l.Offset, Delivery: l.Delivery}
	}
	if _, err := gs.sm.Return(o.req.Group, groups.ConsumerID(o.req.Consumer), refs, gs.c.wallMillis()); err != nil {
		return // the group is gone: nothing is leased any more
	}
	gs.c.groupTable().arm()
}

// readLeasedFirstBuf bounds the first allocation of readLeased's buffer: sizing it
// from the first record times the lease count reserved up to 256 × 16 MiB once.
const readLeasedFirstBuf = 4 << 20

// readLeased reads the payloads of leases (one log read per run of consecutive
// offsets) into one buffer, so a poll allocates a few times, not once per record.
// Records deleted by retention since they were leased are left out. With maxBytes > 0
// it stops before the first record that would take the payload bytes past maxBytes
// (the first record is always read); used is the number of leases covered, the
// others are to be given back.
func readLeased(log shardLog, leases []groups.Lease, maxBytes int) (recs []GroupRecord, used int, err error) {
	recs = make([]GroupRecord, 0, len(leases))
	ends := make([]int, 0, len(leases))
	var buf []byte
	full := false
	i := 0
	for i < len(leases) && !full {
		j := i + 1
		for j < len(leases) && leases[j].Offset == leases[j-1].Offset+1 {
			j++
		}
		k := i
		err := log.ReadCommitted(leases[i].Offset, 1<<30, func(off uint64, ts int64, p []byte) bool {
			if off != leases[k].Offset {
				return false
			}
			if maxBytes > 0 && len(recs) > 0 && len(buf)+len(p) > maxBytes {
				full = true
				return false
			}
			if buf == nil { // one buffer per poll, sized for records like the first
				size := min(len(p)*len(leases), max(readLeasedFirstBuf, len(p)))
				if maxBytes > 0 {
					size = min(size, max(maxBytes, len(p)))
				}
				buf = make([]byte, 0, size)
			}
			buf = append(buf, p...)
			ends = append(ends, len(buf))
			recs = append(recs, GroupRecord{Offset: off, Delivery: leases[k].Delivery, TimestampMicros: ts})
			k++
			return k < j
		})
		var trimmed *trimmedError
		if err != nil && !errors.As(err, &trimmed) {
			return nil, 0, err
		}
		if full {
			i = k // leases[k] did not fit
		} else {
			i = j
		}
	}
	start := 0
	for r := range recs {
		recs[r].Payload = buf[start:ends[r]:ends[r]]
		start = ends[r]
	}
	return recs, min(i, len(leases)), nil
}

// groupTable is a core's group state (the core's groupShards slot).
type groupTable struct {
	c      *core
	shards map[*streamShard]*groupShard
	timer  coreTimer
	firing bool // inside fire: arm waits for its end
}

// groupShard drives the groups state machine of one durable stream shard.
type groupShard struct {
	c        *core
	stream   *streamShard
	sm       *groups.Shard
	cursor   shardLog
	dead     shardLog
	batches  fifo[groupBatch]  // effects appended, oldest first
	waiters  fifo[groupWaiter] // answers waiting for their token, in token order
	parked   []*groupPollOp
	failed   error
	closed   bool
	onCursor func(first, last uint64, err error)
	onDead   func(first, last uint64, err error)
	// compacting counts compaction appends in flight (maybeCompact).
	compacting        int
	compactNext       uint64 // held records at which maybeCompact looks again
	onCursorCompacted func(first, last uint64, err error)
	onDeadCompacted   func(first, last uint64, err error)
}

// groupBatch is one Effects batch whose appends are in flight.
type groupBatch struct {
	token                groups.Token
	needCursor, needDead bool
}

type groupWaiter struct {
	token groups.Token
	fn    func(error)
}

// groupTable returns the core's table, creating it on first use.
func (c *core) groupTable() *groupTable {
	if t, ok := c.groupShards.(*groupTable); ok {
		return t
	}
	t := &groupTable{c: c, shards: map[*streamShard]*groupShard{}}
	t.timer = coreTimer{index: -1, fn: t.fire}
	c.groupShards = t
	c.onStop = append(c.onStop, t.closeAll)
	return t
}

// groupShardOf returns the group state of s, opening and replaying its companion
// logs on first use. Errors: ErrNotFound (shard closed), ErrStorageFailed-wrapped.
func (c *core) groupShardOf(s *streamShard) (*groupShard, error) {
	t := c.groupTable()
	gs := t.shards[s]
	if gs != nil && (gs.closed || s.closed) {
		gs.close(ErrNotFound)
		delete(t.shards, s)
		gs = nil
	}
	if s.closed {
		return nil, ErrNotFound
	}
	if gs != nil {
		if gs.failed != nil {
			return nil, gs.failed
		}
		return gs, nil
	}
	gs, err := c.openGroupShard(s)
	if err != nil {
		return nil, err
	}
	t.shards[s] = gs
	return gs, nil
}

func (c *core) openGroupShard(s *streamShard) (*groupShard, error) {
	gs := &groupShard{c: c, stream: s}
	gs.onCursor, gs.onDead = gs.cursorAppended, gs.deadAppended
	gs.onCursorCompacted, gs.onDeadCompacted = gs.cursorCompacted, gs.deadCompacted
	var err error
	if gs.cursor, err = c.disk.OpenLog(logGroupCursors, s.name, s.index); err != nil {
		return nil, storageError(fmt.Sprintf("open group cursors of %s shard %d", s.name, s.index), err)
	}
	if gs.dead, err = c.disk.OpenLog(logDeadLetters, s.name, s.index); err != nil {
		_ = gs.cursor.Close()
		return nil, storageError(fmt.Sprintf("open dead letters of %s shard %d", s.name, s.index), err)
	}
	if err = gs.replay(); err != nil {
		gs.closeLogs()
		return nil, storageError(fmt.Sprintf("replay groups of %s shard %d", s.name, s.index), err)
	}
	gs.flush() // repair records: durable before any later answer (tokens are ordered)
	s.onCommit, s.onClose = gs.recordsCommitted, gs.streamClosed
	return gs, nil
}

// streamClosed is the stream shard's close hook: the group state closes with
// the shard (parked polls and waiters get its reason) and leaves the table.
func (gs *groupShard) streamClosed(reason error) {
	gs.close(reason)
	if t, ok := gs.c.groupShards.(*groupTable); ok && t.shards[gs.stream] == gs {
		delete(t.shards, gs.stream)
	}
}

// recordsCommitted is the stream shard's commit hook: records became
// committed, so parked polls retry at once (their max-wait timer stays armed).
func (gs *groupShard) recordsCommitted() {
	if len(gs.parked) == 0 || gs.failed != nil {
		return
	}
	gs.retryParked(gs.c.clock.MonoNanos())
	gs.c.groupTable().arm()
}

// replay rebuilds the state machine from the dead-letter log, then the cursor log.
func (gs *groupShard) replay() error {
	r, err := groups.NewReplayer(groups.Options{}, gs.dead.NextOffset())
	if err != nil {
		return err
	}
	if err := readAll(gs.dead, r.DeadLetter); err != nil {
		return err
	}
	if err := readAll(gs.cursor, r.Cursor); err != nil {
		return err
	}
	sm, _, err := r.Finish(gs.c.wallMillis())
	gs.sm = sm
	return err
}

// readAll feeds every committed record of l to fn, in order.
func readAll(l shardLog, fn func([]byte) error) error {
	next := l.EarliestOffset()
	for next < l.CommittedOffset() {
		var ferr error
		from := next
		err := l.ReadCommitted(from, groupReadBytes, func(off uint64, _ int64, p []byte) bool {
			next = off + 1
			ferr = fn(p)
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

// Compaction of the group logs (docs/groups.md "Compaction"): once the two logs
// hold more than groupCompactFactor times the records of the shard's live state
// (groups.Shard.Snapshot), and at least groupCompactMin records, the live state
// is appended at their tails and their heads dropped (seglog.Log.Compact).
const groupCompactFactor = 4

// groupCompactMin is the fewest records the two logs must hold before a
// compaction is considered (a variable so tests can lower it).
var groupCompactMin uint64 = 1 << 14

// maybeCompact compacts the group logs when they hold far more records than
// the live state: the dead-letter log first (when it holds dead letters), then
// SetDeadLetterLogEnd, then the cursor log (the order of groups.Shard.Snapshot).
func (gs *groupShard) maybeCompact() {
	if gs.compacting > 0 || gs.failed != nil {
		return
	}
	held := gs.cursor.NextOffset() - gs.cursor.EarliestOffset() + gs.dead.NextOffset() - gs.dead.EarliestOffset()
	cc, ok1 := gs.cursor.(logCompactor)
	dc, ok2 := gs.dead.(logCompactor)
	if !ok1 || !ok2 || held < max(groupCompactMin, gs.compactNext) {
		return
	}
	cursor, dead := gs.sm.Snapshot()
	if limit := groupCompactFactor * uint64(len(cursor)+len(dead)); held <= limit || len(cursor) == 0 {
		gs.compactNext = limit + 1 // no snapshot per flush while the state is large
		return
	}
	gs.compactNext = 0
	ts := gs.c.clock.WallMicros()
	if len(dead) > 0 {
		if err := dc.Compact(dead, ts, gs.onDeadCompacted); err != nil {
			gs.fail(storageError("compact dead letters", err))
			return
		}
		gs.compacting++
		gs.sm.SetDeadLetterLogEnd(gs.dead.NextOffset())
	}
	if err := cc.Compact(cursor, ts, gs.onCursorCompacted); err != nil {
		gs.fail(storageError("compact group cursors", err))
		return
	}
	gs.compacting++
}

func (gs *groupShard) cursorCompacted(_, _ uint64, err error) { gs.compacted("group cursors", err) }
func (gs *groupShard) deadCompacted(_, _ uint64, err error)   { gs.compacted("dead letters", err) }

// compacted is a compaction append's callback.
func (gs *groupShard) compacted(what string, err error) {
	gs.compacting--
	if err != nil {
		gs.fail(storageError("compact "+what, err))
	}
}

// after runs fn once token t is durable (or with the shard's failure).
func (gs *groupShard) after(t groups.Token, fn func(error)) {
	if gs.failed != nil {
		fn(gs.failed)
		return
	}
	gs.waiters.push(groupWaiter{token: t, fn: fn})
}

// flush appends the staged effects to the two logs. An empty batch still takes its
// place in the order, so the answers waiting for it are released after every earlier
// batch.
func (gs *groupShard) flush() {
	if gs.failed != nil {
		return
	}
	fx := gs.sm.TakeEffects()
	b := groupBatch{token: fx.Token, needCursor: len(fx.Cursor) > 0, needDead: len(fx.DeadLetters) > 0}
	ts := gs.c.clock.WallMicros()
	if b.needCursor {
		if err := gs.cursor.Append(fx.Cursor, ts, gs.onCursor); err != nil {
			gs.fail(storageError("append group cursors", err))
			return
		}
	}
	if b.needDead {
		if err := gs.dead.Append(fx.DeadLetters, ts, gs.onDead); err != nil {
			gs.fail(storageError("append dead letters", err))
			return
		}
	}
	gs.batches.push(b)
	gs.settle()
	gs.maybeCompact()
	gs.c.groupTable().arm()
}

func (gs *groupShard) cursorAppended(_, _ uint64, err error) {
	gs.appended(err, func(b *groupBatch) *bool { return &b.needCursor })
}

func (gs *groupShard) deadAppended(_, _ uint64, err error) {
	gs.appended(err, func(b *groupBatch) *bool { return &b.needDead })
}

// appended clears the need of the oldest batch waiting for that log (appends of one
// log complete in order).
func (gs *groupShard) appended(err error, need func(*groupBatch) *bool) {
	if err != nil {
		gs.fail(storageError("commit group logs", err))
		return
	}
	for i := 0; i < gs.batches.len(); i++ {
		if p := need(gs.batches.at(i)); *p {
			*p = false
			break
		}
	}
	gs.settle()
}

// settle marks complete batches durable, in order, and releases their answers.
func (gs *groupShard) settle() {
	for gs.batches.len() > 0 {
		b := gs.batches.at(0)
		if b.needCursor || b.needDead {
			break
		}
		gs.sm.MarkDurable(b.token)
		gs.batches.pop()
	}
	for gs.waiters.len() > 0 && gs.sm.Durable(gs.waiters.at(0).token) {
		w := gs.waiters.pop()
		w.fn(nil)
	}
}

// fail makes the group state refuse every operation with err and answers every
// waiter and parked poll with it.
func (gs *groupShard) fail(err error) {
	if gs.failed != nil {
		return
	}
	gs.failed = err
	for gs.waiters.len() > 0 {
		gs.waiters.pop().fn(err)
	}
	for _, p := range gs.parked {
		p.done(nil, err)
	}
	gs.parked = nil
}

func (gs *groupShard) close(err error) {
	if gs.closed && gs.failed != nil {
		return
	}
	gs.fail(err)
	gs.closed = true
	gs.stream.onCommit, gs.stream.onClose = nil, nil
	gs.closeLogs()
}

func (gs *groupShard) closeLogs() {
	if gs.cursor != nil {
		_ = gs.cursor.Close()
		gs.cursor = nil
	}
	if gs.dead != nil {
		_ = gs.dead.Close()
		gs.dead = nil
	}
}

func (t *groupTable) closeAll() {
	for s, gs := range t.shards {
		gs.close(ErrClosed)
		delete(t.shards, s)
	}
	t.c.timers.stop(&t.timer)
}

// arm schedules the core's group timer: at the earliest lease expiry of any shard and,
// while polls are parked, at the earliest redelivery time and each parked poll's
// deadline. New records wake parked polls through the stream shard's commit hook
// (recordsCommitted), group operations through retryParked after them.
func (t *groupTable) arm() {
	if t.firing {
		return
	}
	now := t.c.clock.MonoNanos()
	wall := t.c.wallMillis()
	at, ok := int64(0), false
	consider := func(v int64) {
		if !ok || v < at {
			at, ok = v, true
		}
	}
	for _, gs := range t.shards {
		if gs.failed != nil {
			continue
		}
		if exp, has := gs.sm.NextExpiry(); has {
			consider(now + (exp-wall)*1e6)
		}
		if len(gs.parked) > 0 {
			if ready, has := gs.sm.NextReady(); has {
				consider(now + (ready-wall)*1e6)
			}
		}
		for _, p := range gs.parked {
			consider(p.deadline)
		}
	}
	if !ok {
		t.c.timers.stop(&t.timer)
		return
	}
	t.c.timers.schedule(&t.timer, max(at, now+int64(groupTimerMin)))
}

// groupTimerMin keeps the group timer from firing again in the same timer run.
const groupTimerMin = 100_000 // ns

// fire expires leases, flushes what that owes, and retries parked polls.
func (t *groupTable) fire(now int64) {
	t.firing = true
	wall := t.c.wallMillis()
	for s, gs := range t.shards {
		if gs.failed != nil {
			continue
		}
		if s.closed {
			gs.close(ErrNotFound)
			delete(t.shards, s)
			continue
		}
		gs.sm.Tick(wall)
		gs.flush()
		gs.retryParked(now)
	}
	t.firing = false
	t.arm()
}

// retryParked polls again for every parked poll; those that find records, or whose
// wait is over, are answered.
func (gs *groupShard) retryParked(now int64) {
	kept := gs.parked[:0]
	for _, p := range gs.parked {
		if !p.try(now >= p.deadline) {
			kept = append(kept, p)
		}
	}
	clear(gs.parked[len(kept):])
	gs.parked = kept
}

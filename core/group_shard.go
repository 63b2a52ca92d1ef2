package core

// One durable stream shard's group state on its core (the overview of groups is at
// the top of group_ops.go): groupShard opens and replays the cursor and dead-letter
// companion logs, appends the state machine's effects, releases answers once their
// token is durable, fails and closes, and compacts the two logs from a snapshot.

import (
	"fmt"

	"felix/core/groups"
	"felix/proto"
)

// groupShard drives the groups state machine of one durable stream shard.
// The embedded logOwner carries its appends in flight over both logs
// (compactions counted in compacting), its sticky failure and closed; it
// closes with its stream shard, not when idle.
type groupShard struct {
	logOwner
	c        *core
	stream   *streamShard
	sm       *groups.Shard
	cursor   shardLog
	dead     shardLog
	batches  fifo[groupBatch]  // effects appended, oldest first
	waiters  fifo[groupWaiter] // answers waiting for their token, in token order
	parked   []*groupPollOp
	onCursor func(first, last uint64, err error)
	onDead   func(first, last uint64, err error)
	// compactNext: held records at which maybeCompact looks again.
	compactNext       uint64
	onCursorCompacted func(first, last uint64, err error)
	onDeadCompacted   func(first, last uint64, err error)
	// promoting parks group operations while a promoted shard rebuilds its groups
	// (replicate_promote.go).
	promoting rebuildGate
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

func (c *core) openGroupShard(s *streamShard) (*groupShard, error) {
	gs := &groupShard{c: c, stream: s}
	gs.onCursor, gs.onDead = gs.cursorAppended, gs.deadAppended
	gs.onCursorCompacted, gs.onDeadCompacted = gs.cursorCompacted, gs.deadCompacted
	gs.initOwner(c, gs.failWaiters, gs.closeGroups)
	var err error
	if gs.cursor, err = c.disk.OpenLog(s.logAddr(proto.LogGroupCursors), logOptions{}); err != nil {
		return nil, storageError(fmt.Sprintf("open group cursors of %s shard %d", s.name, s.index), err)
	}
	if gs.dead, err = c.disk.OpenLog(s.logAddr(proto.LogDeadLetters), logOptions{}); err != nil {
		_ = gs.cursor.Close()
		return nil, storageError(fmt.Sprintf("open dead letters of %s shard %d", s.name, s.index), err)
	}
	if err = gs.replay(); err != nil {
		gs.closeLogs()
		return nil, storageError(fmt.Sprintf("replay groups of %s shard %d", s.name, s.index), err)
	}
	gs.durableLog = gs.cursor
	if s.follows() {
		// A follower's group logs hold only its leader's records: the replay's repair
		// records are the leader's to write (a promotion replays again and writes them).
		_ = gs.sm.TakeEffects()
	} else {
		gs.flush() // repair records: durable before any later answer (tokens are ordered)
	}
	s.onCommit, s.onClose = gs.recordsCommitted, gs.streamClosed
	return gs, nil
}

// streamClosed is the stream shard's close hook: the group state closes with
// the shard (parked polls and waiters get its reason) and leaves the table.
func (gs *groupShard) streamClosed(reason error) {
	gs.close(reason)
	if t := gs.c.groupShards; t != nil && t.shards[gs.stream] == gs {
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
	if held < max(groupCompactMin, gs.compactNext) {
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
		if !gs.compact(gs.dead, "compact dead letters", dead, ts, gs.onDeadCompacted) {
			return
		}
		gs.sm.SetDeadLetterLogEnd(gs.dead.NextOffset())
	}
	gs.compact(gs.cursor, "compact group cursors", cursor, ts, gs.onCursorCompacted)
}

func (gs *groupShard) cursorCompacted(_, _ uint64, err error) { gs.compacted("group cursors", err) }
func (gs *groupShard) deadCompacted(_, _ uint64, err error)   { gs.compacted("dead letters", err) }

// compacted is a compaction append's callback.
func (gs *groupShard) compacted(what string, err error) {
	if err != nil {
		gs.fail(storageError("compact "+what, err))
	}
	gs.compactEnded()
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
		gs.begin()
	}
	if b.needDead {
		if err := gs.dead.Append(fx.DeadLetters, ts, gs.onDead); err != nil {
			gs.fail(storageError("append dead letters", err))
			return
		}
		gs.begin()
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
		gs.end()
		return
	}
	for i := 0; i < gs.batches.len(); i++ {
		if p := need(gs.batches.at(i)); *p {
			*p = false
			break
		}
	}
	gs.settle()
	gs.end()
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

// failWaiters is the group state's logOwner.failHook: on its first failure
// err (from then on fail makes it refuse every operation with err) every
// waiter and parked poll is answered with it.
func (gs *groupShard) failWaiters(err error) {
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
	gs.closeOwner()
	gs.promoting.finish(false) // parked operations are answered with err
	gs.stream.onCommit, gs.stream.onClose = nil, nil
	gs.closeLogs()
}

// closeGroups is the group state's logOwner.closeHook: it closes with reason
// (its logs are the stream shard's and go with its directory).
func (gs *groupShard) closeGroups(reason error, _ bool) error {
	gs.close(reason)
	return nil
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

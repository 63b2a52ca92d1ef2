package core

import "errors"

// Catch-up (issue 23 item 6; docs/architecture.md, core): a DropNew
// subscriber of a durable shard whose live queue is full does not lose the
// batch. The core marks it catching up at the batch's base offset and from
// then on only moves its catch-up end (catchEnd) with each batch fanned out
// (push); the frames are not queued. Once the subscriber has taken the live
// frames queued before, its own goroutine reads [catchStart, catchEnd) from
// the record log in history pages (nextHistory: ReadCommitted is
// goroutine-safe, so the core and the other subscribers never wait for it),
// and when it reaches catchEnd it rejoins live delivery under the same lock
// push takes, so no batch is missed or delivered twice. Only records that
// retention removed before the subscriber read them are lost: they are
// reported as a gap (Delivery.Dropped of the next delivery, the offsets
// [BaseOffset-Dropped, BaseOffset)), counted as drops. An in-memory shard
// has no log to fall back to and keeps dropping (DropNew).

// errCatchUpGap is nextHistory's answer when a catch-up read met records
// removed by retention: the gap is noted, Next reads on from the oldest.
var errCatchUpGap = errors.New("core: catch-up gap")

// catchUpState is a subscription's catch-up, under Subscription.mu.
type catchUpState struct {
	enabled  bool     // a DropNew subscription of a durable shard
	catching bool     // the core fans out to the log only: see above
	fresh    bool     // a new episode the consumer has not started reading
	start    uint64   // the first offset of the episode
	end      uint64   // one past the last batch fanned out while catching
	pos      uint64   // where the consumer's reading has got to (lag)
	log      shardLog // the shard's record log when the episode began
}

// startCatchUp begins an episode at d (caller holds mu, core goroutine).
func (q *Subscription) startCatchUp(d Delivery) {
	c := &q.catchUp
	c.catching, c.fresh = true, true
	c.start, c.pos, c.end = d.BaseOffset, d.BaseOffset, d.BaseOffset+uint64(d.Count)
	c.log = q.shard.records
	q.shard.metrics.catchUps.Inc()
}

// catchUpLag is the records a catching-up subscriber has still to read
// (caller holds mu).
func (q *Subscription) catchUpLag() uint64 { return q.catchUp.end - q.catchUp.pos }

// resumeCatchUp is the consumer's turn once its live queue is empty: while
// catching up it plans the next log read [histNext, histEnd) and reports
// true; at the end of the range it rejoins live delivery (false).
func (q *Subscription) resumeCatchUp() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := &q.catchUp
	if !c.catching || q.count > 0 || q.err != nil {
		return false
	}
	if c.fresh {
		c.fresh = false
		q.log, q.histNext, q.catchReading = c.log, max(c.start, q.skipBelow), true
	}
	c.pos = q.histNext
	if q.histNext < c.end {
		q.histEnd = c.end
		return true
	}
	c.catching, c.log, q.catchReading = false, nil, false
	return false
}

// catchUpTrimmed handles a catch-up read below the log's oldest offset
// (consumer goroutine): the records [from, oldest) were removed by
// retention; they become a gap reported with the next delivery and counted.
// ok=false: not a catch-up read (the caller ends the subscription with
// too_old, as for a start below the oldest offset).
func (q *Subscription) catchUpTrimmed(err error, from uint64) bool {
	var trimmed *trimmedError
	if !q.catchReading || !errors.As(err, &trimmed) || trimmed.oldest <= from {
		return false
	}
	next := min(trimmed.oldest, q.histEnd)
	gap := next - from
	q.gapPending += gap
	q.dropped.Add(gap)
	q.shard.metrics.drops.Add(int(gap))
	q.histNext = next
	return true
}

// takeGap returns the records lost to retention since the last delivery
// (consumer goroutine) and clears them.
func (q *Subscription) takeGap() uint64 {
	g := q.gapPending
	q.gapPending = 0
	return g
}

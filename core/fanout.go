package core

// fanout hands one committed batch [base, base+count) to every live
// subscriber of the shard (core goroutine). frame is the shared encoding
// (with offsets for durable shards, without for in-memory ones); the variant
// without offsets is derived at most once per batch. A subscriber whose queue
// is full loses the batch (DropNew, counted) or parks it in its overflow
// (Block), which holds further publishes of the shard until it drains.
func (s *streamShard) fanout(base uint64, count int, frame []byte) {
	s.fanoutNext = base + uint64(count)
	if len(s.subs) == 0 {
		return
	}
	var plain []byte
	var lagMax uint64
	kept := s.subs[:0]
	for _, sub := range s.subs {
		d := Delivery{Frame: frame, Shard: s.index, BaseOffset: base, Count: count}
		if s.durable && !sub.withOffsets {
			if plain == nil {
				plain, _ = reframe(frame, 0, false, base)
			}
			d.Frame = plain
		}
		result, queued := sub.push(d)
		switch result {
		case pushClosed:
			continue
		case pushDropped:
			s.metrics.drops.Add(count)
		case pushOverflow:
			s.addBlocking(sub)
		}
		lagMax = max(lagMax, queued)
		kept = append(kept, sub)
	}
	clear(s.subs[len(kept):])
	s.subs = kept
	s.metrics.lag.Store(lagMax)
}

// addBlocking records that sub's queue is full under Block: the shard holds
// new publishes until sub drains, or until its BlockTimeout ends it.
func (s *streamShard) addBlocking(sub *Subscription) {
	for _, b := range s.blocking {
		if b == sub {
			return
		}
	}
	sub.blockDeadline = s.c.clock.MonoNanos() + int64(sub.blockTimeout)
	s.blocking = append(s.blocking, sub)
	if s.stall.index < 0 || sub.blockDeadline < s.stall.at {
		s.c.timers.schedule(&s.stall, sub.blockDeadline)
	}
	s.c.markStalled(s)
}

// serveBlocked drops subscribers that drained (or closed) from the blocking
// list and, once none is left, applies the held publishes in order. It
// reports whether anything changed.
func (s *streamShard) serveBlocked() bool {
	progressed := false
	kept := s.blocking[:0]
	for _, sub := range s.blocking {
		if sub.overflowLen() == 0 {
			sub.stalled.Store(false)
			progressed = true
			continue
		}
		kept = append(kept, sub)
	}
	clear(s.blocking[len(kept):])
	s.blocking = kept
	if len(s.blocking) == 0 {
		s.c.timers.stop(&s.stall)
	}
	for len(s.blocking) == 0 && s.held.len() > 0 && s.failed == nil {
		h := s.held.pop()
		s.apply(h.req, h.done, h.enqueuedNanos)
		progressed = true
	}
	return progressed
}

// stallExpired ends the Block subscribers that stayed full past their
// deadline (ErrSlowSubscriber), then lets the shard resume.
func (s *streamShard) stallExpired(now int64) {
	next := int64(-1)
	for _, sub := range s.blocking {
		if sub.blockDeadline <= now {
			sub.end(ErrSlowSubscriber)
			s.metrics.slowEnded.Inc()
			continue
		}
		if next < 0 || sub.blockDeadline < next {
			next = sub.blockDeadline
		}
	}
	if next >= 0 {
		s.c.timers.schedule(&s.stall, next)
	}
	s.serveBlocked()
}

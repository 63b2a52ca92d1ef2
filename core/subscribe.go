package core

import "fmt"

// Subscribe registers a subscription on one shard (spec/client-protocol.md
// §1.3, §7): the live registration happens first, on the shard's core, and
// fixes the live start; records below it come from the log (durable) or the
// replay ring (in-memory) before the live frames, so the subscriber sees
// every record once, in offset order.
//
// Errors: ErrInvalid (bad policy), ErrNotFound (no such stream, shard out
// of range), ErrNotHere (the shard is not open here, or is a follower),
// *CursorError (too_old: below the oldest retained offset; in_future: past
// the shard's next offset), ErrOverloaded, ErrClosed. A live subscription
// ends with ErrMoved when its shard changes role or closes (SetRole,
// CloseShard).
func (e *Engine) Subscribe(req SubscribeRequest) (*Subscription, error) {
	if req.Policy > Block || req.Start > StartOffset || req.QueueCapacity < 0 || req.BlockTimeout < 0 {
		return nil, fmt.Errorf("%w: subscribe policy %d, start %d, capacity %d", ErrInvalid, req.Policy, req.Start, req.QueueCapacity)
	}
	meta := e.lookup(req.Stream)
	if meta == nil {
		return nil, ErrNotFound
	}
	if req.Shard < 0 || req.Shard >= len(meta.shards) {
		return nil, fmt.Errorf("%w: %s has no shard %d", ErrNotFound, req.Stream, req.Shard)
	}
	s := meta.shards[req.Shard]
	if p := meta.places[req.Shard]; p.role != RoleLeader {
		return nil, notHere(ShardRef{Kind: ShardStream, Name: req.Stream, Shard: req.Shard}, p.role)
	}
	sub := &Subscription{
		id:           e.nextSubscription.Add(1),
		shard:        s,
		core:         s.c,
		withOffsets:  req.WithOffsets && meta.spec.Durable,
		policy:       req.Policy,
		capacity:     req.QueueCapacity,
		blockTimeout: req.BlockTimeout,
		historyBytes: e.cfg.HistoryFrameBytes,
		notify:       make(chan struct{}, 1),
	}
	if sub.capacity == 0 {
		sub.capacity = e.cfg.SubscriberQueueCapacity
	}
	if sub.blockTimeout == 0 {
		sub.blockTimeout = e.cfg.BlockTimeout
	}
	sub.items = make([]Delivery, sub.capacity)
	sub.catchUp.enabled = meta.spec.Durable && req.Policy == DropNew // catchup.go
	err := e.runOn(s.c, func(c *core) error {
		if err := c.streamRefusal(s); err != nil {
			return err
		}
		return s.subscribe(sub, req.Start, req.Offset)
	})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// subscribe registers sub on the core and plans its history.
func (s *streamShard) subscribe(sub *Subscription, kind StartKind, offset uint64) error {
	if s.closed {
		return ErrNotFound
	}
	if s.unservable != nil { // its log did not open (damage.go)
		return s.unservable
	}
	earliest, next := s.earliestOffset(), s.nextOffset()
	start := next
	switch kind {
	case StartEarliest:
		start = earliest
	case StartOffset:
		if offset < earliest {
			return &CursorError{Reason: CursorTooOld, Requested: offset, Available: earliest}
		}
		if offset > next {
			return &CursorError{Reason: CursorInFuture, Requested: offset, Available: next}
		}
		start = offset
	}
	sub.skipBelow = start
	if start < s.fanoutNext {
		if s.durable {
			sub.log, sub.histNext, sub.histEnd = s.records, start, s.fanoutNext
		} else {
			sub.memHistory = s.replayFrom(start)
		}
	}
	s.subs = append(s.subs, sub)
	return nil
}

// replayFrom returns the replay ring's frames from offset start up to the
// live start, the first one cut to begin at start.
func (s *streamShard) replayFrom(start uint64) []Delivery {
	batches := s.replay.from(start)
	out := make([]Delivery, 0, len(batches))
	for _, b := range batches {
		d := Delivery{Frame: b.frame, Shard: s.index, BaseOffset: b.base, Count: b.count, History: true}
		if b.base < start {
			skip := int(start - b.base)
			frame, err := reframe(b.frame, skip, false, start)
			if err != nil {
				continue
			}
			d = Delivery{Frame: frame, Shard: s.index, BaseOffset: start, Count: b.count - skip, History: true}
		}
		out = append(out, d)
	}
	return out
}

package core

// A core's group table (the overview of groups is at the top of group_ops.go):
// groupTable maps the core's stream shards to their groupShard, opens one on first
// use, closes them all when the core stops, and runs the core's one group timer
// (lease expiry, redelivery, parked polls' deadlines and retries).

// groupTable is a core's group state (the core's groupShards slot).
type groupTable struct {
	c      *core
	shards map[*streamShard]*groupShard
	timer  coreTimer
	firing bool // inside fire: arm waits for its end
}

// groupTable returns the core's table, creating it on first use.
func (c *core) groupTable() *groupTable {
	if t := c.groupShards; t != nil {
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
	for s, gs := range t.shards {
		if gs.failed != nil || t.c.roles.follows(s) { // a follower's state comes from its leader
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
		if gs.failed != nil || t.c.roles.follows(s) {
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

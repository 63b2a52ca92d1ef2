package core

// The role and generation of every shard open on a core (the Engine calls
// that change them are in shardapi.go): a core keeps one placement per open
// stream or cache shard in its roles table, checks it before it serves a
// client's publish, subscription, cache operation, watch or group operation
// (a follower refuses them with ErrNotHere), and, when SetRole or CloseShard
// moves a shard, ends the shard's live subscriptions, cache watches and
// parked group polls with ErrMoved. Only the core goroutine touches the
// table; the engine reaches it through the inbox (Engine.runOn).

import (
	"errors"
	"fmt"
)

// placement is one open shard's role and generation on its core.
type placement struct {
	ref        ShardRef
	role       Role
	generation uint64
}

// shardRoles is a core's table of placements (the core's roles field).
type shardRoles struct {
	streams map[*streamShard]*placement
	caches  map[*cacheShard]*placement
	// followers counts the placements that are not RoleLeader: while it is
	// 0 (a single node) the publish path skips the lookup.
	followers int
}

// placeStream records that s is open at p.
func (r *shardRoles) placeStream(s *streamShard, p placement) {
	if r.streams == nil {
		r.streams = map[*streamShard]*placement{}
	}
	r.forgetStream(s)
	r.streams[s] = &p
	r.count(p.role, 1)
}

// placeCache records that cs is open at p.
func (r *shardRoles) placeCache(cs *cacheShard, p placement) {
	if r.caches == nil {
		r.caches = map[*cacheShard]*placement{}
	}
	r.forgetCache(cs)
	r.caches[cs] = &p
	r.count(p.role, 1)
}

// forgetStream drops s's placement (it closes).
func (r *shardRoles) forgetStream(s *streamShard) {
	if p := r.streams[s]; p != nil {
		r.count(p.role, -1)
		delete(r.streams, s)
	}
}

// forgetCache drops cs's placement (it closes).
func (r *shardRoles) forgetCache(cs *cacheShard) {
	if p := r.caches[cs]; p != nil {
		r.count(p.role, -1)
		delete(r.caches, cs)
	}
}

// follows reports whether s is open here as a follower: its group state
// changes only through its leader's records, so the core's group timer
// neither expires its leases nor dead-letters its records.
func (r *shardRoles) follows(s *streamShard) bool {
	if r.followers == 0 {
		return false
	}
	p := r.streams[s]
	return p != nil && p.role != RoleLeader
}

func (r *shardRoles) count(role Role, d int) {
	if role != RoleLeader {
		r.followers += d
	}
}

// change moves p to (role, generation). It reports whether anything changed,
// or ErrStaleGeneration-wrapped when generation is below p's.
func (r *shardRoles) change(p *placement, role Role, generation uint64) (bool, error) {
	if generation < p.generation {
		return false, fmt.Errorf("%w: %v is open at generation %d, not %d", ErrStaleGeneration, p.ref, p.generation, generation)
	}
	if role == p.role && generation == p.generation {
		return false, nil
	}
	r.count(p.role, -1)
	p.role, p.generation = role, generation
	r.count(role, 1)
	return true, nil
}

// notHere is the ErrNotHere-wrapped refusal of a shard open as role here
// (0: not open).
func notHere(ref ShardRef, role Role) error {
	if role == 0 {
		return fmt.Errorf("%w: %v is not open here", ErrNotHere, ref)
	}
	return fmt.Errorf("%w: %v is a %v here", ErrNotHere, ref, role)
}

// movedError is the ErrMoved-wrapped reason a shard's subscriptions, watches
// and parked polls end with when it becomes role at generation (role 0:
// closed here).
func movedError(ref ShardRef, role Role, generation uint64) error {
	if role == 0 {
		return fmt.Errorf("%w: %v closed here", ErrMoved, ref)
	}
	return fmt.Errorf("%w: %v is now a %v at generation %d", ErrMoved, ref, role, generation)
}

// streamRefusal is why s refuses a client publish, subscription or group
// operation on its core: ErrNotHere-wrapped when s is a follower, or when
// CloseShard closed it (the caller held an older catalog entry); else nil.
// Cheap while no shard of the core is a follower and s has not failed.
func (c *core) streamRefusal(s *streamShard) error {
	if s.failed != nil && errors.Is(s.failed, ErrMoved) {
		return notHere(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, 0)
	}
	if c.roles.followers == 0 {
		return nil
	}
	if p := c.roles.streams[s]; p != nil && p.role != RoleLeader {
		return notHere(p.ref, p.role)
	}
	return nil
}

// serving is the error a cache operation or a new watch on cs gets on its
// core: ErrNotHere-wrapped (a follower, or closed by CloseShard), else the
// shard's own (usable: ErrNotFound once closed, its sticky failure).
func (cs *cacheShard) serving() error {
	if cs.failed != nil && errors.Is(cs.failed, ErrMoved) {
		return notHere(ShardRef{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index}, 0)
	}
	if r := &cs.c.roles; r.followers > 0 {
		if p := r.caches[cs]; p != nil && p.role != RoleLeader {
			return notHere(p.ref, p.role)
		}
	}
	return cs.usable()
}

// setStreamRole moves s to (role, generation) on its core (SetRole): its
// live subscriptions and its groups' parked polls end with ErrMoved and, when
// it no longer leads, the publishes it holds (behind a Block subscriber) fail
// with ErrNotHere and the group timer leaves its leases alone (follows).
// Publishes already appended complete as usual. Errors:
// ErrNotHere-wrapped (s is not open here), ErrStaleGeneration-wrapped.
func (c *core) setStreamRole(s *streamShard, role Role, generation uint64) error {
	p := c.roles.streams[s]
	if p == nil || s.closed {
		return notHere(ShardRef{Kind: ShardStream, Name: s.name, Shard: s.index}, 0)
	}
	promoted := p.role == RoleFollower && role == RoleLeader
	changed, err := c.roles.change(p, role, generation)
	if !changed {
		return err
	}
	moved := movedError(p.ref, role, generation)
	s.endSubscribers(moved)
	if role != RoleLeader {
		refused := notHere(p.ref, role)
		for s.held.len() > 0 {
			s.held.pop().done(PublishResult{}, refused)
		}
	}
	if t := c.groupShards; t != nil {
		if gs := t.shards[s]; gs != nil {
			for _, poll := range gs.parked {
				poll.done(nil, moved)
			}
			clear(gs.parked)
			gs.parked = gs.parked[:0]
			t.arm() // a new leader expires the leases its follower time left due
		}
	}
	if promoted {
		c.promoteStream(s) // replicate_promote.go: rebuilt from the replicated logs
	}
	return nil
}

// setCacheRole moves cs to (role, generation) on its core (SetRole): its
// watches end with ErrMoved. Operations already applied are answered once
// committed, as usual. Errors as setStreamRole.
func (c *core) setCacheRole(cs *cacheShard, role Role, generation uint64) error {
	p := c.roles.caches[cs]
	if p == nil || cs.closed {
		return notHere(ShardRef{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index}, 0)
	}
	promoted := p.role == RoleFollower && role == RoleLeader
	changed, err := c.roles.change(p, role, generation)
	if !changed {
		return err
	}
	moved := movedError(p.ref, role, generation)
	for _, w := range cs.watchers {
		cs.dropWatch(w, moved)
	}
	if promoted {
		c.promoteCache(cs) // replicate_promote.go
	}
	return nil
}

// openPlacedStream opens shard index of spec's stream on c with all its
// logs (openShard: records and producers; a durable shard's group cursors
// and dead letters too, replayed) and places it at p.
func (c *core) openPlacedStream(spec *StreamSpec, index int, p placement) (*streamShard, error) {
	s, err := c.openShard(spec, index, p.role == RoleFollower)
	if err != nil {
		return nil, err
	}
	if spec.Durable {
		if _, err := c.groupShardOf(s); err != nil {
			s.close(ErrNotFound)
			return nil, err
		}
	}
	c.roles.placeStream(s, p)
	return s, nil
}

// openPlacedCache opens shard index of meta's cache on c (its cache and
// counter logs, replayed) and places it at p.
func (c *core) openPlacedCache(meta *cacheMeta, index int, p placement) (*cacheShard, error) {
	cs, err := c.openCacheShard(meta, index)
	if err != nil {
		return nil, err
	}
	c.roles.placeCache(cs, p)
	return cs, nil
}

package core

// Which log a replication call names (issue 18; docs/replication.md, "Wiring"): every
// call of replicate.go resolves its LogAddr to one replicaLog — a shard open on this
// engine (a durable stream's or a durable cache's) and which of its logs — and runs the
// same code for all six logs (seeds/internal-protocol.txt "Replication", "Replicating a
// cache", "Replicating group state"): the stream records and producer-key logs of a
// stream shard (owned by the stream shard), its group-cursor and dead-letter logs (owned
// by its group state), and a cache shard's cache and counter logs. What differs per log
// is only where the log and its owner live, and what a follower's change moves beside
// the log (the records log's commit and release marks: followLog).

import (
	"fmt"

	"felix/proto"
)

// replicaLog is one replicated log of a shard open on this engine. Resolved on any
// goroutine (pointers only); the methods run on the owning core c unless they say
// otherwise.
type replicaLog struct {
	addr   LogAddr
	c      *core
	stream *streamShard // a stream shard's log
	cache  *cacheShard  // a cache shard's log
}

// replicaLogOf resolves addr to its open durable shard. Errors: ErrInvalid (an invalid
// address, an in-memory stream or cache), ErrNotFound (no such stream, cache or shard),
// ErrNotHere (not open here).
func (e *Engine) replicaLogOf(addr LogAddr) (replicaLog, error) {
	if err := addr.Validate(); err != nil {
		return replicaLog{}, err
	}
	r := replicaLog{addr: addr}
	var err error
	if addr.Kind == ShardCache {
		name := CacheName{Tenant: addr.Name.Tenant, Namespace: addr.Name.Namespace, Cache: addr.Name.Stream}
		if meta := e.lookupCache(name); meta != nil {
			r.cache, err = openShardOf(addr, meta.shards, meta.spec.Durable)
		} else {
			_, err = openShardOf[cacheShard](addr, nil, false)
		}
		if err == nil {
			r.c = r.cache.c
		}
		return r, err
	}
	if meta := e.lookup(addr.Name); meta != nil {
		r.stream, err = openShardOf(addr, meta.shards, meta.spec.Durable)
	} else {
		_, err = openShardOf[streamShard](addr, nil, false)
	}
	if err == nil {
		r.c = r.stream.c
	}
	return r, err
}

// openShardOf returns shard addr.Shard of a catalog entry's shards (nil: no entry).
// Errors: ErrNotFound (no entry or no such shard), ErrInvalid (not durable: in-memory
// shards are not replicated), ErrNotHere (not open here).
func openShardOf[S any](addr LogAddr, shards []*S, durable bool) (*S, error) {
	switch {
	case addr.Shard >= len(shards):
		return nil, fmt.Errorf("%w: %v", ErrNotFound, addr)
	case !durable:
		return nil, fmt.Errorf("%w: replication of %v: an in-memory %v is not replicated", ErrInvalid, addr, addr.Kind)
	case shards[addr.Shard] == nil:
		return nil, notHere(addr.Ref(), 0)
	}
	return shards[addr.Shard], nil
}

// placement checks that the shard is open here and usable, and returns its placement.
// Errors: ErrNotHere (closed here), the shard's sticky failure.
func (r replicaLog) placement() (*placement, error) {
	if r.stream != nil {
		return r.c.replicaPlacement(r.stream)
	}
	cs := r.cache
	p := r.c.roles.caches[cs]
	if p == nil || cs.closed || cs.pendingClose != nil {
		return nil, notHere(r.addr.Ref(), 0)
	}
	if cs.failed != nil {
		return nil, cs.failed
	}
	return p, nil
}

// open returns the log and the logOwner that counts its appends (the stream shard's
// for its records and producer keys, the group state's for the two group logs, the
// cache shard's for its two logs). Errors: the group state's open failure.
func (r replicaLog) open() (shardLog, *logOwner, error) {
	if cs := r.cache; cs != nil {
		if r.addr.Log == proto.LogCounters {
			return cs.counters, &cs.logOwner, nil
		}
		return cs.log, &cs.logOwner, nil
	}
	s := r.stream
	switch r.addr.Log {
	case proto.LogStream:
		return s.records, &s.logOwner, nil
	case proto.LogProducers:
		return s.producerLog, &s.logOwner, nil
	}
	gs, err := r.c.groupShardOf(s)
	if err != nil {
		return nil, nil, err
	}
	if r.addr.Log == proto.LogGroupCursors {
		return gs.cursor, &gs.logOwner, nil
	}
	return gs.dead, &gs.logOwner, nil
}

// usable is placement and open together.
func (r replicaLog) usable() (*placement, shardLog, *logOwner, error) {
	p, err := r.placement()
	if err != nil {
		return nil, nil, nil, err
	}
	l, o, err := r.open()
	if err == nil && l == nil {
		err = notHere(r.addr.Ref(), 0)
	}
	return p, l, o, err
}

// state is the log's ReplicaState at placement p. The records log's committed and
// release marks are the stream shard's; the producer-key log is released up to its
// keys' quorum mark while they are gated (producer_gate.go); the other logs are
// released at their commit (they gate nothing).
func (r replicaLog) state(p *placement, l shardLog) ReplicaState {
	st := ReplicaState{Role: p.role, Generation: p.generation, Earliest: l.EarliestOffset(), Tail: l.NextOffset(),
		Committed: l.CommittedOffset(), Durable: l.DurableOffset(), Epochs: l.Epochs()}
	st.Released = st.Committed
	if cs := r.cache; cs != nil {
		st.Released = cs.releasedMark(r.addr.Log, st.Committed) // cache_release.go
	}
	if s := r.stream; s != nil {
		st.Replicated = s.hasReplicaSet
		switch r.addr.Log {
		case proto.LogStream:
			st.Committed, st.Released = s.committed, s.released
		case proto.LogProducers:
			st.Released = s.producers.keysReleased(st.Committed)
		}
	}
	return st
}

// followed moves what follows the log on a follower after its log changed: the records
// log's commit and release marks (followLog). The other logs' state (the producer
// window, the group and cache state machines) is rebuilt from them when the shard is
// promoted (replicate_promote.go).
func (r replicaLog) followed() {
	if r.stream != nil && r.addr.Log == proto.LogStream {
		r.stream.followLog()
	}
}

// whenDurable runs fn on the core once l's durable_offset reaches offset: through the
// owner's OnDurable for its main log; else at once when it has, through one fdatasync
// (SyncNow) on a follower whose log holds the records already, or by looking again every
// Config.FsyncInterval (a leader's wake-up for new records of a companion log), for at
// most whenDurablePolls looks: a waiter whose shipper stopped is not kept for good (the
// shipper looks again on its own every 100 ms). fn never runs when the owner closes first.
func (r replicaLog) whenDurable(l shardLog, o *logOwner, follower bool, offset uint64, fn func()) {
	switch {
	case o.durableLog == l:
		o.OnDurable(offset, fn)
		return
	case l.DurableOffset() >= offset:
		fn()
		return
	}
	if sn, ok := l.(syncNowLog); ok && follower && offset <= l.NextOffset() {
		err := sn.SyncNow(func(durable uint64, err error) {
			if err == nil && durable >= offset && !o.closed {
				fn()
			}
		})
		if err == nil {
			return
		}
	}
	c := r.c
	t := &coreTimer{index: -1}
	looks := 0
	t.fn = func(now int64) {
		looks++
		switch {
		case o.closed:
		case l.DurableOffset() >= offset:
			fn()
		case looks < whenDurablePolls:
			c.timers.schedule(t, now+int64(c.engine.cfg.FsyncInterval))
		}
	}
	c.timers.schedule(t, c.clock.MonoNanos()+int64(c.engine.cfg.FsyncInterval))
}

// whenDurablePolls bounds how often whenDurable looks again at a companion log (about
// 30 s at the default 250 ms FsyncInterval).
const whenDurablePolls = 120

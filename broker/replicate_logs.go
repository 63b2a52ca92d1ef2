package broker

// Which logs of a shard replicate (issue 18: "six logs are replicated"; docs/replication.md,
// "Wiring"): every log of a durable shard with a replica set, each on the same path — one
// shipper goroutine per (follower, log) (replicate_leader.go), one follower handler for
// every Replicate* kind (replicate_follower.go), the decider per log. A stream shard
// ships its records, producer keys, group cursors and dead letters; a cache shard its
// cache and counter records. The records and the producer keys of a Quorum stream, and
// the cache and counter logs of a durable cache, gate their answers: their quorum marks are
// what an acknowledgement waits for (core.Engine.ReleaseReplica); the group and dead-letter
// logs ride the replica set at the shard's generation and never gate records.

import (
	"felix/core"
	"felix/proto"
)

// replicatedKinds are the FLXI kinds the follower's handler serves: the records and
// bootstrap kinds of every log, ReplicateRebuild, Fence and FencePosition.
func replicatedKinds() []proto.Kind {
	kinds := []proto.Kind{proto.KindReplicateRebuild, proto.KindFence, proto.KindFencePosition}
	for l := proto.LogStream; l <= proto.LogLast; l++ {
		kinds = append(kinds, l.RecordsKind(), l.BootstrapKind())
	}
	return kinds
}

// shardKindOf is the kind of shard that has log l: a cache shard the cache and counter
// logs, a stream shard the others (the kind of a request is said by its log, never by
// its ShardRef: seeds/internal-protocol.txt, "Replicating a cache").
func shardKindOf(l proto.ReplicaLog) core.ShardKind {
	if core.ShardCache.HasLog(l) {
		return core.ShardCache
	}
	return core.ShardStream
}

// shardLogs are the replicated logs of a shard of kind k, the records log first.
func shardLogs(k core.ShardKind) []proto.ReplicaLog {
	if k == core.ShardCache {
		return []proto.ReplicaLog{proto.LogCache, proto.LogCounters}
	}
	return []proto.ReplicaLog{proto.LogStream, proto.LogProducers, proto.LogGroupCursors, proto.LogDeadLetters}
}

// gatesRelease reports whether log l's quorum mark gates a Quorum stream's
// acknowledgements: the records and the producer keys.
func gatesRelease(l proto.ReplicaLog) bool {
	return l == proto.LogStream || l == proto.LogProducers || l == proto.LogCache || l == proto.LogCounters
}

// logAddr is log l of shard ref (incarnation 0).
func logAddr(ref core.ShardRef, l proto.ReplicaLog) core.LogAddr {
	return core.LogAddr{Kind: ref.Kind, Name: ref.Name, Shard: ref.Shard, Log: l}
}

// replicaStreamsOf is how many ordered streams replication of log l uses per peer: the
// records and cache logs carry the load, the others a few each, 26 in all, under the
// transport's MaxOrderedStreams of 32 per connection.
func replicaStreamsOf(l proto.ReplicaLog) uint32 {
	switch l {
	case proto.LogStream:
		return replicaStreams
	case proto.LogCache:
		return 6
	}
	return 3
}

// shardDurability says, for the plan, whether a shard this node leads is durable (only
// durable shards replicate) and whether its answers wait for quorum marks (a Quorum stream,
// a durable cache). Caches are looked up once
// per plan (durableCaches).
type shardDurability struct {
	srv    *Server
	caches map[core.CacheName]bool // nil until a cache shard is asked about
}

// of returns ref's durability and consistency; ok=false when its stream or cache is gone.
func (d *shardDurability) of(ref core.ShardRef) (durable, quorum, ok bool) {
	if ref.Kind == core.ShardStream {
		info, err := d.srv.engine.StreamInfo(ref.Name)
		if err != nil {
			return false, false, false
		}
		return info.Spec.Durable, info.Spec.Consistency == core.ConsistencyQuorum, true
	}
	if d.caches == nil {
		d.caches = map[core.CacheName]bool{}
		for _, spec := range d.srv.engine.ListCaches() {
			d.caches[spec.Name] = spec.Durable
		}
	}
	durable, ok = d.caches[core.CacheName{Tenant: ref.Name.Tenant, Namespace: ref.Name.Namespace, Cache: ref.Name.Stream}]
	return durable, durable, ok // a replicated durable cache answers at its quorum marks (core/cache_release.go)
}

// attachesReplicaSet reports whether log l's shipper attaches and detaches its shard's
// replica set in the engine (core.Engine.SetReplicated): the records log of a Quorum stream
// shard, the cache log of a durable cache shard (whose answers then wait for both its logs'
// quorum marks).
func attachesReplicaSet(l proto.ReplicaLog) bool { return l == proto.LogStream || l == proto.LogCache }

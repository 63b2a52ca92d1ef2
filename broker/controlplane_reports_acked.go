package broker

import (
	"felix/core"
	"felix/proto"
)

// shardAcks is one shard this broker leads with a non-empty replica set, as its quorum
// tracker counts it now: the generation, and per member of the replica set (this broker
// first) the offset counted (its own fsynced offset; a follower's acknowledged durable
// offset at this generation, replica.Tracker.Held).
type shardAcks struct {
	ref   core.ShardRef
	gen   uint64
	nodes []string
	held  []uint64
	// counted is, per member, the storage identity the tracker counts it under (hex; "" for
	// the leader, an unknown identity or a follower not attributed yet): the identity its
	// connection named at the handshake (replicate_identity.go, issue 20 gap 4).
	counted []string
}

// leaderAcks reads every running leader's tracker on the shard's gating log (a stream's
// records, a cache's cache log: the logs placement's quorum mark is about), for the
// control-plane reports (controlplane_reports.go). Safe for concurrent use.
func (r *replication) leaderAcks() []shardAcks {
	r.mu.Lock()
	ls := make([]*leaderShard, 0, len(r.leaders))
	for addr, l := range r.leaders {
		if addr.Log == gatingLog(addr.Ref()) && len(l.replicaSet) > 0 {
			ls = append(ls, l)
		}
	}
	r.mu.Unlock()
	out := make([]shardAcks, 0, len(ls))
	for _, l := range ls {
		a := shardAcks{ref: l.ref, gen: l.gen, nodes: append([]string{l.srv.nodeID()}, l.replicaSet...)}
		l.mu.Lock()
		if l.ctx.Err() == nil {
			for _, n := range a.nodes {
				h, _ := l.tracker.Held(n)
				a.held = append(a.held, h)
				id, _ := l.tracker.Identity(n)
				a.counted = append(a.counted, id)
			}
		}
		l.mu.Unlock()
		if a.held != nil {
			out = append(out, a)
		}
	}
	return out
}

// gatingLog is the log of a shard whose positions decide a failover: a stream's records,
// a cache's cache log (cluster/placement.GatingLogs).
func gatingLog(ref core.ShardRef) proto.ReplicaLog {
	if ref.Kind == core.ShardCache {
		return proto.LogCache
	}
	return proto.LogStream
}

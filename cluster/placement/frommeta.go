package placement

import "felix/cluster/meta"

// ReportFromMeta converts the control plane's latest replica report of a shard
// (cluster/meta.Report: the leader that made it, its generation, each replica's node,
// storage identity, durable_offset and stamped incarnation) to a Report. appliedAt is when
// the control plane applied it on its monotonic clock (meta keeps AtMs, the proposer's
// wall clock, which placement does not compare with its own). meta's report carries no
// halted reason, rebuild incarnation or serves-by-round flag yet: the caller adds them from
// the leader's report body (docs/failover.md, "Inputs").
func ReportFromMeta(r meta.Report, appliedAt int64) Report {
	out := Report{Leader: r.Leader, Generation: r.Generation, AtNanos: appliedAt, Stamped: r.Stamped}
	for _, rep := range r.Replicas {
		out.Entries = append(out.Entries, ReportEntry{NodeID: rep.NodeID, StorageID: rep.StorageID,
			Durable: rep.DurableOffset, Incarnation: rep.Incarnation})
	}
	return out
}

// RefusalFromMeta is the fence refusal a replica report carries (cluster/meta.Report's
// FenceRefusal: the report's leader refused to open at the report's generation because
// the replica it names is ahead), nil when it carries none.
func RefusalFromMeta(r meta.Report) *FenceRefusal {
	f := r.FenceRefusal
	if f == nil {
		return nil
	}
	return &FenceRefusal{Generation: r.Generation, By: r.Leader, Ahead: f.Ahead,
		AheadAt: Position{LastGeneration: f.AheadGeneration, Durable: f.AheadDurable}}
}

// ReplicaFromMeta converts a registered broker (cluster/meta.Broker: node id, storage
// identity, registration incarnation) to a Replica of one shard, with its liveness from
// the Detector and the highest generation it reported for the shard.
func ReplicaFromMeta(b meta.Broker, l Liveness, highestGeneration uint64) Replica {
	return Replica{NodeID: b.NodeID, StorageID: b.StorageID, Incarnation: b.Incarnation, Liveness: l,
		HighestGeneration: highestGeneration}
}

package replica

// Held returns the offset the tracker counts member at: the leader's own fsynced offset,
// or the highest a follower acknowledged at this generation in answer to this leader's own
// batches (Acked); member=false for one outside the replica set. The leader's replica
// report to the control plane carries these (docs/failover.md, "Wiring").
func (t *Tracker) Held(member string) (offset uint64, isMember bool) {
	offset, isMember = t.held[member]
	return offset, isMember
}

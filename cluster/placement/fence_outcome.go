package placement

import (
	"fmt"

	"felix/proto"
)

// Outcome returns the round's outcome (docs/failover.md, "Fence rounds"). With
// majority_ack, once a majority answered and none was ahead the round stays open: every
// acknowledged record is on a member of that majority, so a later answer ahead holds only
// records no majority acknowledged (which the divergence rule truncates). A FencedEpoch
// loses the round even then.
func (r *FenceRound) Outcome() FenceOutcome {
	o := FenceOutcome{Majority: len(r.cfg.ReplicaSet)/2 + 1, Answered: 1}
	for _, m := range r.cfg.ReplicaSet {
		if m != r.cfg.Self && len(r.answers[m]) == len(r.gating) {
			o.Answered++
		}
	}
	if r.lost != "" {
		o.State, o.Reason = FenceLost, fmt.Sprintf("%s accepted a newer generation", r.lost)
		return o
	}
	if r.opened {
		o.State, o.Reason = FenceOpen, "opened at a majority; later answers do not change it"
		return o
	}
	if !r.cfg.without.aheadRefusal {
		if who, log, at, found := r.furthestAhead(); found {
			o.State, o.Ahead, o.AheadLog, o.AheadAt = FenceRefused, who, log, at
			o.Reason = fmt.Sprintf("%s is ahead on the %v log at %v (own %v)", who, log, at, r.cfg.Own[log])
			return o
		}
	}
	switch {
	case !r.cfg.MajorityAck:
		o.State, o.Reason = FenceOpen, "before majority_ack: opens on the lease"
	case r.cfg.without.fenceBeforeOpen:
		o.State, o.Reason = FenceOpen, "opens without a fence majority"
	case o.Answered >= o.Majority:
		o.State, o.Reason = FenceOpen, "a majority answered at the generation, none ahead"
		r.opened = true
	default:
		o.State, o.Reason = FencePending, fmt.Sprintf("%d of %d answered", o.Answered, o.Majority)
	}
	return o
}

// furthestAhead finds, on the first gating log where any answer is ahead of Self, the
// member furthest ahead (ties to the earlier member of the replica set). On a log
// subordinate to another gating log (Subordinate), only members level with Self there
// count.
func (r *FenceRound) furthestAhead() (string, proto.ReplicaLog, Position, bool) {
	for _, log := range r.gating {
		own := r.cfg.Own[log]
		best, bestAt := "", own
		for _, m := range r.cfg.ReplicaSet {
			at, ok := r.answers[m][log]
			if ok && at.Ahead(bestAt) && r.level(m, log) {
				best, bestAt = m, at
			}
		}
		if best != "" {
			return best, log, bestAt, true
		}
	}
	return "", proto.LogStream, Position{}, false
}

// level reports whether member m is level with Self on the log l is subordinate to (true
// when l is subordinate to none, or that log does not gate this round).
func (r *FenceRound) level(m string, l proto.ReplicaLog) bool {
	primary, sub := Subordinate(l)
	if !sub {
		return true
	}
	own, gating := r.cfg.Own[primary]
	if !gating {
		return true
	}
	return r.answers[m][primary] == own
}

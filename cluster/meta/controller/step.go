package controller

import (
	"fmt"
	"slices"

	"felix/cluster/meta"
	"felix/cluster/placement"
)

// Step runs one placement pass at the clock's now and returns the promotions it proposed
// and Raft applied. On a member that does not lead it does nothing. For a full down
// timeout after this member became the leader it promotes nothing (it has no arrival
// times yet: every broker is unknown, not down). Then every replicated shard (followers
// not empty) whose leader is not live goes through placement.Decide, and a Promote is
// proposed as set_assignment. Errors: the first proposal that failed (the other shards
// are still decided); a set_assignment refused by the state machine (a generation below
// one a broker reported meanwhile) is logged and decided again next pass.
func (c *Controller) Step() ([]Promotion, error) {
	c.mu.Lock()
	leader, term := c.cfg.Leading()
	c.catchUp(leader, term)
	if !leader {
		c.mu.Unlock()
		return nil, nil
	}
	now := c.cfg.Clock.MonoNanos()
	st := c.cfg.State()
	reports, refusals := c.noteReports(st, now)
	if now-c.since < int64(c.det.Config().DownAfter) {
		c.mu.Unlock()
		return nil, nil
	}
	var want []Promotion
	for _, a := range st.Assignments() {
		refusal := refusals[a.Key()]
		refused := refusal != nil && refusal.Generation == a.Generation && refusal.By == a.Leader
		if len(a.Followers) == 0 || (c.det.State(a.Leader, now) == placement.Live && !refused) {
			continue
		}
		sh := c.shard(st, a, reports, now)
		if refused {
			sh.Refusal = refusal // the leader refused to open at this generation: decided now, live or not
		}
		d, err := placement.Decide(sh, now, c.cfg.Placement)
		if err != nil {
			c.note(a.Key(), "bad shard: "+err.Error())
			continue
		}
		switch d.Action {
		case placement.Promote:
			want = append(want, Promotion{Shard: a.ShardRef, Decision: d, AtNanos: now})
		case placement.Wait, placement.Unplaceable:
			c.note(a.Key(), d.Action.String()+": "+d.Reason+rejections(d.Rejected))
		}
	}
	c.mu.Unlock()
	return c.propose(want)
}

// propose applies each promotion as set_assignment (outside c.mu: a Raft apply waits).
func (c *Controller) propose(want []Promotion) ([]Promotion, error) {
	var done []Promotion
	var first error
	for _, p := range want {
		d := p.Decision
		res, err := c.cfg.Propose(&meta.SetAssignment{ShardRef: p.Shard, Leader: d.Leader,
			Followers: slices.Clone(d.Followers), Generation: d.Generation})
		if err == nil {
			err = res.Err
		}
		if err != nil {
			c.cfg.Logger.Warn("placement loop: promotion not applied", "shard", p.Shard.Key(), "leader", d.Leader,
				"generation", d.Generation, "err", err)
			if first == nil {
				first = fmt.Errorf("controller: set_assignment %s: %w", p.Shard.Key(), err)
			}
			continue
		}
		c.cfg.Logger.Info("placement loop: promoted", "shard", p.Shard.Key(), "leader", d.Leader,
			"followers", d.Followers, "generation", d.Generation, "reason", d.Reason, "rejected", rejections(d.Rejected))
		done = append(done, p)
	}
	return done, first
}

// noteReports returns each shard's latest report with when it was applied on the
// controller's clock, and the fence refusal it carries (RefusalFromMeta), if any: a
// refusal by the shard's leader at its generation is decided at once, the leader being
// live (it did not open). The apply time is
// when a pass first saw its Raft index (at most a Tick late). The
// reports found by a term's first pass were applied before this member led: they count as
// older than the report window (believed, once the leader is dead, only for followers
// whose storage identities match). Called with c.mu held.
func (c *Controller) noteReports(st *meta.State, now int64) (map[string]placement.Report, map[string]*placement.FenceRefusal) {
	old := now - int64(c.cfg.Placement.ReportWindow) - 1
	out, refusals := map[string]placement.Report{}, map[string]*placement.FenceRefusal{}
	for _, r := range st.Reports() {
		k := r.Key()
		seen, ok := c.reports[k]
		if !ok || seen.index != r.Index {
			seen = seenReport{index: r.Index, at: now}
			if c.first {
				seen.at = old
			}
			c.reports[k] = seen
		}
		out[k] = placement.ReportFromMeta(r, seen.at)
		if f := placement.RefusalFromMeta(r); f != nil {
			refusals[k] = f
		}
	}
	c.first = false
	return out, refusals
}

// shard builds placement's view of assignment a at now: every member's registration and
// liveness (a member no longer registered is down), the shard's highest generation and
// its latest report. Leases are not granted yet (LeaseUntil 0), so a down leader is
// replaced as soon as Decide allows. Called with c.mu held.
func (c *Controller) shard(st *meta.State, a meta.Assignment, reports map[string]placement.Report, now int64) *placement.Shard {
	hi, _ := st.HighestGeneration(a.ShardRef)
	sh := &placement.Shard{Generation: a.Generation, Leader: a.Leader, Followers: slices.Clone(a.Followers),
		HighestGeneration: hi}
	for _, id := range append([]string{a.Leader}, a.Followers...) {
		b, ok := st.Broker(id)
		if !ok {
			sh.Replicas = append(sh.Replicas, placement.Replica{NodeID: id, Liveness: placement.Down})
			continue
		}
		sh.Replicas = append(sh.Replicas, placement.ReplicaFromMeta(b, c.det.State(id, now), 0))
	}
	sh.Report, sh.HasReport = reports[a.Key()]
	return sh
}

// note logs a shard's wait or unplaceable reason once per change. Called with c.mu held.
func (c *Controller) note(key, reason string) {
	if c.logged[key] == reason {
		return
	}
	c.logged[key] = reason
	c.cfg.Logger.Warn("placement loop: shard not promoted", "shard", key, "why", reason)
}

// rejections renders each rejected replica's reason.
func rejections(rs []placement.Rejection) string {
	out := ""
	for _, r := range rs {
		out += fmt.Sprintf("; %s: %s", r.NodeID, r.Reason)
	}
	return out
}

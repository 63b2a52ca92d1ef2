package placement

import (
	"fmt"
	"time"

	"felix/cluster/sim"
)

// pnode is the simulated control plane's placement loop: failure detection from the
// heartbeats' arrival (its own clock), the shard's assignment, the leader's report and
// lease, Decide every tick, and the Lead message to the leader it names.
type pnode struct {
	env      sim.Env
	w        *world
	det      *Detector
	sh       Shard
	highest  map[string]uint64
	leading  map[string]uint64 // the generation each broker last said it serves at
	lastLead sim.Time
}

func newPlacement(w *world, env sim.Env) *pnode {
	p := &pnode{env: env, w: w, highest: map[string]uint64{}, leading: map[string]uint64{},
		det: NewDetector(DetectorConfig{SuspectAfter: 150 * time.Millisecond, DownAfter: 300 * time.Millisecond})}
	p.sh = Shard{Generation: 1, Leader: name(w.replicas[0])}
	for _, id := range w.replicas[1:] {
		p.sh.Followers = append(p.sh.Followers, name(id))
	}
	return p
}

// Start names the first leader.
func (p *pnode) Start(now sim.Time) []sim.Envelope[msg] {
	for _, id := range p.w.replicas {
		_ = p.det.Heartbeat(name(id), int64(now), false) // registered at start
	}
	return p.lead(now)
}

func (p *pnode) lead(now sim.Time) []sim.Envelope[msg] {
	p.lastLead = now
	return []sim.Envelope[msg]{{To: nodeOf(p.sh.Leader), Msg: msg{k: kLead, gen: p.sh.Generation}}}
}

// Step takes heartbeats (and grants the leader's lease with the report) and refusals.
func (p *pnode) Step(now sim.Time, from sim.NodeID, m msg) []sim.Envelope[msg] {
	switch m.k {
	case kHeartbeat:
		n := name(from)
		_ = p.det.Heartbeat(n, int64(now), false)
		p.highest[n] = max(p.highest[n], m.hb.ballot)
		p.leading[n] = m.hb.leading
		if n != p.sh.Leader || m.hb.leading != p.sh.Generation || m.hb.report == nil {
			return nil
		}
		p.sh.Report, p.sh.HasReport = *m.hb.report, true
		p.sh.Report.AtNanos = int64(now)
		p.sh.LeaseUntil = p.w.leaseCfg.GrantorExpiry(int64(now))
		return []sim.Envelope[msg]{{To: from, Msg: msg{k: kGrant, gen: p.sh.Generation, local: m.local}}}
	case kRefusal:
		if m.ref.Generation == p.sh.Generation && m.ref.By == p.sh.Leader {
			p.sh.Refusal = m.ref
		}
	}
	return nil
}

// Tick decides; on a promotion it assigns and names the new leader; a named leader that
// does not serve yet is told again.
func (p *pnode) Tick(now sim.Time) []sim.Envelope[msg] {
	p.sh.Replicas = p.sh.Replicas[:0]
	for _, id := range p.w.replicas {
		n := name(id)
		p.sh.Replicas = append(p.sh.Replicas, Replica{NodeID: n, StorageID: "s" + n, Incarnation: 1,
			Liveness: p.det.State(n, int64(now)), HighestGeneration: p.highest[n]})
	}
	d, err := Decide(&p.sh, int64(now), Config{ReportWindow: 200 * time.Millisecond, without: p.w.without})
	if err != nil {
		p.w.fail(err)
		return nil
	}
	if d.Action == Promote {
		p.env.Logf("promotes %s at generation %d: %s", d.Leader, d.Generation, d.Reason)
		p.sh.Generation, p.sh.Leader, p.sh.Followers = d.Generation, d.Leader, d.Followers
		p.sh.Refusal, p.sh.LeaseUntil = nil, 0
		p.sh.HighestGeneration = max(p.sh.HighestGeneration, d.Generation)
		p.w.promotions++
		return p.lead(now)
	}
	if p.leading[p.sh.Leader] != p.sh.Generation && now.Sub(p.lastLead) >= 100*time.Millisecond {
		return p.lead(now)
	}
	return nil
}

// Status renders the assignment.
func (p *pnode) Status() string {
	return fmt.Sprintf("placement leader=%s gen=%d", p.sh.Leader, p.sh.Generation)
}

package placement

import (
	"fmt"
	"time"

	"felix/cluster/replica"
	"felix/cluster/sim"
	"felix/proto"
)

// Timings of the simulation (virtual time): every broker timing scaled down together.
const (
	simHeartbeat    = 50 * time.Millisecond
	simFenceEvery   = 40 * time.Millisecond
	simRoundTimeout = 100 * time.Millisecond
	simMaxBatch     = 8
)

// leading is a node's state while it leads at gen: the fence round (FenceRound), then a
// shipper per follower and the quorum tracker (cluster/replica), the writes waiting for
// the mark, and the reads waiting for confirmation (ReadConfirmer, or the lease).
type leading struct {
	gen       uint64
	round     *FenceRound
	fenceCorr map[uint64]sim.NodeID
	fenced    map[sim.NodeID]bool
	lastFence sim.Time
	serving   bool
	shippers  map[sim.NodeID]*replica.Shipper
	corrTo    map[uint64]sim.NodeID
	tracker   *replica.Tracker
	released  uint64
	reads     *ReadConfirmer
	readVal   map[ReadID]uint64
	roundCorr map[uint64]RoundID
	roundAt   map[RoundID]sim.Time
}

func (n *rnode) nextCorr() uint64 { n.corr++; return n.corr }

// startLeading: placement made this node the leader at gen. It takes the ballot (or, after
// a restart, resumes the generation it already leads) and fences the replica set.
func (n *rnode) startLeading(now sim.Time, gen uint64) []sim.Envelope[msg] {
	self := name(n.env.ID)
	resume := gen == n.ballot.Generation && n.ballot.Leader == self
	if (gen <= n.ballot.Generation && !resume) || gen == n.refused || (n.lead != nil && n.lead.gen == gen) {
		return nil
	}
	if !resume {
		n.writeBallot(replica.Ballot{Generation: gen, Leader: self})
	}
	set := n.w.names()
	round, err := NewFenceRound(FenceConfig{Generation: gen, Self: self, ReplicaSet: set,
		Own: map[proto.ReplicaLog]Position{proto.LogStream: n.position()}, MajorityAck: true, without: n.w.without})
	if err != nil {
		n.w.fail(err)
		return nil
	}
	n.lead = &leading{gen: gen, round: round, fenceCorr: map[uint64]sim.NodeID{}, fenced: map[sim.NodeID]bool{},
		shippers: map[sim.NodeID]*replica.Shipper{}, corrTo: map[uint64]sim.NodeID{},
		readVal: map[ReadID]uint64{}, roundCorr: map[uint64]RoundID{}, roundAt: map[RoundID]sim.Time{}}
	n.env.Logf("leads generation %d", gen)
	return n.lead.decideOpen(n, round.Outcome())
}

// fence sends the Fence to every replica that has not taken it yet.
func (l *leading) fence(n *rnode, now sim.Time) []sim.Envelope[msg] {
	l.lastFence = now
	var out []sim.Envelope[msg]
	for _, id := range n.w.replicas {
		if l.fenced[id] || id == n.env.ID {
			continue
		}
		corr := n.nextCorr()
		l.fenceCorr[corr] = id
		m := &proto.Fence{CorrelationID: corr, Log: proto.LogStream, Generation: l.gen}
		out = append(out, sim.Envelope[msg]{To: id, Msg: msg{k: kRepl, pk: m.Kind(), m: m}})
	}
	return out
}

// decideOpen acts on the round's outcome until the leader serves.
func (l *leading) decideOpen(n *rnode, o FenceOutcome) []sim.Envelope[msg] {
	if l.serving {
		return nil
	}
	switch o.State {
	case FenceOpen:
		l.serve(n)
	case FenceRefused:
		n.env.Logf("refuses to open generation %d: %s", l.gen, o.Reason)
		ref := o.Refusal(l.gen, name(n.env.ID))
		n.lead, n.refused = nil, l.gen
		return []sim.Envelope[msg]{{To: placementNode, Msg: msg{k: kRefusal, ref: &ref}}}
	case FenceLost:
		n.env.Logf("steps down: %s", o.Reason)
		n.lead = nil
	}
	return nil
}

// serve writes the generation-start record (generation_start; not again when it resumes
// a generation it already wrote one for), and the mark counts only past it.
func (l *leading) serve(n *rnode) {
	l.serving = true
	start := uint64(len(n.log))
	if p := n.position(); p.LastGeneration == l.gen {
		start = n.epochs[len(n.epochs)-1].StartOffset
	} else {
		n.writeEpochs(append(append([]replica.Epoch(nil), n.epochs...), replica.Epoch{Generation: l.gen, StartOffset: start}))
		n.appendRecords([][]byte{[]byte(fmt.Sprintf("g%d", l.gen))})
	}
	set := n.w.names()
	l.tracker = replica.NewTracker(replica.TrackerConfig{Generation: l.gen, Leader: name(n.env.ID), ReplicaSet: set,
		GenerationStart: true, StartOffset: start, MajorityAck: true})
	l.released = start + 1
	l.reads, _ = NewReadConfirmer(ReadConfig{Generation: l.gen, Self: name(n.env.ID), ReplicaSet: set,
		without: n.w.without})
	n.env.Logf("serves generation %d from offset %d", l.gen, start)
}

// put appends a client write while serving; otherwise the client hears nothing.
func (l *leading) put(n *rnode, val uint64) {
	if l.serving {
		n.appendRecords([][]byte{[]byte(fmt.Sprintf("v%d", val))})
	}
}

// answer handles an answer to a fence (promotion or read round) or a shipper's request.
func (l *leading) answer(n *rnode, now sim.Time, from sim.NodeID, m msg) []sim.Envelope[msg] {
	corr := m.m.Correlation()
	if round, isRound := l.roundCorr[corr]; isRound {
		delete(l.roundCorr, corr)
		l.roundAnswer(round, from, m)
		return nil
	}
	if id, isFence := l.fenceCorr[corr]; isFence && id == from {
		delete(l.fenceCorr, corr)
		return l.fenceAnswer(n, id, m)
	}
	id, known := l.corrTo[corr]
	if !known || id != from {
		return nil
	}
	delete(l.corrTo, corr)
	sh := l.shippers[id]
	acked := sh.Answer(int64(now), corr, m.m)
	if _, has := sh.Acked(); has {
		l.tracker.Acked(name(id), l.gen, acked)
	}
	if st, _ := sh.State(); st == replica.Fenced {
		n.env.Logf("steps down: %s fenced generation %d", name(id), l.gen)
		n.lead = nil
	}
	return nil
}

func (l *leading) fenceAnswer(n *rnode, id sim.NodeID, m msg) []sim.Envelope[msg] {
	switch a := m.m.(type) {
	case *proto.FenceOk:
		if l.fenced[id] {
			return nil
		}
		l.fenced[id] = true
		// Ship from offset 0: a batch of a newer generation must begin low enough for the
		// follower to compare every record the divergence rule could truncate (the
		// simulated logs are short, so comparing all of it is cheap).
		l.shippers[id] = replica.NewShipper(replica.ShipperConfig{Generation: l.gen, Window: 1 << 12,
			RetryDelay: 20 * time.Millisecond, Timeout: 150 * time.Millisecond}, 0)
		return l.decideOpen(n, l.round.Answer(name(id), AnswerFromFenceOk(a, m.last)))
	case *proto.ReplicateError:
		return l.decideOpen(n, l.round.Refused(name(id), a.Code))
	}
	return nil
}

package replica

import (
	"fmt"
	"time"

	"felix/cluster/sim"
	"felix/proto"
)

// Shipping knobs of the simulated leader.
const (
	simWindow     = 512 // payload bytes in flight per follower
	simMaxBatch   = 6   // records per ReplicateRecords
	simTimeout    = 150 * time.Millisecond
	simRetryDelay = 20 * time.Millisecond
	simFenceEvery = 40 * time.Millisecond
)

// leader is a node's state while it leads at gen: the fence round, then a shipper per
// follower, the quorum tracker, and the client writes waiting for the mark.
type leader struct {
	gen         uint64
	fenceCorr   map[uint64]sim.NodeID
	fenced      map[sim.NodeID]uint64 // FenceOk durable_offset
	lastFence   sim.Time
	serving     bool
	startOffset uint64
	shippers    map[sim.NodeID]*Shipper
	corrTo      map[uint64]sim.NodeID
	tracker     *Tracker
	released    uint64 // records below this were reported to the clients as acknowledged
	ownEpoch    bool
	baseTail    uint64 // the log's tail when it began leading
}

func (n *node) nextCorr() uint64 { n.corr++; return n.corr }

// majority is how many of the replica set (the leader included) must hold an offset.
func (n *node) majority() int { return len(n.w.nodes)/2 + 1 }

// startLeading: placement made this node the leader at gen. It takes the ballot and fences
// the replica set; it serves once a majority (itself included) has taken the fence.
func (n *node) startLeading(now sim.Time, gen uint64) []sim.Envelope[simMsg] {
	if gen <= n.ballot.Generation {
		return nil // placement has moved on already
	}
	n.writeBallot(Ballot{Generation: gen, Leader: nodeName(n.env.ID)})
	n.lead = &leader{gen: gen, fenceCorr: map[uint64]sim.NodeID{}, fenced: map[sim.NodeID]uint64{},
		shippers: map[sim.NodeID]*Shipper{}, corrTo: map[uint64]sim.NodeID{}, baseTail: uint64(len(n.log))}
	n.env.Logf("leads generation %d", gen)
	return n.lead.fence(n, now)
}

// fence sends the Fence to every replica that has not taken it yet.
func (l *leader) fence(n *node, now sim.Time) []sim.Envelope[simMsg] {
	l.lastFence = now
	var out []sim.Envelope[simMsg]
	for _, id := range n.w.nodes {
		if _, done := l.fenced[id]; done || id == n.env.ID {
			continue
		}
		corr := n.nextCorr()
		l.fenceCorr[corr] = id
		m := &proto.Fence{CorrelationID: corr, Log: proto.LogStream, Generation: l.gen}
		out = append(out, sim.Envelope[simMsg]{To: id, Msg: simMsg{kind: m.Kind(), m: m}})
	}
	return out
}

// put appends a client write while serving; otherwise the write is dropped (the client
// hears nothing). Every record below the quorum mark is acknowledged: to its publisher, and
// to subscribers and history readers, who see it (tick).
func (n *node) put(val uint64) {
	l := n.lead
	if l == nil || !l.serving {
		return
	}
	off := uint64(len(n.log))
	if !l.ownEpoch {
		n.writeEpochs(append(append([]Epoch(nil), n.epochs...), Epoch{Generation: l.gen, StartOffset: off}))
		l.ownEpoch = true
	}
	n.appendRecords([][]byte{[]byte(fmt.Sprintf("w%d.%d", l.gen, val))})
}

// serve: a majority took the fence. With generation_start the leader writes its
// generation-start record first, and the mark counts only past it.
func (l *leader) serve(n *node) {
	l.serving = true
	l.startOffset = uint64(len(n.log))
	if n.w.genStart {
		n.writeEpochs(append(append([]Epoch(nil), n.epochs...), Epoch{Generation: l.gen, StartOffset: l.startOffset}))
		n.appendRecords([][]byte{[]byte(fmt.Sprintf("g%d", l.gen))})
		l.ownEpoch = true
	}
	var set []string
	for _, id := range n.w.nodes {
		set = append(set, nodeName(id))
	}
	l.tracker = NewTracker(TrackerConfig{Generation: l.gen, Leader: nodeName(n.env.ID), ReplicaSet: set,
		GenerationStart: n.w.genStart, StartOffset: l.startOffset, MajorityAck: true})
	if n.w.bugStaleTail {
		for id, d := range l.fenced {
			l.tracker.Acked(nodeName(id), l.gen, d) // planted: a FenceOk's longer tail counts
		}
	}
	n.env.Logf("serves generation %d from offset %d", l.gen, l.startOffset)
}

// answer handles an answer to the leader's Fence or to one of its shippers' requests.
func (l *leader) answer(n *node, now sim.Time, from sim.NodeID, m proto.InternalMessage) []sim.Envelope[simMsg] {
	corr := m.Correlation()
	if id, isFence := l.fenceCorr[corr]; isFence {
		delete(l.fenceCorr, corr)
		return l.fenceAnswer(n, id, m)
	}
	id, known := l.corrTo[corr]
	if !known || id != from {
		return nil
	}
	delete(l.corrTo, corr)
	sh := l.shippers[id]
	acked := sh.Answer(int64(now), corr, m)
	if ok, isOk := m.(*proto.ReplicateOk); isOk && n.w.bugStaleTail {
		acked = max(acked, ok.DurableOffset) // planted: the raw durable_offset counts
	}
	if _, has := sh.Acked(); has || n.w.bugStaleTail {
		l.tracker.Acked(nodeName(id), l.gen, acked)
	}
	if st, _ := sh.State(); st == Fenced {
		n.env.Logf("steps down: %s fenced generation %d", nodeName(id), l.gen)
		n.lead = nil
	}
	return nil
}

func (l *leader) fenceAnswer(n *node, id sim.NodeID, m proto.InternalMessage) []sim.Envelope[simMsg] {
	switch a := m.(type) {
	case *proto.FenceOk:
		if _, done := l.fenced[id]; done {
			return nil
		}
		l.fenced[id] = a.DurableOffset
		// Start one record below the tail it inherited (or lower): there is always a batch to
		// compare and acknowledge, also for a follower that holds all of it already.
		l.shippers[id] = NewShipper(ShipperConfig{Generation: l.gen, Window: simWindow,
			RetryDelay: simRetryDelay, Timeout: simTimeout}, min(a.DurableOffset, max(l.baseTail, 1)-1))
		if !l.serving && 1+len(l.fenced) >= n.majority() {
			l.serve(n)
		} else if l.serving && n.w.bugStaleTail {
			l.tracker.Acked(nodeName(id), l.gen, a.DurableOffset) // planted: a longer tail counts
		}
	case *proto.ReplicateError:
		if a.Code == proto.InternalFencedEpoch {
			n.env.Logf("steps down: %s refused the fence at generation %d", nodeName(id), l.gen)
			n.lead = nil
		}
	}
	return nil
}

// tick: re-fence the replicas that have not answered, ship to the others, move the mark and
// acknowledge the writes below it.
func (l *leader) tick(n *node, now sim.Time) []sim.Envelope[simMsg] {
	var out []sim.Envelope[simMsg]
	if len(l.fenced)+1 < len(n.w.nodes) && now.Sub(l.lastFence) >= simFenceEvery {
		out = l.fence(n, now)
	}
	if !l.serving {
		return out
	}
	l.tracker.LeaderDurable(uint64(n.synced))
	for _, id := range n.w.nodes {
		if sh := l.shippers[id]; sh != nil {
			out = append(out, l.ship(n, now, id, sh)...)
		}
	}
	var acks []ackedRecord
	for mark := min(l.tracker.Mark(), uint64(len(n.log))); l.released < mark; l.released++ {
		acks = append(acks, ackedRecord{offset: l.released, rec: string(n.log[l.released]), gen: l.gen})
	}
	if len(acks) > 0 {
		out = append(out, sim.Envelope[simMsg]{To: sim.External, Msg: simMsg{ctl: ctlAcked, acks: acks}})
	}
	return out
}

// ship sends what the shipper asks for: records from the leader's fsynced log, or a rebuild
// of a follower halted as diverged.
func (l *leader) ship(n *node, now sim.Time, id sim.NodeID, sh *Shipper) []sim.Envelope[simMsg] {
	var out []sim.Envelope[simMsg]
	for range 4 {
		snd := sh.Next(int64(now), 0, uint64(n.synced))
		if snd.Kind != SendRecords {
			break
		}
		end, bytes := snd.From, uint64(0)
		for end < snd.To && end < snd.From+simMaxBatch && (end == snd.From || bytes+uint64(len(n.log[end])) <= snd.MaxBytes) {
			bytes += uint64(len(n.log[end]))
			end++
		}
		payloads := append([][]byte(nil), n.log[snd.From:end]...)
		corr := n.nextCorr()
		l.corrTo[corr] = id
		m := &proto.ReplicateRecords{Log: proto.LogStream, CorrelationID: corr, Epoch: l.gen,
			FirstOffset: snd.From, Checksum: proto.BatchChecksum(payloads), Payloads: payloads}
		sh.Sent(int64(now), corr, snd.From, end, bytes)
		out = append(out, sim.Envelope[simMsg]{To: id, Msg: simMsg{kind: m.Kind(), m: m}})
	}
	// The rebuild policy: only while a majority without this follower holds the leader's log
	// past where this leader's generation began, or as far as the follower's copy can agree
	// with the leader's (DivergedBelow): every acknowledged record it holds survives it.
	without := l.tracker.MarkWithout(nodeName(id))
	if snd := sh.Rebuild(0); snd.Kind == SendRebuild && (without > l.startOffset || (sh.DivergedBelow() > 0 && without >= sh.DivergedBelow())) {
		corr := n.nextCorr()
		l.corrTo[corr] = id
		sh.SentOffer(int64(now), corr, SendRebuild, 0)
		n.env.Logf("rebuilds %s", nodeName(id))
		m := &proto.ReplicateRebuild{CorrelationID: corr, Log: proto.LogStream, Generation: l.gen}
		out = append(out, sim.Envelope[simMsg]{To: id, Msg: simMsg{kind: m.Kind(), m: m}})
	}
	return out
}

func (l *leader) status() string {
	if !l.serving {
		return fmt.Sprintf("leader gen=%d fencing", l.gen)
	}
	return fmt.Sprintf("leader gen=%d mark=%d", l.gen, l.tracker.Mark())
}

package replica

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"

	"felix/cluster/sim"
	"felix/proto"
)

// world is the test's side of a simulated shard: the placement (generation, leader), the
// clients' writes and what was acknowledged to them.
type world struct {
	s            *sim.Sim[simMsg]
	nodes        []sim.NodeID
	genStart     bool
	bugStaleTail bool
	gen          uint64
	leaderID     sim.NodeID
	nextVal      uint64
	acked        map[string]ackedRecord // by record
	ackErr       error
}

// generationStart returns the follower's generation-start record parser when
// generation_start is on ("g<generation>"), else nil.
func (w *world) generationStart() func([]byte) (uint64, bool) {
	if !w.genStart {
		return nil
	}
	return parseGenerationStart
}

func parseGenerationStart(p []byte) (uint64, bool) {
	if len(p) < 2 || p[0] != 'g' {
		return 0, false
	}
	var g uint64
	for _, c := range p[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		g = g*10 + uint64(c-'0')
	}
	return g, true
}

// newWorld builds a run of n replicas with the given options.
func newWorld(opts sim.Options, n int, genStart, bugStaleTail bool, trace func(string)) *world {
	w := &world{genStart: genStart, bugStaleTail: bugStaleTail, acked: map[string]ackedRecord{}}
	format := formatSimMsg
	if trace == nil {
		// cluster/sim formats every message it sends, traced or not: skip the work.
		format = func(simMsg) string { return "" }
	}
	w.s = sim.New(sim.Config[simMsg]{Options: opts, New: newNode(w), Format: format,
		Corrupt: corruptSimMsg, External: w.external, Trace: trace})
	w.nodes = w.s.AddNodes(n)
	return w
}

// external receives the leaders' acknowledgements (the records released below their quorum
// marks); a record acknowledged at two offsets, or two records at one, is an error.
func (w *world) external(_ sim.Time, _ sim.NodeID, m simMsg) {
	for _, a := range m.acks {
		if old, seen := w.acked[a.rec]; seen && old.offset != a.offset && w.ackErr == nil {
			w.ackErr = fmt.Errorf("%s acknowledged at offset %d and at %d", a.rec, old.offset, a.offset)
		}
		w.acked[a.rec] = a
	}
}

func (w *world) node(id sim.NodeID) *node {
	if m := w.s.Machine(id); m != nil {
		return m.(*node)
	}
	return nil
}

// eligible lists the replicas placement may promote: a running replica whose log is at
// least as far ahead, by (newest generation in its epochs, tail), as the logs of a majority
// of the replica set (itself included; only running replicas vote).
func (w *world) eligible() []sim.NodeID {
	var out []sim.NodeID
	for _, c := range w.nodes {
		if len(w.voters(c)) >= len(w.nodes)/2+1 {
			out = append(out, c)
		}
	}
	return out
}

// voters lists the running replicas whose logs candidate c is at least as far ahead as.
func (w *world) voters(c sim.NodeID) []sim.NodeID {
	cn := w.node(c)
	if cn == nil {
		return nil
	}
	cg, ct := cn.lastLabel()
	var out []sim.NodeID
	for _, v := range w.nodes {
		if vn := w.node(v); vn != nil {
			if vg, vt := vn.lastLabel(); vg < cg || (vg == cg && vt <= ct) {
				out = append(out, v)
			}
		}
	}
	return out
}

// promote makes id the leader at a new generation, if the rule allows it. As a Raft vote
// is, the choice is atomic with its majority's ballots: every voter takes the new
// generation (and stops taking the old leader's batches) in the same instant placement
// checks it, so the old leader cannot acknowledge a record the new one lacks in between.
// The new leader then fences the replica set as usual.
func (w *world) promote(id sim.NodeID) error {
	if !slices.Contains(w.eligible(), id) {
		return fmt.Errorf("placement refuses %s: not as far ahead as a majority (eligible %v)", nodeName(id), w.eligible())
	}
	for _, x := range w.nodes {
		if n := w.node(x); n != nil {
			w.gen = max(w.gen, n.ballot.Generation)
		}
	}
	w.gen++
	w.leaderID = id
	for _, v := range w.voters(id) {
		if n := w.node(v); v != id && n.ballot.Generation < w.gen {
			n.lead = nil
			n.writeBallot(Ballot{Generation: w.gen, Leader: nodeName(id)})
		}
	}
	for _, e := range w.node(id).startLeading(w.s.Now(), w.gen) {
		if err := w.s.Send(id, e.To, e.Msg); err != nil {
			return err
		}
	}
	return nil
}

// put sends a client write to the leader placement names.
func (w *world) put() {
	w.nextVal++
	if w.leaderID != 0 {
		_ = w.s.Send(sim.External, w.leaderID, simMsg{ctl: ctlPut, val: w.nextVal})
	}
}

// serving returns the node leading at placement's generation and serving, if any.
func (w *world) serving() *node {
	n := w.node(w.leaderID)
	if n == nil || n.lead == nil || !n.lead.serving || n.lead.gen != w.gen {
		return nil
	}
	return n
}

// heal ends every fault, restarts every replica and runs until a leader serves and every
// replica holds its whole log (promoting by the rule when the leader is gone), or fails.
func (w *world) heal() error {
	w.s.Faults().Heal()
	if err := w.s.Faults().SetLink(sim.Any, sim.Any, sim.LinkFaults{Delay: time.Millisecond}); err != nil {
		return err
	}
	for _, id := range w.nodes {
		if !w.s.Up(id) {
			_ = w.s.Restart(id)
		}
	}
	for i := range 16 {
		// No leader, or followers halted for a while: placement tries another replica
		// (its log may not conflict where the current leader's does).
		if e := w.eligible(); len(e) > 0 && (w.serving() == nil || i%8 == 7) {
			_ = w.promote(e[i%len(e)])
		}
		w.s.RunTicks(10)
		if w.caughtUp() {
			return nil
		}
	}
	return fmt.Errorf("liveness: not caught up after healing:\n%s", w.s.Status())
}

// caughtUp reports whether a leader serves with its mark at its tail and every replica
// holds the same log.
func (w *world) caughtUp() bool {
	l := w.serving()
	if l == nil || l.lead.tracker.Mark() != uint64(len(l.log)) || l.synced != len(l.log) {
		return false
	}
	for _, id := range w.nodes {
		n := w.node(id)
		if n == nil || !slices.EqualFunc(n.log, l.log, bytes.Equal) {
			return false
		}
	}
	return true
}

// check is the invariant after healing: every replica holds identical records up to the
// serving leader's quorum mark, and every acknowledged write is at its offset in the
// leader's log and in the logs of a majority of the replica set.
func (w *world) check() error {
	if w.ackErr != nil {
		return w.ackErr
	}
	l := w.serving()
	if l == nil {
		return fmt.Errorf("no leader serves generation %d", w.gen)
	}
	mark := l.lead.tracker.Mark()
	for _, id := range w.nodes {
		n := w.node(id)
		if n == nil || uint64(len(n.log)) < mark || !slices.EqualFunc(n.log[:mark], l.log[:mark], bytes.Equal) {
			return fmt.Errorf("%s does not hold the leader's records up to the mark %d", nodeName(id), mark)
		}
	}
	if lost := w.lost(l); len(lost) > 0 {
		return fmt.Errorf("acknowledged records lost: %s", strings.Join(lost, ", "))
	}
	return nil
}

// lost lists the acknowledged writes the leader's log, or a majority's, does not hold at
// their offset.
func (w *world) lost(l *node) []string {
	var lost []string
	for _, a := range w.ackedInOrder() {
		holders := 0
		for _, id := range w.nodes {
			if n := w.node(id); n != nil && a.offset < uint64(len(n.log)) && string(n.log[a.offset]) == a.rec {
				holders++
			}
		}
		if a.offset >= uint64(len(l.log)) || string(l.log[a.offset]) != a.rec || holders < len(w.nodes)/2+1 {
			lost = append(lost, fmt.Sprintf("%s at %d (on %d)", a.rec, a.offset, holders))
		}
	}
	return lost
}

func (w *world) ackedInOrder() []ackedRecord {
	out := make([]ackedRecord, 0, len(w.acked))
	for _, a := range w.acked {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b ackedRecord) int {
		if a.offset != b.offset {
			return int(a.offset) - int(b.offset)
		}
		return strings.Compare(a.rec, b.rec)
	})
	return out
}

// formatSimMsg renders a message for traces.
func formatSimMsg(m simMsg) string {
	switch m.ctl {
	case ctlLead:
		return fmt.Sprintf("lead gen=%d", m.gen)
	case ctlPut:
		return fmt.Sprintf("put %d", m.val)
	case ctlAcked:
		recs := make([]string, len(m.acks))
		for i, a := range m.acks {
			recs[i] = fmt.Sprintf("%s@%d", a.rec, a.offset)
		}
		return "acked " + strings.Join(recs, " ")
	}
	if r, ok := m.m.(*proto.ReplicateRecords); ok {
		return fmt.Sprintf("ReplicateRecords{epoch=%d first=%d %s}", r.Epoch, r.FirstOffset, fmtPayloads(r.Payloads))
	}
	if f, ok := m.m.(*proto.Fence); ok {
		return fmt.Sprintf("Fence{generation=%d}", f.Generation)
	}
	return fmtMessage(m.m)
}

// corruptSimMsg damages one payload byte of a ReplicateRecords (what batch_checksum covers;
// QUIC turns any other damage into loss). Other messages pass unchanged.
func corruptSimMsg(m simMsg, r *sim.Rand) (simMsg, string) {
	rec, ok := m.m.(*proto.ReplicateRecords)
	if !ok || len(rec.Payloads) == 0 {
		return m, "not corruptible"
	}
	c := *rec
	c.Payloads = append([][]byte(nil), rec.Payloads...)
	i := r.IntN(len(c.Payloads))
	if len(c.Payloads[i]) == 0 {
		return m, "empty payload"
	}
	p := append([]byte(nil), c.Payloads[i]...)
	p[r.IntN(len(p))] ^= byte(1 + r.IntN(255))
	c.Payloads[i] = p
	m.m = &c
	return m, fmt.Sprintf("payload %d damaged", i)
}

package placement

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"felix/cluster/sim"
)

// world is the test's side of the simulation: three replicas (nodes 1-3) and the placement
// loop (node 4) on cluster/sim, the clients' operations and what they were told, and the
// checker.
type world struct {
	s          *sim.Sim[msg]
	replicas   []sim.NodeID
	without    gaps
	leaseReads bool
	leaseCfg   LeaseConfig
	slow       map[sim.NodeID]int64 // the node's clock runs at 1/slow
	promotions int
	err        error
	writes     map[uint64]*writeOp
	reads      map[uint64]*readOp
	next       uint64
}

type writeOp struct {
	val     uint64
	invoked sim.Time
	acked   bool
	ackedAt sim.Time
	off     uint64
}

type readOp struct {
	id      uint64
	to      sim.NodeID
	invoked sim.Time
	done    bool
	doneAt  sim.Time
	val     uint64
	err     string
}

// simOptions are one run's switches: the fixes turned off, lease-mode reads, slowed clocks.
type simOptions struct {
	seed       uint64
	without    gaps
	leaseReads bool
	slow       map[sim.NodeID]int64
	link       sim.LinkFaults
	trace      func(string)
}

func newWorld(o simOptions) *world {
	w := &world{without: o.without, leaseReads: o.leaseReads, slow: o.slow,
		leaseCfg: LeaseConfig{Duration: 400 * time.Millisecond}, writes: map[uint64]*writeOp{}, reads: map[uint64]*readOp{}}
	format := func(m msg) string { return fmtMsg(m) }
	if o.trace == nil {
		format = func(msg) string { return "" }
	}
	w.s = sim.New(sim.Config[msg]{Options: sim.Options{Seed: o.seed, Link: o.link}, New: newReplica(w),
		Format: format, External: w.external, Trace: o.trace})
	w.replicas = w.s.AddNodes(3)
	w.s.AddNodes(1) // placement
	return w
}

func fmtMsg(m msg) string {
	switch m.k {
	case kRepl:
		return fmt.Sprintf("%T%+v", m.m, m.m)
	case kHeartbeat:
		return fmt.Sprintf("heartbeat ballot=%d leading=%d", m.hb.ballot, m.hb.leading)
	}
	return fmt.Sprintf("k=%d val=%d off=%d id=%d gen=%d err=%s", m.k, m.val, m.off, m.id, m.gen, m.err)
}

// names are the replicas' node ids.
func (w *world) names() []string {
	var out []string
	for _, id := range w.replicas {
		out = append(out, name(id))
	}
	return out
}

// local is node id's clock at virtual time now.
func (w *world) local(id sim.NodeID, now sim.Time) int64 {
	if s := w.slow[id]; s > 1 {
		return int64(now) / s
	}
	return int64(now)
}

func (w *world) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// external receives what replicas tell clients.
func (w *world) external(now sim.Time, _ sim.NodeID, m msg) {
	switch m.k {
	case kAck:
		op := w.writes[m.val]
		switch {
		case op == nil:
			w.fail(fmt.Errorf("ack of v%d, never written", m.val))
		case op.acked && op.off != m.off:
			w.fail(fmt.Errorf("v%d acknowledged at offset %d and at %d", m.val, op.off, m.off))
		case !op.acked:
			op.acked, op.ackedAt, op.off = true, now, m.off
		}
	case kGot:
		if op := w.reads[m.id]; op != nil && !op.done {
			op.done, op.doneAt, op.val, op.err = true, now, m.val, m.err
		}
	}
}

// put writes a new value through node to.
func (w *world) put(to sim.NodeID) uint64 {
	w.next++
	w.writes[w.next] = &writeOp{val: w.next, invoked: w.s.Now()}
	w.fail(w.s.Send(sim.External, to, msg{k: kPut, val: w.next}))
	return w.next
}

// get reads through node to.
func (w *world) get(to sim.NodeID) uint64 {
	w.next++
	w.reads[w.next] = &readOp{id: w.next, to: to, invoked: w.s.Now()}
	w.fail(w.s.Send(sim.External, to, msg{k: kGet, id: w.next}))
	return w.next
}

func (w *world) placement() *pnode { return w.s.Machine(placementNode).(*pnode) }

// leader is the node placement currently names.
func (w *world) leader() sim.NodeID { return nodeOf(w.placement().sh.Leader) }

func (w *world) node(id sim.NodeID) *rnode {
	if m := w.s.Machine(id); m != nil {
		return m.(*rnode)
	}
	return nil
}

// settle heals the network, restarts crashed replicas and runs until the named leader
// serves with every replica caught up (or the budget runs out).
func (w *world) settle() error {
	w.s.Faults().Heal()
	for _, id := range w.replicas {
		if !w.s.Up(id) {
			w.fail(w.s.Restart(id))
		}
	}
	for range 100 {
		w.s.RunFor(100 * time.Millisecond)
		if n := w.node(w.leader()); n != nil && n.lead != nil && n.lead.serving && n.lead.tracker.Mark() == uint64(len(n.log)) {
			w.s.RunFor(200 * time.Millisecond) // let the last acks and reads arrive
			return nil
		}
	}
	return fmt.Errorf("no serving, caught-up leader after settling: %s", w.s.Status())
}

// committed is the final leader's log below its quorum mark.
func (w *world) committed() [][]byte {
	n := w.node(w.leader())
	return n.log[:n.lead.tracker.Mark()]
}

// check is the durability and linearizability check: every acknowledged write is in the
// final committed log at the offset it was acknowledged at; every read returned a
// committed value (or none), never older than a write acknowledged before the read was
// invoked, nor older than what a read that finished before it returned.
func (w *world) check() []string {
	log := w.committed()
	pos := map[uint64]int{0: -1}
	for i, r := range log {
		if v, ok := value(r); ok {
			pos[v] = i
		}
	}
	var bad []string
	for _, v := range sortedKeys(w.writes) {
		op := w.writes[v]
		if op.acked && (op.off >= uint64(len(log)) || string(log[op.off]) != fmt.Sprintf("v%d", v)) {
			bad = append(bad, fmt.Sprintf("lost: v%d acknowledged at offset %d (at %v) is not in the final log", v, op.off, op.ackedAt))
		}
	}
	return append(bad, w.checkReads(pos)...)
}

func (w *world) checkReads(pos map[uint64]int) []string {
	var bad []string
	var done []*readOp
	for _, id := range sortedKeys(w.reads) {
		if r := w.reads[id]; r.done && r.err == "" {
			done = append(done, r)
		}
	}
	for _, r := range done {
		p, ok := pos[r.val]
		if !ok {
			bad = append(bad, fmt.Sprintf("dirty: read %d from n%d returned v%d, never committed", r.id, r.to, r.val))
			continue
		}
		for _, v := range sortedKeys(w.writes) {
			if op := w.writes[v]; op.acked && op.ackedAt < r.invoked && pos[v] > p {
				bad = append(bad, fmt.Sprintf("stale: read %d from n%d at %v returned v%d; v%d was acknowledged at %v",
					r.id, r.to, r.invoked, r.val, v, op.ackedAt))
				break
			}
		}
		for _, q := range done {
			if q.doneAt < r.invoked && pos[q.val] > p {
				bad = append(bad, fmt.Sprintf("stale: read %d returned v%d after read %d returned v%d", r.id, r.val, q.id, q.val))
				break
			}
		}
	}
	return bad
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// summary counts the outcomes for the failure message.
func (w *world) summary() string {
	acked, ok, lost := 0, 0, 0
	for _, op := range w.writes {
		if op.acked {
			acked++
		}
	}
	for _, r := range w.reads {
		switch {
		case r.done && r.err == "":
			ok++
		case r.done && strings.Contains(r.err, "leadership_lost"):
			lost++
		}
	}
	return fmt.Sprintf("%d writes (%d acked), %d reads (%d answered, %d leadership_lost), %d promotions; %s",
		len(w.writes), acked, len(w.reads), ok, lost, w.promotions, w.s.Status())
}

package memnet

import "felix/cluster/sim"

// SetLink sets the faults of from->to (either end may be sim.Any; see
// sim.Faults.SetLink for precedence). It applies to messages sent from
// then on. Errors: lf.Validate's.
func (n *Net[M]) SetLink(from, to sim.NodeID, lf sim.LinkFaults) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.faults.SetLink(from, to, lf)
}

// Partition blocks both directions between nodes of different groups;
// copies in flight on a blocked link are dropped when they arrive.
func (n *Net[M]) Partition(groups ...[]sim.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults.Partition(groups...)
}

// BlockOneWay blocks every link from a node of from to a node of to.
func (n *Net[M]) BlockOneWay(from, to []sim.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults.BlockOneWay(from, to)
}

// Heal unblocks every link.
func (n *Net[M]) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults.Heal()
}

// HealLink unblocks from->to.
func (n *Net[M]) HealLink(from, to sim.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults.HealLink(from, to)
}

// CorruptNext damages the next message sent on from->to.
func (n *Net[M]) CorruptNext(from, to sim.NodeID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults.CorruptNext(from, to)
}

// Stats returns the counters so far.
func (n *Net[M]) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Close stops every timer (their copies are dropped), makes Send fail,
// stops the pumps — closing every Recv channel — and waits for them and
// for any handler running. Queued deliveries are discarded. It is
// idempotent and always returns nil.
func (n *Net[M]) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	for t := range n.timers {
		t.Stop()
	}
	clear(n.timers)
	close(n.done)
	n.mu.Unlock()
	n.pumps.Wait()
	return nil
}

package sim

import "time"

// Fate is what the network does with one sent message, as Faults.Decide
// drew it: Drop names why it is lost ("" when it is not), else Copies has
// one entry per copy delivered (two for a duplicate).
type Fate struct {
	Drop   string
	Copies []Copy
}

// Copy is one delivered copy of a message: it arrives Delay after it was
// sent, corrupted when Corrupt; Reordered says it drew the reorder delay.
type Copy struct {
	Delay     time.Duration
	Corrupt   bool
	Reordered bool
}

// Drop reasons a Fate may carry.
const (
	DropPartition = "partition" // the link is blocked
	DropRandom    = "drop"      // the link's DropPercent
	DropDown      = "node down" // the receiver is crashed (set by the simulator at delivery)
)

// Decide draws the fate of one message on from->to from r. The draws are
// made in a fixed order (drop, duplicate, then per copy: jitter, reorder,
// corrupt) and a fault at 0% draws nothing, so the same settings and the same
// stream r give the same fates; changing a setting changes the draws after
// it. A blocked link drops without a draw. A pending CorruptNext on the link
// is consumed by the first copy.
func (f *Faults) Decide(from, to NodeID, r *Rand) Fate {
	if f.Blocked(from, to) {
		return Fate{Drop: DropPartition}
	}
	lf := f.Link(from, to)
	if r.Chance(lf.DropPercent) {
		return Fate{Drop: DropRandom}
	}
	n := 1
	if r.Chance(lf.DupPercent) {
		n = 2
	}
	copies := make([]Copy, n)
	for i := range copies {
		c := Copy{Delay: lf.Delay + r.Duration(lf.Jitter)}
		if r.Chance(lf.ReorderPercent) {
			c.Reordered = true
			c.Delay += r.Duration(lf.ReorderDelay)
		}
		c.Corrupt = r.Chance(lf.CorruptPercent)
		if i == 0 && f.takeCorruptNext(from, to) {
			c.Corrupt = true
		}
		copies[i] = c
	}
	return Fate{Copies: copies}
}

func (f *Faults) takeCorruptNext(from, to NodeID) bool {
	k := Link{from, to}
	if f.corruptNext[k] == 0 {
		return false
	}
	f.corruptNext[k]--
	if f.corruptNext[k] == 0 {
		delete(f.corruptNext, k)
	}
	return true
}

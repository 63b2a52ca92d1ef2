package sim

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Any stands for every node in Faults.SetLink and Faults.Link: (Any, 2) is
// every link into node 2, (Any, Any) the default of every link, including
// links to nodes added later.
const Any NodeID = math.MaxUint32

// LinkFaults is the fault setting of one directed link. Percentages are in
// [0, 100]; durations are virtual time and must not be negative.
//
// A message sent on the link is dropped with DropPercent; otherwise it is
// delivered once, or twice with DupPercent (each copy draws its own delay).
// A copy arrives after Delay plus a uniform [0, Jitter) and, with
// ReorderPercent, a further uniform [0, ReorderDelay) (so it may overtake or
// be overtaken by its neighbours); it arrives corrupted (Config.Corrupt) with
// CorruptPercent. The zero value is a reliable link with no delay.
type LinkFaults struct {
	Delay          time.Duration
	Jitter         time.Duration
	DropPercent    float64
	DupPercent     float64
	ReorderPercent float64
	ReorderDelay   time.Duration
	CorruptPercent float64
}

// Validate returns an error naming the first field out of range.
func (l LinkFaults) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"drop", l.DropPercent}, {"dup", l.DupPercent}, {"reorder", l.ReorderPercent}, {"corrupt", l.CorruptPercent}} {
		if p.v < 0 || p.v > 100 || math.IsNaN(p.v) {
			return fmt.Errorf("sim: %s %v%%: want 0 to 100", p.name, p.v)
		}
	}
	if l.Delay < 0 || l.Jitter < 0 || l.ReorderDelay < 0 {
		return fmt.Errorf("sim: negative delay in %s", l)
	}
	return nil
}

// String renders the non-zero fields, e.g. "delay=1ms jitter=500µs drop=10%",
// or "reliable" when none is set.
func (l LinkFaults) String() string {
	var parts []string
	add := func(cond bool, format string, v any) {
		if cond {
			parts = append(parts, fmt.Sprintf(format, v))
		}
	}
	add(l.Delay != 0, "delay=%v", l.Delay)
	add(l.Jitter != 0, "jitter=%v", l.Jitter)
	add(l.DropPercent != 0, "drop=%v%%", l.DropPercent)
	add(l.DupPercent != 0, "dup=%v%%", l.DupPercent)
	add(l.ReorderPercent != 0, "reorder=%v%%", l.ReorderPercent)
	add(l.ReorderDelay != 0, "reorder-max=%v", l.ReorderDelay)
	add(l.CorruptPercent != 0, "corrupt=%v%%", l.CorruptPercent)
	if len(parts) == 0 {
		return "reliable"
	}
	return strings.Join(parts, " ")
}

// Link is a directed link between two nodes (either may be Any in settings).
type Link struct{ From, To NodeID }

// String renders "1->2" ("*" for Any).
func (l Link) String() string { return nodeName(l.From) + "->" + nodeName(l.To) }

func nodeName(id NodeID) string {
	if id == Any {
		return "*"
	}
	return id.String()
}

// Faults is the fault state of a network: per-link settings, blocked links
// (partitions) and pending one-shot corruptions. The simulator and memnet
// each own one; it is not safe for concurrent use (memnet guards its own).
// Links from or to External are never blocked and never faulty: they only
// take the default Delay.
type Faults struct {
	links       map[Link]LinkFaults
	blocked     map[Link]bool
	corruptNext map[Link]int
}

// NewFaults returns a fault state whose every link has def.
func NewFaults(def LinkFaults) *Faults {
	f := &Faults{links: map[Link]LinkFaults{}, blocked: map[Link]bool{}, corruptNext: map[Link]int{}}
	f.links[Link{Any, Any}] = def
	return f
}

// SetLink sets the faults of from->to; either end may be Any. A setting for
// an exact link wins over (from, Any), which wins over (Any, to), which wins
// over (Any, Any). Errors: lf.Validate's.
func (f *Faults) SetLink(from, to NodeID, lf LinkFaults) error {
	if err := lf.Validate(); err != nil {
		return err
	}
	f.links[Link{from, to}] = lf
	return nil
}

// Link returns the faults in force on from->to (see SetLink for precedence).
func (f *Faults) Link(from, to NodeID) LinkFaults {
	if from == External || to == External {
		return LinkFaults{Delay: f.links[Link{Any, Any}].Delay}
	}
	for _, k := range []Link{{from, to}, {from, Any}, {Any, to}} {
		if lf, ok := f.links[k]; ok {
			return lf
		}
	}
	return f.links[Link{Any, Any}]
}

// Partition blocks, in both directions, every link between nodes of
// different groups (nodes in no group keep their links). Blocks add up until
// Heal.
func (f *Faults) Partition(groups ...[]NodeID) {
	for i, g := range groups {
		for j, h := range groups {
			if i == j {
				continue
			}
			f.BlockOneWay(g, h)
		}
	}
}

// BlockOneWay blocks every link from a node of from to a node of to; the
// reverse direction is unchanged (an asymmetric partition).
func (f *Faults) BlockOneWay(from, to []NodeID) {
	for _, a := range from {
		for _, b := range to {
			if a != b {
				f.blocked[Link{a, b}] = true
			}
		}
	}
}

// Heal unblocks every link. Link settings and pending corruptions stay.
func (f *Faults) Heal() { clear(f.blocked) }

// HealLink unblocks from->to only.
func (f *Faults) HealLink(from, to NodeID) { delete(f.blocked, Link{from, to}) }

// Blocked reports whether from->to is blocked by a partition.
func (f *Faults) Blocked(from, to NodeID) bool { return f.blocked[Link{from, to}] }

// BlockedLinks returns the blocked links sorted by (From, To).
func (f *Faults) BlockedLinks() []Link {
	out := make([]Link, 0, len(f.blocked))
	for l := range f.blocked {
		out = append(out, l)
	}
	sortLinks(out)
	return out
}

// Settings returns every link setting other than the default, sorted by
// (From, To) with Any last, and the default.
func (f *Faults) Settings() (links []Link, def LinkFaults) {
	for l := range f.links {
		if l != (Link{Any, Any}) {
			links = append(links, l)
		}
	}
	sortLinks(links)
	return links, f.links[Link{Any, Any}]
}

// CorruptNext arranges for the next message sent on from->to (exact nodes)
// to arrive corrupted, whatever the link's CorruptPercent; calls add up.
func (f *Faults) CorruptNext(from, to NodeID) { f.corruptNext[Link{from, to}]++ }

func sortLinks(ls []Link) {
	slices.SortFunc(ls, func(a, b Link) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
}

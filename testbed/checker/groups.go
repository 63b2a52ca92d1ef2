package checker

import (
	"fmt"
	"sort"

	"felix/testbed/history"
)

// groupKey names one consumer group on one stream shard.
type groupKey struct {
	shardKey
	group string
}

// groupState is what the group checks gather about one group.
type groupState struct {
	key           groupKey
	delivered     map[uint64][]int // offset -> positions of polls that delivered it
	dead          map[uint64][]int // offset -> positions of dead-letter listings naming it
	deadCount     map[uint64]int   // offset -> highest delivery count a dead letter reported
	infoPolls     int
	acks          map[uint64][]int // offset -> positions of ok acks
	maxAck        uint64
	maxAckPos     int
	acked         bool
	finals        []int
	maxDeliveries int
	from          uint64
}

// CheckGroups runs the consumer-group checks on h and returns their
// findings, sorted. Per group and stream shard:
//
//   - group-skip: an ok group-ack of an offset no poll delivered, or an
//     owed offset never delivered below the highest offset the group acked;
//   - group-undelivered: an owed offset never delivered, above every ack,
//     when the group ran final polls (In.Final on an ok group-poll);
//   - group-early-dead-letter: a dead letter whose reported delivery count
//     is below max_deliveries, or whose observed deliveries plus the
//     group's info polls (each may have delivered it unseen) are.
//
// Owed offsets are those at or above the group's start (the lowest In.From
// of its operations, else 0) that an ok publish was acked with or that a
// subscribe-read or stream-read read. Delivered means listed in an ok or
// info poll's records; a dead-lettered offset counts as delivered.
// Redelivery is allowed. max_deliveries is the highest In.MaxDeliveries of
// the group's operations; 0 turns the dead-letter check off.
func CheckGroups(h *history.History) []Finding {
	groups, order := gatherGroups(h)
	owed := owedOffsets(h)
	var out []Finding
	for _, key := range order {
		g := groups[key]
		out = append(out, g.ackSkips(h)...)
		out = append(out, g.undelivered(h, owed[key.shardKey])...)
		out = append(out, g.earlyDeadLetters(h)...)
	}
	sortFindings(out)
	return out
}

func gatherGroups(h *history.History) (map[groupKey]*groupState, []groupKey) {
	groups := map[groupKey]*groupState{}
	var order []groupKey
	for pos := range h.Ops {
		op := &h.Ops[pos]
		switch op.Kind {
		case history.KindGroupPoll, history.KindGroupAck, history.KindGroupNack, history.KindGroupDeadLetters:
		default:
			continue
		}
		key := groupKey{shardKey{op.In.Stream, op.In.Shard}, op.In.Group}
		g := groups[key]
		if g == nil {
			g = &groupState{key: key, delivered: map[uint64][]int{}, dead: map[uint64][]int{},
				deadCount: map[uint64]int{}, acks: map[uint64][]int{}, from: ^uint64(0)}
			groups[key], order = g, append(order, key)
		}
		g.add(pos, op)
	}
	for _, g := range groups {
		if g.from == ^uint64(0) {
			g.from = 0
		}
	}
	return groups, order
}

// add folds one group operation at position pos into g.
func (g *groupState) add(pos int, op *history.Op) {
	g.maxDeliveries = max(g.maxDeliveries, op.In.MaxDeliveries)
	if op.In.From != nil {
		g.from = min(g.from, *op.In.From)
	}
	if op.Outcome == history.Fail {
		return
	}
	switch op.Kind {
	case history.KindGroupPoll:
		if op.Outcome == history.Info {
			g.infoPolls++
		} else if op.In.Final {
			g.finals = append(g.finals, pos)
		}
		for _, rec := range op.Out.Records {
			g.delivered[rec.Offset] = append(g.delivered[rec.Offset], pos)
		}
	case history.KindGroupDeadLetters:
		for _, rec := range op.Out.Records {
			g.dead[rec.Offset] = append(g.dead[rec.Offset], pos)
			g.deadCount[rec.Offset] = max(g.deadCount[rec.Offset], rec.Deliveries)
		}
	case history.KindGroupAck:
		if op.Outcome != history.OK {
			return
		}
		for _, off := range op.In.Offsets {
			g.acks[off] = append(g.acks[off], pos)
			if !g.acked || off > g.maxAck {
				g.acked, g.maxAck, g.maxAckPos = true, off, pos
			}
		}
	}
}

func (g *groupState) handled(off uint64) bool {
	return len(g.delivered[off]) > 0 || len(g.dead[off]) > 0
}

func (g *groupState) finding(a Anomaly, h *history.History, offsets []uint64, positions []int, detail string) Finding {
	return Finding{Anomaly: a, Stream: g.key.stream, Shard: g.key.shard, Object: "group " + g.key.group,
		Offsets: offsets, Ops: opIndices(h, positions), Detail: detail}
}

// ackSkips: ok acks of offsets the group never delivered.
func (g *groupState) ackSkips(h *history.History) []Finding {
	var out []Finding
	for _, off := range sortedKeysOf(g.acks) {
		if !g.handled(off) {
			out = append(out, g.finding(GroupSkip, h, []uint64{off}, g.acks[off],
				fmt.Sprintf("acked offset %d, which no poll delivered", off)))
		}
	}
	return out
}

// undelivered: owed offsets never delivered; a skip below the highest ack,
// else (with final polls) undelivered.
func (g *groupState) undelivered(h *history.History, owed map[uint64]int) []Finding {
	var out []Finding
	for _, off := range sortedKeysOf(owed) {
		if off < g.from || g.handled(off) {
			continue
		}
		switch {
		case g.acked && off < g.maxAck:
			out = append(out, g.finding(GroupSkip, h, []uint64{off}, []int{owed[off], g.maxAckPos},
				fmt.Sprintf("offset %d never delivered, yet the group acked offset %d", off, g.maxAck)))
		case len(g.finals) > 0:
			out = append(out, g.finding(GroupUndelivered, h, []uint64{off}, append([]int{owed[off]}, g.finals...),
				fmt.Sprintf("offset %d never delivered by the end (%d final polls)", off, len(g.finals))))
		}
	}
	return out
}

// earlyDeadLetters: dead letters before max_deliveries deliveries.
func (g *groupState) earlyDeadLetters(h *history.History) []Finding {
	if g.maxDeliveries <= 0 {
		return nil
	}
	var out []Finding
	for _, off := range sortedKeysOf(g.dead) {
		reported, seen := g.deadCount[off], len(g.delivered[off])
		if (reported > 0 && reported < g.maxDeliveries) || seen+g.infoPolls < g.maxDeliveries {
			positions := append(append([]int(nil), g.dead[off]...), g.delivered[off]...)
			out = append(out, g.finding(GroupEarlyDead, h, []uint64{off}, positions,
				fmt.Sprintf("dead-lettered with %d reported and %d observed deliveries (+%d info polls), max_deliveries %d",
					reported, seen, g.infoPolls, g.maxDeliveries)))
		}
	}
	return out
}

// owedOffsets maps each shard to the offsets known to be in its log, each
// with the position of one operation that shows it.
func owedOffsets(h *history.History) map[shardKey]map[uint64]int {
	owed := map[shardKey]map[uint64]int{}
	note := func(sk shardKey, off uint64, pos int) {
		if owed[sk] == nil {
			owed[sk] = map[uint64]int{}
		}
		if _, ok := owed[sk][off]; !ok {
			owed[sk][off] = pos
		}
	}
	for pos := range h.Ops {
		op := &h.Ops[pos]
		switch {
		case op.Kind == history.KindPublish && op.Outcome == history.OK:
			for _, off := range op.Out.Offsets {
				note(shardKey{op.In.Stream, op.Out.Shard}, off, pos)
			}
		case (op.Kind == history.KindSubscribeRead || op.Kind == history.KindStreamRead) && readsRecords(op):
			for _, rec := range op.Out.Records {
				note(shardKey{op.In.Stream, op.In.Shard}, rec.Offset, pos)
			}
		}
	}
	return owed
}

func sortedKeysOf[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

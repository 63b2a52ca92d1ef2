package checker

import (
	"fmt"

	"felix/testbed/history"
)

// subscriptionKey names one subscription (its id is unique per stream shard).
type subscriptionKey struct {
	shardKey
	id string
}

// subscriptionWalk follows one subscription's records in delivery order.
type subscriptionWalk struct {
	ix      *streamIndex
	key     subscriptionKey
	next    uint64 // the offset expected next, once started
	lastPos int    // position of the operation that set next
	read    bool   // next follows a record read (not only From)
	started bool
	out     []Finding
}

// checkSubscriptions finds non-monotonic-read and skipped-read anomalies:
// within one subscription (its subscribe-read operations in index order, the
// records of each in delivery order) every offset must be exactly one more
// than the previous, except across offsets the broker flagged as skipped
// (Output.Skipped of any read of the shard). An offset at or below the
// previous one is non-monotonic; an unflagged offset jumped over is a skip.
// A subscription's first record is checked against its first From, if set.
func checkSubscriptions(ix *streamIndex) []Finding {
	walks := map[subscriptionKey]*subscriptionWalk{}
	var order []*subscriptionWalk
	for pos := range ix.h.Ops {
		op := &ix.h.Ops[pos]
		if op.Kind != history.KindSubscribeRead || op.Outcome == history.Fail {
			continue
		}
		key := subscriptionKey{shardKey{op.In.Stream, op.In.Shard}, op.In.Subscription}
		w := walks[key]
		if w == nil {
			w = &subscriptionWalk{ix: ix, key: key}
			walks[key], order = w, append(order, w)
		}
		w.step(pos, op)
	}
	var out []Finding
	for _, w := range order {
		out = append(out, w.out...)
	}
	return out
}

// step walks the records of one subscribe-read at position pos.
func (w *subscriptionWalk) step(pos int, op *history.Op) {
	if !w.started && op.In.From != nil {
		w.started, w.next, w.lastPos = true, *op.In.From, pos
	}
	for _, rec := range op.Out.Records {
		switch {
		case !w.started:
		case rec.Offset < w.next && w.read:
			w.out = append(w.out, Finding{
				Anomaly: NonMonotonicRead, Stream: w.key.stream, Shard: w.key.shard,
				Offsets: sortedUnique([]uint64{rec.Offset, w.next - 1}), Ops: opIndices(w.ix.h, []int{w.lastPos, pos}),
				Detail: fmt.Sprintf("subscription %q read offset %d after %d", w.key.id, rec.Offset, w.next-1),
			})
		case rec.Offset < w.next:
			w.out = append(w.out, Finding{
				Anomaly: NonMonotonicRead, Stream: w.key.stream, Shard: w.key.shard,
				Offsets: []uint64{rec.Offset}, Ops: opIndices(w.ix.h, []int{pos}),
				Detail: fmt.Sprintf("subscription %q from offset %d read offset %d", w.key.id, w.next, rec.Offset),
			})
		case rec.Offset > w.next:
			w.gap(pos, w.next, rec.Offset)
		}
		w.started, w.read, w.next, w.lastPos = true, true, rec.Offset+1, pos
	}
}

// gap reports the unflagged offsets of [from, to) jumped over at pos.
func (w *subscriptionWalk) gap(pos int, from, to uint64) {
	count, sample := w.ix.unflagged(w.key.shardKey, from, to, 64)
	if count == 0 {
		return
	}
	w.out = append(w.out, Finding{
		Anomaly: SkippedRead, Stream: w.key.stream, Shard: w.key.shard, Offsets: sample,
		Ops: opIndices(w.ix.h, []int{w.lastPos, pos}),
		Detail: fmt.Sprintf("subscription %q expected offset %d, read %d: %d offsets not flagged as skipped",
			w.key.id, from, to, count),
	})
}

package checker

import (
	"fmt"
	"sort"

	"felix/testbed/history"
)

// shardKey names one stream shard.
type shardKey struct {
	stream string
	shard  int
}

// offsetKey names one offset of one stream shard.
type offsetKey struct {
	shardKey
	offset uint64
}

// payloadKey names one payload of one stream (payloads are unique per stream).
type payloadKey struct {
	stream  string
	payload string
}

// sighting is one claim that a payload sits at an offset: a record read, or
// the offset an ok publish was acked with.
type sighting struct {
	at      offsetKey
	payload string
	pos     int  // position of the operation in h.Ops
	read    bool // false: an ok publish's ack
}

// streamIndex is what the stream checks need, built in one pass.
type streamIndex struct {
	h          *history.History
	atOffset   map[offsetKey][]sighting
	ofPayload  map[payloadKey][]sighting
	readers    map[payloadKey][]int // positions of operations that read the payload
	publishes  map[payloadKey][]int // positions of publishes of the payload, any outcome
	maxRead    map[shardKey]uint64  // highest offset read per shard (present only when read)
	finalReads map[shardKey][]int   // positions of ok final subscribe-reads
	flagged    map[shardKey][]history.OffsetRange
	merged     map[shardKey][]history.OffsetRange // flagged, sorted and merged (lazily)
}

// readsRecords reports whether op's records are reads of the stream log.
func readsRecords(op *history.Op) bool {
	if op.Outcome == history.Fail {
		return false
	}
	switch op.Kind {
	case history.KindSubscribeRead, history.KindGroupPoll:
		return true
	case history.KindStreamRead:
		return op.Out.Found
	}
	return false
}

func newStreamIndex(h *history.History) *streamIndex {
	ix := &streamIndex{
		h: h, atOffset: map[offsetKey][]sighting{}, ofPayload: map[payloadKey][]sighting{},
		readers: map[payloadKey][]int{}, publishes: map[payloadKey][]int{}, maxRead: map[shardKey]uint64{},
		finalReads: map[shardKey][]int{}, flagged: map[shardKey][]history.OffsetRange{},
		merged: map[shardKey][]history.OffsetRange{},
	}
	for pos := range h.Ops {
		op := &h.Ops[pos]
		if op.Kind == history.KindPublish {
			ix.addPublish(pos, op)
			continue
		}
		if !readsRecords(op) {
			continue
		}
		sk := shardKey{op.In.Stream, op.In.Shard}
		for _, rec := range op.Out.Records {
			if rec.Payload == nil {
				continue // no payload recorded: not a claim about the log
			}
			ix.add(sighting{at: offsetKey{sk, rec.Offset}, payload: string(rec.Payload), pos: pos, read: true})
			if m, ok := ix.maxRead[sk]; !ok || rec.Offset > m {
				ix.maxRead[sk] = rec.Offset
			}
		}
		ix.flagged[sk] = append(ix.flagged[sk], op.Out.Skipped...)
		if op.Kind == history.KindSubscribeRead && op.In.Final && op.Outcome == history.OK {
			ix.finalReads[sk] = append(ix.finalReads[sk], pos)
		}
	}
	return ix
}

func (ix *streamIndex) addPublish(pos int, op *history.Op) {
	for i, p := range op.In.Payloads {
		pk := payloadKey{op.In.Stream, string(p)}
		ix.publishes[pk] = append(ix.publishes[pk], pos)
		if op.Outcome == history.OK {
			at := offsetKey{shardKey{op.In.Stream, op.Out.Shard}, op.Out.Offsets[i]}
			ix.add(sighting{at: at, payload: string(p), pos: pos})
		}
	}
}

func (ix *streamIndex) add(s sighting) {
	pk := payloadKey{s.at.stream, s.payload}
	ix.atOffset[s.at] = append(ix.atOffset[s.at], s)
	ix.ofPayload[pk] = append(ix.ofPayload[pk], s)
	if s.read {
		ix.readers[pk] = append(ix.readers[pk], s.pos)
	}
}

// unflagged counts the offsets of [from, to) of sk that no read flagged as
// skipped and returns the first limit of them, ascending.
func (ix *streamIndex) unflagged(sk shardKey, from, to uint64, limit int) (uint64, []uint64) {
	ranges := ix.mergedFlags(sk)
	var count uint64
	var sample []uint64
	i := sort.Search(len(ranges), func(i int) bool { return ranges[i].To > from })
	for off := from; off < to; {
		if i < len(ranges) && ranges[i].From <= off {
			off = ranges[i].To // jump over the flagged range
			i++
			continue
		}
		end := to
		if i < len(ranges) && ranges[i].From < end {
			end = ranges[i].From
		}
		count += end - off
		for o := off; o < end && len(sample) < limit; o++ {
			sample = append(sample, o)
		}
		off = end
	}
	return count, sample
}

// mergedFlags sorts and merges the flagged ranges of sk once.
func (ix *streamIndex) mergedFlags(sk shardKey) []history.OffsetRange {
	if m, ok := ix.merged[sk]; ok {
		return m
	}
	rs := append([]history.OffsetRange(nil), ix.flagged[sk]...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].From < rs[j].From })
	var m []history.OffsetRange
	for _, r := range rs {
		if r.To <= r.From {
			continue
		}
		if n := len(m); n > 0 && r.From <= m[n-1].To {
			m[n-1].To = max(m[n-1].To, r.To)
			continue
		}
		m = append(m, r)
	}
	ix.merged[sk] = m
	return m
}

// CheckStreams runs the direct stream-log checks on h and returns their
// findings (lost-write, duplicate, inconsistent-offset, non-monotonic-read,
// skipped-read, dirty-read, unseen), sorted. Reads are the records (with a
// payload) of subscribe-read and group-poll operations and of found
// stream-reads, from ok and info operations; an ok publish's acked offsets
// count as claims about the log too. It never fails: a history that loaded
// is checkable.
func CheckStreams(h *history.History) []Finding {
	ix := newStreamIndex(h)
	var out []Finding
	out = append(out, ix.inconsistentOffsets()...)
	out = append(out, ix.duplicates()...)
	out = append(out, ix.dirtyReads()...)
	out = append(out, ix.lostAndUnseen()...)
	out = append(out, checkSubscriptions(ix)...)
	sortFindings(out)
	return out
}

// inconsistentOffsets: an offset with two different payloads across the
// reads and acks that name it.
func (ix *streamIndex) inconsistentOffsets() []Finding {
	var out []Finding
	for at, ss := range ix.atOffset {
		payloads := map[string]bool{}
		var positions []int
		for _, s := range ss {
			payloads[s.payload] = true
			positions = append(positions, s.pos)
		}
		if len(payloads) < 2 {
			continue
		}
		out = append(out, Finding{
			Anomaly: InconsistentOffset, Stream: at.stream, Shard: at.shard, Offsets: []uint64{at.offset},
			Ops: opIndices(ix.h, positions), Detail: fmt.Sprintf("payloads %v at one offset", sortedKeys(payloads)),
		})
	}
	return out
}

// duplicates: a payload at two (shard, offset) places.
func (ix *streamIndex) duplicates() []Finding {
	var out []Finding
	for pk, ss := range ix.ofPayload {
		places := map[offsetKey]bool{}
		var positions []int
		var offsets []uint64
		for _, s := range ss {
			if !places[s.at] {
				offsets = append(offsets, s.at.offset)
			}
			places[s.at] = true
			positions = append(positions, s.pos)
		}
		if len(places) < 2 {
			continue
		}
		first := ss[0].at
		out = append(out, Finding{
			Anomaly: Duplicate, Stream: pk.stream, Shard: first.shard, Offsets: sortedUnique(offsets),
			Ops: opIndices(ix.h, positions), Detail: fmt.Sprintf("payload %q at %d places", pk.payload, len(places)),
		})
	}
	return out
}

// dirtyReads: a payload read whose every publish got a definite failure.
func (ix *streamIndex) dirtyReads() []Finding {
	var out []Finding
	for pk, readers := range ix.readers {
		pubs := ix.publishes[pk]
		if len(pubs) == 0 || !allFailed(ix.h, pubs) {
			continue
		}
		var offsets []uint64
		for _, s := range ix.ofPayload[pk] {
			offsets = append(offsets, s.at.offset)
		}
		first := ix.ofPayload[pk][0].at
		out = append(out, Finding{
			Anomaly: DirtyRead, Stream: pk.stream, Shard: first.shard, Offsets: sortedUnique(offsets),
			Ops:    opIndices(ix.h, append(append([]int(nil), readers...), pubs...)),
			Detail: fmt.Sprintf("payload %q read, but its publish failed", pk.payload),
		})
	}
	return out
}

func allFailed(h *history.History, positions []int) bool {
	for _, p := range positions {
		if h.Ops[p].Outcome != history.Fail {
			return false
		}
	}
	return true
}

// lostAndUnseen: an ok publish never read is lost when some read of its
// shard reached its offset, else unseen when final reads of its shard ran.
func (ix *streamIndex) lostAndUnseen() []Finding {
	var out []Finding
	for pos := range ix.h.Ops {
		op := &ix.h.Ops[pos]
		if op.Kind != history.KindPublish || op.Outcome != history.OK {
			continue
		}
		sk := shardKey{op.In.Stream, op.Out.Shard}
		for i, p := range op.In.Payloads {
			pk := payloadKey{op.In.Stream, string(p)}
			if len(ix.readers[pk]) > 0 {
				continue
			}
			off := op.Out.Offsets[i]
			f := Finding{Stream: sk.stream, Shard: sk.shard, Offsets: []uint64{off}, Ops: []int{op.Index}}
			if m, read := ix.maxRead[sk]; read && m >= off {
				f.Anomaly, f.Detail = LostWrite, fmt.Sprintf("payload %q acked, reads reached offset %d, never read", p, m)
			} else if finals := ix.finalReads[sk]; len(finals) > 0 {
				f.Anomaly, f.Detail = Unseen, fmt.Sprintf("payload %q acked, no read saw it after %d final reads", p, len(finals))
				f.Ops = opIndices(ix.h, append([]int{pos}, finals...))
			} else {
				continue
			}
			out = append(out, f)
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

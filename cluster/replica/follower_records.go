package replica

import (
	"fmt"

	"felix/proto"
)

// decideRecords: the eight rows of "Replication" and the divergence rule, for any of the six
// logs' records kinds. The order of the checks: kind and membership, the fence (epoch), the
// checksum, then position (gap, overlap comparison, store).
func decideRecords(st *FollowerState, from string, kind proto.Kind, m *proto.ReplicateRecords) Decision {
	corr := m.CorrelationID
	if d, good := checkKind(st, corr, kind, m.Log.RecordsKind(), m.Log); !good {
		return d
	}
	ballot, d, good := checkEpoch(st, corr, m.Epoch, from)
	if !good {
		return d
	}
	if !m.ChecksumOK() {
		return refuse(ActMalformed, corr, proto.InternalMalformed, 0,
			fmt.Sprintf("batch_checksum %#x does not match the %d payloads", m.Checksum, len(m.Payloads)))
	}
	if !st.HasLog {
		d := decideRecords(&FollowerState{Kind: st.Kind, Log: st.Log, Member: true, HasLog: true,
			Ballot: st.Ballot, Records: st.Records}, from, kind, m)
		if d.Action == ActStore {
			d.Create = true // a log that begins at zero needs no bootstrap
		}
		return d
	}
	n := uint64(len(m.Payloads))
	end := m.FirstOffset + n
	if end < m.FirstOffset {
		return refuse(ActMalformed, corr, proto.InternalMalformed, 0, "first_offset + payloads overflows")
	}
	want, gap, covers := expectedOffset(st, m, end)
	if gap {
		return refuse(ActGap, corr, proto.InternalLogGap, want,
			fmt.Sprintf("batch begins at %d; expected %d", m.FirstOffset, want))
	}
	lo, hi := max(m.FirstOffset, st.Start), min(end, st.Tail)
	diff, err := equalRecords(st, m, lo, hi)
	if err != nil {
		return refuse(ActStorageFailed, corr, proto.InternalStorageFailed, 0, "reading stored records: "+err.Error())
	}
	if diff < hi {
		return conflict(st, m, diff, ballot, covers)
	}
	if end <= st.Tail {
		synced := st.Durable >= end
		d := Decision{Action: ActAlreadyStored, Answer: ok(corr, max(st.Durable, min(end, st.Tail))),
			Sync: !synced, Ballot: ballot, Reason: "already stored"}
		if last, has := lastEpoch(st.Epochs); has && m.Epoch > last.Generation && covers && m.FirstOffset < end {
			d.Compared = &Compared{Generation: m.Epoch, Offset: end}
		}
		return d
	}
	return store(st, m, st.Tail, st.Epochs, ballot, ActStore)
}

// expectedOffset returns where the batch must begin instead, whether it must, and whether
// the batch covers the comparison a newer generation needs. Past the tail it must begin at
// the tail ("begins past the tail"). A batch of a generation newer than the log's newest
// covers it when it begins at or below the record before where that newest generation
// began (or the log's start), or where the batches of its generation compared so far end
// (FollowerState.Compared): a batch that would store must cover it, so the overlap compares
// every record the divergence rule could truncate and the one before them. A batch lying
// below the tail is compared wherever it begins (the leader's probes), but only one that
// covers it may truncate or move Compared.
func expectedOffset(st *FollowerState, m *proto.ReplicateRecords, end uint64) (uint64, bool, bool) {
	want, gap := st.Tail, m.FirstOffset > st.Tail
	last, has := lastEpoch(st.Epochs)
	if !has || m.Epoch <= last.Generation || st.Tail <= st.Start {
		return want, gap, true
	}
	begin := st.Start
	if last.StartOffset > st.Start {
		begin = last.StartOffset - 1
	}
	if c := st.Compared; c.Generation == m.Epoch && c.Offset > begin {
		begin = c.Offset
	}
	begin = min(begin, st.Tail)
	if m.FirstOffset > begin && end > st.Tail {
		return begin, true, false
	}
	return want, gap, m.FirstOffset <= begin
}

// conflict applies the divergence rule at offset diff, the first stored record the batch
// disagrees with: a conflict from a newer generation than the log's newest, at or after
// where that generation began, truncates the suffix there and stores the batch's rest, when
// the batch covers the comparison (expectedOffset); anything else halts.
func conflict(st *FollowerState, m *proto.ReplicateRecords, diff uint64, ballot *Ballot, covers bool) Decision {
	corr := m.CorrelationID
	last, has := lastEpoch(st.Epochs)
	var reason string
	switch {
	case !has:
		reason = fmt.Sprintf("offset %d differs and the log has no generation history", diff)
	case m.Epoch == last.Generation:
		reason = fmt.Sprintf("offset %d differs from the leader of generation %d, which wrote it (a leader disagreeing with itself)", diff, m.Epoch)
	case m.Epoch < last.Generation:
		reason = fmt.Sprintf("offset %d differs and generation %d is older than the log's %d", diff, m.Epoch, last.Generation)
	case diff < last.StartOffset:
		reason = fmt.Sprintf("offset %d differs, before generation %d began at %d (a divergence reaching further back)", diff, last.Generation, last.StartOffset)
	case !covers:
		reason = fmt.Sprintf("offset %d differs; the batch begins past the records it would have to compare first", diff)
	default:
		d := store(st, m, diff, cutEpochs(st.Epochs, diff), ballot, ActTruncateStore)
		d.TruncateAt = diff
		d.Reason = fmt.Sprintf("truncates generation %d's suffix at %d (no majority adopted it)", last.Generation, diff)
		return d
	}
	return refuse(ActConflict, corr, proto.InternalLogConflict, 0, reason)
}

// store stores the batch's payloads from offset at (the tail, or the truncation point) and
// extends the generation history: from the generation-start records stored
// (FollowerState.GenerationStart), else with the batch's epoch when it is newer than the
// newest entry.
func store(st *FollowerState, m *proto.ReplicateRecords, at uint64, history []Epoch, ballot *Ballot, a Action) Decision {
	payloads := m.Payloads[at-m.FirstOffset:]
	end := at + uint64(len(payloads))
	d := Decision{Action: a, Store: payloads, StoreAt: at, Sync: true, Ballot: ballot,
		Answer: ok(m.CorrelationID, end), Reason: fmt.Sprintf("stores payloads[%d:] at %d", at-m.FirstOffset, at),
		Compared: &Compared{Generation: m.Epoch, Offset: end}}
	grown := append(make([]Epoch, 0, len(history)+1), history...)
	for i, p := range payloads {
		last, has := lastEpoch(grown)
		if st.GenerationStart != nil {
			if g, isStart := st.GenerationStart(p); isStart && (!has || g > last.Generation) {
				grown = append(grown, Epoch{Generation: g, StartOffset: at + uint64(i)})
			}
		} else if i == 0 && (!has || m.Epoch > last.Generation) {
			grown = append(grown, Epoch{Generation: m.Epoch, StartOffset: at})
		}
	}
	if len(grown) != len(history) || a == ActTruncateStore {
		d.Epochs = grown
	}
	return d
}

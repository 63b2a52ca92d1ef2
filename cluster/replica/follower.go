package replica

import (
	"bytes"
	"fmt"

	"felix/proto"
)

// Reader reads a follower's stored records; the caller implements it over its log.
type Reader interface {
	// ReadRecords returns the stored payloads (log encoding) of offsets [from, to), in
	// order, with from >= the log's start and to <= its tail. An error is a storage
	// failure (answered StorageFailed); the slices are only read before DecideFollower
	// returns.
	ReadRecords(from, to uint64) ([][]byte, error)
}

// FollowerState is one replicated log on a follower, as the decider needs it.
type FollowerState struct {
	// Kind is the shard's kind; Log which of its logs this is.
	Kind ShardKind
	Log  proto.ReplicaLog
	// Member reports whether this broker is in the shard's replica set (its placement
	// view). A non-member is refused Unauthorized: it cannot be given a shard.
	Member bool
	// HasLog reports whether the follower holds a log for the shard at all.
	HasLog bool
	// Start is the offset of the first record held (0, or where a bootstrap placed the
	// log); Tail the next offset; Durable one past the last fsynced record
	// (Start <= Durable <= Tail).
	Start, Tail, Durable uint64
	// Epochs is the log's generation history (may be empty: it is derived, and an absent
	// or damaged epochs file reads as empty, which costs automatic divergence repair).
	Epochs []Epoch
	// Ballot is the generation this replica accepted and the leader it accepted it from.
	Ballot Ballot
	// Records reads stored bytes for the overlap comparison.
	Records Reader
	// GenerationStart, when set (generation_start finalized), recognises a
	// generation-start record among payloads and returns its generation: the epochs
	// history is then derived from those records, so each entry names the generation that
	// wrote the records from there on. When nil, a stored batch's epoch names the
	// generation its records were stored at (what brokers did before generation_start,
	// with its exposure: a leader re-shipping older records relabels them).
	GenerationStart func(payload []byte) (generation uint64, ok bool)
	// Compared is volatile (kept in memory, lost on restart): how far batches of a newer
	// generation than the log's newest have been compared with the stored records (see
	// Decision.Compared). The zero value means nothing was.
	Compared Compared
}

// Compared says that the stored records below Offset agree with (were compared with, or
// stored from) the batches of the leader of Generation. A batch of a generation newer than
// the log's newest must begin at or below the record just before where the newest began
// (or the log's start), or at or below Compared.Offset at that generation: so every record
// the divergence rule could truncate, and the one before them, is compared before a record
// is stored, also across pipelined batches.
type Compared struct {
	Generation uint64
	Offset     uint64
}

// Action is what the caller does with a Decision before sending its Answer.
type Action uint8

// Actions of the follower decider.
const (
	// ActStore: append Decision.Store at the tail (Decision.StoreAt), write Epochs and
	// Ballot when set, fdatasync, then send Answer (whose durable_offset is the tail after
	// the store). "begins at the tail" and "straddles the tail".
	ActStore Action = iota + 1
	// ActAlreadyStored: nothing to write; if Sync, send Answer only once the pending
	// fdatasync covers it. "lies entirely below the tail", and an empty batch at the tail.
	ActAlreadyStored
	// ActTruncateStore: the divergence rule repaired a conflict: cut the log to
	// TruncateAt (records and epochs), then as ActStore.
	ActTruncateStore
	// ActGap: refuse with LogGap and expected_offset; nothing is written.
	ActGap
	// ActConflict: refuse with LogConflict; nothing is written; the log halts (Reason says
	// why) and is surfaced (/replication/halted).
	ActConflict
	// ActFenced: refuse with FencedEpoch: the sender is not (or no longer) the leader.
	ActFenced
	// ActStaleRoute: refuse with StaleRoute: the sender names a generation this follower
	// has not accepted yet; the leader retries shortly.
	ActStaleRoute
	// ActMalformed: the batch failed its checksum; nothing is written.
	ActMalformed
	// ActUnauthorized: this broker is outside the replica set, or the message's kind names
	// another log or shard kind than this one (a cache record sent as a stream kind);
	// nothing is written.
	ActUnauthorized
	// ActPlace: bootstrap: place an empty log at PlaceAt (no epochs), then answer.
	ActPlace
	// ActRebuild: discard the whole log, generation history included, place an empty one
	// at PlaceAt, then answer.
	ActRebuild
	// ActFenceOk: answer FenceOk; write Ballot first when it is set (a newer generation
	// accepted, or the leader of an older build's ballot recorded).
	ActFenceOk
	// ActStorageFailed: reading the stored records failed; refuse with StorageFailed.
	ActStorageFailed
)

var actionNames = [...]string{"", "store", "already-stored", "truncate-store", "gap", "conflict",
	"fenced", "stale-route", "malformed", "unauthorized", "place", "rebuild", "fence-ok",
	"storage-failed"}

// String returns the action's short name ("store", "gap", ...).
func (a Action) String() string {
	if int(a) < len(actionNames) && a != 0 {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Decision is the decider's answer to one message: do Action, then send Answer.
type Decision struct {
	Action Action
	// Answer is the message to send (ReplicateOk, ReplicateError, FenceOk), its correlation
	// id echoed. With Sync it may be sent only after an fdatasync covering the log up to
	// its durable_offset completed; if that fsync fails, answer StorageFailed instead.
	Answer proto.InternalMessage
	// Sync says the answer waits for an fdatasync of the log.
	Sync bool
	// Store are the payloads to append at StoreAt (sub-slices of the message).
	Store   [][]byte
	StoreAt uint64
	// TruncateAt is where ActTruncateStore cuts the log before storing.
	TruncateAt uint64
	// PlaceAt is where ActPlace and ActRebuild begin the new log.
	PlaceAt uint64
	// Create says the follower held no log and the caller creates an empty one at offset 0
	// before storing (a batch at offset 0 needs no bootstrap; one past it is a LogGap with
	// expected_offset 0, and a leader holding nothing that old bootstraps).
	Create bool
	// Epochs, when non-nil, is the new generation history to write (fsynced) before the
	// answer; Ballot, when non-nil, the new ballot likewise.
	Epochs []Epoch
	Ballot *Ballot
	// Compared, when non-nil, is the caller's new FollowerState.Compared (memory only).
	Compared *Compared
	// Reason explains a refusal or a halt in one line (for logs and /replication/halted).
	Reason string
}

// DecideFollower decides what a follower does with msg, which arrived as kind from the
// peer whose node id is from (the transport's Hello, checked against its certificate).
// msg is a *proto.ReplicateRecords, *proto.ReplicateBootstrap, *proto.ReplicateRebuild or
// *proto.Fence; anything else is refused Malformed. It never panics on peer input.
func DecideFollower(st *FollowerState, from string, kind proto.Kind, msg proto.InternalMessage) Decision {
	switch m := msg.(type) {
	case *proto.ReplicateRecords:
		return decideRecords(st, from, kind, m)
	case *proto.ReplicateBootstrap:
		return decideBootstrap(st, from, kind, m)
	case *proto.ReplicateRebuild:
		return decideRebuild(st, from, kind, m)
	case *proto.Fence:
		return decideFence(st, from, kind, m)
	}
	corr := uint64(0)
	if msg != nil {
		corr = msg.Correlation()
	}
	return refuse(ActMalformed, corr, proto.InternalMalformed, 0, fmt.Sprintf("%T is not a replication request", msg))
}

// refuse builds a ReplicateError decision.
func refuse(a Action, corr uint64, code proto.InternalCode, expected uint64, reason string) Decision {
	return Decision{Action: a, Reason: reason,
		Answer: &proto.ReplicateError{CorrelationID: corr, Code: code, ExpectedOffset: expected}}
}

// ok builds a ReplicateOk answer.
func ok(corr, durable uint64) *proto.ReplicateOk {
	return &proto.ReplicateOk{CorrelationID: corr, DurableOffset: durable}
}

// checkKind refuses a message whose kind does not ship this follower's log: the kind must
// be the log's own (records or bootstrap) kind, the log this state's, and a log the shard
// kind has. A cache record sent as a stream kind lands here, never in a log.
func checkKind(st *FollowerState, corr uint64, arrived, want proto.Kind, log proto.ReplicaLog) (Decision, bool) {
	switch {
	case arrived != want:
		return refuse(ActUnauthorized, corr, proto.InternalUnauthorized, 0,
			fmt.Sprintf("kind %v does not ship the %v log", arrived, log)), false
	case log != st.Log || !st.Kind.HasLog(log):
		return refuse(ActUnauthorized, corr, proto.InternalUnauthorized, 0,
			fmt.Sprintf("kind %v ships a %v log; this is the %v log of a %v shard", arrived, log, st.Log, st.Kind)), false
	case !st.Member:
		return refuse(ActUnauthorized, corr, proto.InternalUnauthorized, 0, "outside the replica set"), false
	}
	return Decision{}, true
}

// checkEpoch applies the fence: an older generation than the ballot's is FencedEpoch, a
// newer one StaleRoute, the same one from another leader than the ballot's FencedEpoch.
// At the ballot's generation with no leader recorded (an older build's ballot), it returns
// the ballot to write with from recorded.
func checkEpoch(st *FollowerState, corr, epoch uint64, from string) (*Ballot, Decision, bool) {
	b := st.Ballot
	switch {
	case epoch < b.Generation:
		return nil, refuse(ActFenced, corr, proto.InternalFencedEpoch, 0,
			fmt.Sprintf("generation %d is older than the accepted %d", epoch, b.Generation)), false
	case epoch > b.Generation:
		return nil, refuse(ActStaleRoute, corr, proto.InternalStaleRoute, 0,
			fmt.Sprintf("generation %d is newer than the accepted %d", epoch, b.Generation)), false
	case b.Leader != "" && b.Leader != from:
		return nil, refuse(ActFenced, corr, proto.InternalFencedEpoch, 0,
			fmt.Sprintf("generation %d was accepted from %q, not %q", epoch, b.Leader, from)), false
	case b.Leader == "":
		return &Ballot{Generation: epoch, Leader: from}, Decision{}, true
	}
	return nil, Decision{}, true
}

// decideBootstrap: the three rows of "Bootstrapping a follower".
func decideBootstrap(st *FollowerState, from string, kind proto.Kind, m *proto.ReplicateBootstrap) Decision {
	corr := m.CorrelationID
	if d, good := checkKind(st, corr, kind, m.Log.BootstrapKind(), m.Log); !good {
		return d
	}
	ballot, d, good := checkEpoch(st, corr, m.Epoch, from)
	if !good {
		return d
	}
	switch {
	case st.HasLog && st.Start == m.BaseOffset:
		return Decision{Action: ActAlreadyStored, Answer: ok(corr, st.Durable), Ballot: ballot,
			Reason: "already holds a log starting there"}
	case st.HasLog && st.Tail > st.Start:
		return refuse(ActConflict, corr, proto.InternalLogConflict, 0,
			fmt.Sprintf("holds records [%d, %d), not a log starting at %d", st.Start, st.Tail, m.BaseOffset))
	}
	return Decision{Action: ActPlace, PlaceAt: m.BaseOffset, Epochs: []Epoch{}, Ballot: ballot, Sync: true,
		Answer: ok(corr, m.BaseOffset), Reason: "holds no log for the shard"}
}

// decideRebuild: the rows of "Rebuilding a follower" this side can answer (a follower that
// predates kind 24 answers UnsupportedKind in its transport, never here).
func decideRebuild(st *FollowerState, from string, kind proto.Kind, m *proto.ReplicateRebuild) Decision {
	corr := m.CorrelationID
	if d, good := checkKind(st, corr, kind, proto.KindReplicateRebuild, m.Log); !good {
		return d
	}
	ballot, d, good := checkEpoch(st, corr, m.Generation, from)
	if !good {
		return d
	}
	return Decision{Action: ActRebuild, PlaceAt: m.BaseOffset, Epochs: []Epoch{}, Ballot: ballot, Sync: true,
		Answer: ok(corr, m.BaseOffset), Reason: "follows the shard at that generation"}
}

// decideFence: a promotion fence (or the read-confirmation round at the accepted
// generation, which writes nothing). A newer generation is accepted from its sender.
func decideFence(st *FollowerState, from string, kind proto.Kind, m *proto.Fence) Decision {
	corr := m.CorrelationID
	if d, good := checkKind(st, corr, kind, proto.KindFence, m.Log); !good {
		return d
	}
	answer := &proto.FenceOk{CorrelationID: corr, Log: m.Log, Generation: m.Generation, DurableOffset: st.Durable}
	if m.Generation > st.Ballot.Generation {
		return Decision{Action: ActFenceOk, Answer: answer, Ballot: &Ballot{Generation: m.Generation, Leader: from},
			Reason: fmt.Sprintf("accepts generation %d from %q", m.Generation, from)}
	}
	ballot, d, good := checkEpoch(st, corr, m.Generation, from)
	if !good {
		return d
	}
	return Decision{Action: ActFenceOk, Answer: answer, Ballot: ballot, Reason: "at the accepted generation"}
}

// equalRecords compares the stored records of [from, to) with the batch's payloads there
// and returns the first offset that differs, to when none does.
func equalRecords(st *FollowerState, m *proto.ReplicateRecords, from, to uint64) (uint64, error) {
	if from >= to {
		return to, nil
	}
	if st.Records == nil {
		return 0, fmt.Errorf("no record reader")
	}
	stored, err := st.Records.ReadRecords(from, to)
	if err != nil {
		return 0, err
	}
	if uint64(len(stored)) != to-from {
		return 0, fmt.Errorf("reader returned %d records for [%d, %d)", len(stored), from, to)
	}
	for i, s := range stored {
		if !bytes.Equal(s, m.Payloads[from-m.FirstOffset+uint64(i)]) {
			return from + uint64(i), nil
		}
	}
	return to, nil
}

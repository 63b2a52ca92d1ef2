package placement

import (
	"fmt"
	"slices"

	"felix/proto"
)

// Position is how far one replica's copy of one log is: the generation of its newest
// record (the last entry of its epochs history) and its fsynced offset (durable_offset).
// Positions compare as Raft compares logs: the newer last generation is ahead; at the same
// one, the longer log.
type Position struct {
	LastGeneration uint64
	Durable        uint64
}

// Ahead reports whether p is ahead of q.
func (p Position) Ahead(q Position) bool {
	return p.LastGeneration > q.LastGeneration || (p.LastGeneration == q.LastGeneration && p.Durable > q.Durable)
}

// String renders "durable@generation" ("12@3").
func (p Position) String() string { return fmt.Sprintf("%d@%d", p.Durable, p.LastGeneration) }

// FenceAnswer is one replica's FenceOk for one log: the generation it accepted (the
// fence's, when it took it), and its position. proto.FenceOk (26) carries Generation and
// DurableOffset; LastGeneration is the field the known gap adds (docs/failover.md,
// "Fence rounds": until the wire carries it, the leader learns it from the replica's
// report).
type FenceAnswer struct {
	Log        proto.ReplicaLog
	Generation uint64
	At         Position
}

// AnswerFromFenceOk builds a FenceAnswer from the wire answer and the replica's last
// generation for that log.
func AnswerFromFenceOk(m *proto.FenceOk, lastGeneration uint64) FenceAnswer {
	return FenceAnswer{Log: m.Log, Generation: m.Generation,
		At: Position{LastGeneration: lastGeneration, Durable: m.DurableOffset}}
}

// GatingLogs are the logs whose position decides a fence round for a shard kind: a stream
// shard's records and producers logs (the idempotent-producer window: a promoted leader's
// window is never behind a fenced replica's, issue 20 H1), a cache shard's cache and
// counter logs. The other logs (group cursors, dead letters) are fenced too but never gate
// (issue 18). A stream's producers log is subordinate to its records log (Subordinate).
func GatingLogs(kind proto.ShardKind) []proto.ReplicaLog {
	if kind == proto.ShardCache {
		return []proto.ReplicaLog{proto.LogCache, proto.LogCounters}
	}
	return []proto.ReplicaLog{proto.LogStream, proto.LogProducers}
}

// Subordinate reports the log whose position must be level for l's to count (a stream's
// producers log is compared only between replicas level on the records log: positions
// compare lexicographically, records first, so two replicas can never each be ahead of
// the other and refuse in turn); ok=false for a log compared on its own.
func Subordinate(l proto.ReplicaLog) (proto.ReplicaLog, bool) {
	if l == proto.LogProducers {
		return proto.LogStream, true
	}
	return 0, false
}

// FenceConfig is one promoted leader's fence round.
type FenceConfig struct {
	// Generation is the new generation; Self the promoted broker; ReplicaSet every
	// member, Self included.
	Generation uint64
	Self       string
	ReplicaSet []string
	// Own is Self's position on each gating log (GatingLogs).
	Own map[proto.ReplicaLog]Position
	// MajorityAck is whether majority_ack is finalized: the round then gates opening.
	// Before it the shard opens on the lease at once, and the round still refuses (stops
	// the shard) if a replica answers ahead.
	MajorityAck bool
	without     gaps
}

// FenceState is a round's state.
type FenceState uint8

// Fence round states.
const (
	// FencePending: fewer than a majority answered at the generation.
	FencePending FenceState = iota + 1
	// FenceOpen: the leader may serve (a majority answered and none is ahead of it; or,
	// before majority_ack, on the lease).
	FenceOpen
	// FenceRefused: a fenced replica is ahead of the leader on a gating log: it does not
	// open (or stops) and reports FenceOutcome.Ahead to placement.
	FenceRefused
	// FenceLost: a replica answered FencedEpoch: a newer generation exists; step down.
	FenceLost
)

var fenceStateNames = [...]string{"", "pending", "open", "refused", "lost"}

// String returns "pending", "open", "refused" or "lost".
func (s FenceState) String() string {
	if s >= FencePending && s <= FenceLost {
		return fenceStateNames[s]
	}
	return fmt.Sprintf("FenceState(%d)", uint8(s))
}

// FenceOutcome is a round's outcome so far.
type FenceOutcome struct {
	State FenceState
	// Answered counts the members (Self included) that answered every gating log at the
	// generation; Majority is how many must.
	Answered, Majority int
	// Ahead, with FenceRefused, is the member furthest ahead, on AheadLog at AheadAt.
	Ahead    string
	AheadLog proto.ReplicaLog
	AheadAt  Position
	Reason   string
}

// Refusal returns the FenceRefusal for placement (meaningful with FenceRefused).
func (o FenceOutcome) Refusal(generation uint64, self string) FenceRefusal {
	return FenceRefusal{Generation: generation, By: self, Ahead: o.Ahead, AheadAt: o.AheadAt}
}

// FenceRound collects the fence answers of one promotion. Not safe for concurrent use.
type FenceRound struct {
	cfg     FenceConfig
	gating  []proto.ReplicaLog
	answers map[string]map[proto.ReplicaLog]Position
	lost    string
	opened  bool
}

// NewFenceRound starts a round. Errors: *InputError when Self is not in the replica set,
// a member is repeated or empty, or Own is empty.
func NewFenceRound(cfg FenceConfig) (*FenceRound, error) {
	if !slices.Contains(cfg.ReplicaSet, cfg.Self) {
		return nil, badInput("fence: self %q is not in the replica set", cfg.Self)
	}
	for i, m := range cfg.ReplicaSet {
		if m == "" || slices.Contains(cfg.ReplicaSet[:i], m) {
			return nil, badInput("fence: member %q empty or repeated", m)
		}
	}
	if len(cfg.Own) == 0 {
		return nil, badInput("fence: no gating log")
	}
	r := &FenceRound{cfg: cfg, answers: map[string]map[proto.ReplicaLog]Position{}}
	for l := range cfg.Own {
		r.gating = append(r.gating, l)
	}
	slices.Sort(r.gating)
	return r, nil
}

// Answer records from's FenceOk for one log and returns the outcome. An answer at another
// generation (a late one from an older round), from a non-member or for a non-gating log
// changes nothing.
func (r *FenceRound) Answer(from string, a FenceAnswer) FenceOutcome {
	_, gating := r.cfg.Own[a.Log]
	if gating && a.Generation == r.cfg.Generation && from != r.cfg.Self && slices.Contains(r.cfg.ReplicaSet, from) {
		if r.answers[from] == nil {
			r.answers[from] = map[proto.ReplicaLog]Position{}
		}
		r.answers[from][a.Log] = a.At
	}
	return r.Outcome()
}

// Refused records a refusal of the fence by from: FencedEpoch (it accepted a newer
// generation) loses the round; any other code (Unauthorized, a dropped connection) only
// means no answer from it.
func (r *FenceRound) Refused(from string, code proto.InternalCode) FenceOutcome {
	if code == proto.InternalFencedEpoch && slices.Contains(r.cfg.ReplicaSet, from) {
		r.lost = from
	}
	return r.Outcome()
}

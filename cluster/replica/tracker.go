package replica

import "slices"

// TrackerConfig are a quorum tracker's fixed inputs for one log at one generation.
type TrackerConfig struct {
	// Generation is the leader's; acknowledgements at any other generation are ignored.
	Generation uint64
	// Leader is the leader's node id; ReplicaSet every member's, the leader's included.
	Leader     string
	ReplicaSet []string
	// GenerationStart is whether generation_start is finalized: the mark then counts only
	// past the leader's generation-start record, at StartOffset.
	GenerationStart bool
	StartOffset     uint64
	// Floor is the mark the generation starts from (what this leader already knows is
	// held by a majority; 0 when it knows nothing).
	Floor uint64
	// MajorityAck is whether majority_ack is finalized; before it, AckMark also needs the
	// leader's lease from the control plane to be valid.
	MajorityAck bool
}

// Tracker computes one log's quorum mark: the highest offset held by a majority of the
// replica set, the leader counted at its own fsynced offset and each follower only at
// offsets it acknowledged in answer to this leader's own batches at this generation (see
// Shipper.Acked: a longer stale tail never counts). With generation_start the mark counts
// only past the leader's generation-start record. It never moves backwards within a
// generation. Not safe for concurrent use.
type Tracker struct {
	cfg   TrackerConfig
	held  map[string]uint64
	ids   map[string]string // storage identity each follower is counted under (tracker_identity.go)
	mark  uint64
	order []uint64 // scratch
}

// NewTracker returns a tracker at cfg.Floor. Members are deduplicated; the leader counts
// even when the set omits it.
func NewTracker(cfg TrackerConfig) *Tracker {
	t := &Tracker{cfg: cfg, held: map[string]uint64{}, mark: cfg.Floor}
	t.held[cfg.Leader] = 0
	for _, m := range cfg.ReplicaSet {
		t.held[m] = 0
	}
	return t
}

// Mark returns the quorum mark: every offset below it is held by a majority.
func (t *Tracker) Mark() uint64 { return t.mark }

// Majority returns how many members must hold an offset (n/2 + 1).
func (t *Tracker) Majority() int { return len(t.held)/2 + 1 }

// LeaderDurable records the leader's own fsynced offset and returns the mark.
func (t *Tracker) LeaderDurable(offset uint64) uint64 {
	t.held[t.cfg.Leader] = max(t.held[t.cfg.Leader], offset)
	return t.recompute()
}

// Acked records that follower acknowledged offset at generation (Shipper.Acked after an
// answer to this leader's batch) and returns the mark. Another generation's, the leader's
// own or a non-member's acknowledgement changes nothing.
func (t *Tracker) Acked(follower string, generation, offset uint64) uint64 {
	if _, member := t.held[follower]; !member || follower == t.cfg.Leader || generation != t.cfg.Generation {
		return t.mark
	}
	t.held[follower] = max(t.held[follower], offset)
	return t.recompute()
}

// AckMark is the offset below which Quorum writes may be acknowledged at now: the mark with
// majority_ack; before it is finalized, the mark only while now is before leaseExpiry (the
// control plane's lease), else 0 (nothing more is acknowledged).
func (t *Tracker) AckMark(now, leaseExpiry int64) uint64 {
	if t.cfg.MajorityAck || now < leaseExpiry {
		return t.mark
	}
	return 0
}

// recompute moves the mark to the offset a majority holds, when that is higher and (with
// generation_start) past the generation-start record.
func (t *Tracker) recompute() uint64 {
	t.order = t.order[:0]
	for _, v := range t.held {
		t.order = append(t.order, v)
	}
	slices.Sort(t.order)
	cand := t.order[len(t.order)-t.Majority()]
	if t.cfg.GenerationStart && cand <= t.cfg.StartOffset {
		return t.mark
	}
	t.mark = max(t.mark, cand)
	return t.mark
}

// MarkWithout returns the offset a majority of the replica set holds when member's copy is
// not counted. The rebuild policy (docs/replication.md) sends ReplicateRebuild to a halted
// follower only while MarkWithout(follower) is past the leader's generation start (its
// generation-start record, or its tail when it began serving): discarding that copy must
// not leave an acknowledged record, of this generation or an older one, on fewer than a
// majority.
func (t *Tracker) MarkWithout(member string) uint64 {
	t.order = t.order[:0]
	for m, v := range t.held {
		if m != member {
			t.order = append(t.order, v)
		}
	}
	need := t.Majority()
	if len(t.order) < need {
		return 0
	}
	slices.Sort(t.order)
	return t.order[len(t.order)-need]
}

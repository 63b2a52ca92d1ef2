package proto

// FencePosition and FencePositionOk (34/35): the promotion fence whose answer carries the
// replica's position on the fenced log, its last generation besides its fsynced offset
// (issue 20, known gap 1: a promoted leader compares positions as Raft compares logs and
// refuses to open behind a fenced replica; docs/failover.md, "Fence rounds"). Additive:
// Fence/FenceOk (25/26) are frozen and still served; a peer predating 34 answers
// UnsupportedKind and the leader falls back to 25.

// FencePosition (34) is a Fence (25) body: shard ref, u8 log, u64 generation. The follower
// decides it exactly as a Fence (it accepts a newer generation, refuses an older one with
// ReplicateError(FencedEpoch)) and answers FencePositionOk instead of FenceOk.
type FencePosition struct {
	Fence
}

// FencePositionOk (35) is a FenceOk (26) body (u8 log, u64 accepted generation, u64
// durable_offset), then u64 last_generation: the generation of the newest record below
// durable_offset on that log (the last entry of its epochs history that begins below it;
// 0 for an empty log or one without a generation history).
type FencePositionOk struct {
	FenceOk
	LastGeneration uint64
}

// Kind implements InternalMessage.
func (*FencePosition) Kind() Kind { return KindFencePosition }

// Kind implements InternalMessage.
func (*FencePositionOk) Kind() Kind { return KindFencePositionOk }

// AppendBody implements InternalMessage: the body of 25.
func (m *FencePosition) AppendBody(dst []byte) ([]byte, error) { return m.Fence.AppendBody(dst) }

// AppendBody implements InternalMessage: the body of 26, then u64 last_generation.
func (m *FencePositionOk) AppendBody(dst []byte) ([]byte, error) {
	out, err := m.FenceOk.AppendBody(dst)
	if err != nil {
		return dst, err
	}
	return appendU64(out, m.LastGeneration), nil
}

// decodeFencePosition reads the rest of a FencePosition or FencePositionOk body.
func decodeFencePosition(kind Kind, corr uint64, c *cursor) (InternalMessage, bool, error) {
	if kind == KindFencePosition {
		f := &FencePosition{Fence: Fence{CorrelationID: corr}}
		return f, true, decodeFenceRest(c, &f.Fence)
	}
	f := &FencePositionOk{FenceOk: FenceOk{CorrelationID: corr}}
	if err := decodeFenceOkRest(c, &f.FenceOk); err != nil {
		return f, true, err
	}
	var err error
	f.LastGeneration, err = c.u64("last_generation")
	return f, true, err
}

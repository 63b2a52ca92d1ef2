package history

import "time"

// BuilderEpoch is the wall-clock time of InvokeNS == 0 in a built history.
var BuilderEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Builder builds a history in code (tests, the selftest's planted
// histories). Not safe for concurrent use.
type Builder struct {
	ops   []Op
	clock int64 // the next free nanosecond for an automatically timed op
}

// NewBuilder returns an empty Builder.
func NewBuilder() *Builder { return &Builder{} }

// Add appends op with the next Index and returns that index. An op with
// InvokeNS == CompleteNS == 0 gets the next free slot [t, t+1] after every
// earlier op (so automatically timed ops never overlap); otherwise its times
// are kept. Wall times are BuilderEpoch plus the ns. An empty Outcome means
// OK. Add does not validate: Load or Op.Validate does.
func (b *Builder) Add(op Op) int {
	if op.InvokeNS == 0 && op.CompleteNS == 0 {
		op.InvokeNS, op.CompleteNS = b.clock, b.clock+1
	}
	b.clock = max(b.clock, op.CompleteNS+1)
	if op.Outcome == "" {
		op.Outcome = OK
	}
	op.Index = len(b.ops)
	op.InvokeWall = BuilderEpoch.Add(time.Duration(op.InvokeNS))
	op.CompleteWall = BuilderEpoch.Add(time.Duration(op.CompleteNS))
	b.ops = append(b.ops, op)
	return op.Index
}

// History returns the built history; later Adds do not change it.
func (b *Builder) History() *History {
	return &History{Ops: append([]Op(nil), b.ops...)}
}

// Offset returns a pointer to off, for Input.From.
func Offset(off uint64) *uint64 { return &off }

// Payloads converts strings to Bytes, for Input.Payloads.
func Payloads(ids ...string) []Bytes {
	out := make([]Bytes, len(ids))
	for i, id := range ids {
		out[i] = Bytes(id)
	}
	return out
}

package groups

import (
	"errors"
	"testing"
)

// rig drives a Shard the way the core does, over two in-memory logs whose durable
// prefix is tracked separately, so a test can crash with either tail lost.
type rig struct {
	t       *testing.T
	opts    Options
	s       *Shard
	now     int64
	cursor  [][]byte // the cursor log; [:cursorDurable] survives a crash
	dead    [][]byte // the dead-letter log; [:deadDurable] survives a crash
	curDur  int
	deadDur int
	report  ReplayReport
}

func newRig(t *testing.T, cfg GroupConfig) *rig {
	t.Helper()
	r := &rig{t: t, opts: Options{Defaults: cfg}, now: 1_000_000}
	s, err := NewShard(r.opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.s = s
	return r
}

// write appends the staged effects to the logs without making them durable.
func (r *rig) write() Effects {
	fx := r.s.TakeEffects()
	for _, p := range fx.Cursor {
		r.cursor = append(r.cursor, append([]byte(nil), p...))
	}
	for _, p := range fx.DeadLetters {
		r.dead = append(r.dead, append([]byte(nil), p...))
	}
	return fx
}

// sync writes the staged effects and makes both logs durable.
func (r *rig) sync() Token {
	fx := r.write()
	r.curDur, r.deadDur = len(r.cursor), len(r.dead)
	r.s.MarkDurable(fx.Token)
	return fx.Token
}

// crash drops everything not durable (staged effects included) and reopens.
func (r *rig) crash() {
	r.t.Helper()
	r.cursor, r.dead = r.cursor[:r.curDur], r.dead[:r.deadDur]
	r.reopen()
}

// reopen replays both logs into a new Shard and makes its repair records durable.
func (r *rig) reopen() {
	r.t.Helper()
	rp, err := NewReplayer(r.opts, uint64(len(r.dead)))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, p := range r.dead {
		if err := rp.DeadLetter(p); err != nil {
			r.t.Fatalf("dead-letter replay: %v", err)
		}
	}
	for _, p := range r.cursor {
		if err := rp.Cursor(p); err != nil {
			r.t.Fatalf("cursor replay: %v", err)
		}
	}
	s, rep, err := rp.Finish(r.now)
	if err != nil {
		r.t.Fatal(err)
	}
	r.s, r.report = s, rep
	r.sync()
}

func (r *rig) poll(group string, c ConsumerID, max int, end uint64) []Lease {
	r.t.Helper()
	ls, _, err := r.s.Poll(nil, PollRequest{Group: group, Consumer: c, MaxRecords: max, NowMillis: r.now, Window: Window{End: end}})
	if err != nil {
		r.t.Fatalf("poll: %v", err)
	}
	return ls
}

func (r *rig) ack(group string, c ConsumerID, offs ...uint64) error {
	refs := make([]Ref, len(offs))
	for i, o := range offs {
		refs[i] = Ref{Offset: o}
	}
	_, err := r.s.Ack(group, c, refs, r.now)
	return err
}

func (r *rig) nack(group string, c ConsumerID, delay int64, offs ...uint64) error {
	refs := make([]Ref, len(offs))
	for i, o := range offs {
		refs[i] = Ref{Offset: o}
	}
	_, err := r.s.Nack(group, c, refs, delay, r.now)
	return err
}

func offsets(ls []Lease) []uint64 {
	out := make([]uint64, len(ls))
	for i, l := range ls {
		out[i] = l.Offset
	}
	return out
}

func wantOffsets(t *testing.T, ls []Lease, want ...uint64) {
	t.Helper()
	got := offsets(ls)
	if len(got) != len(want) {
		t.Fatalf("leased %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("leased %v, want %v", got, want)
		}
	}
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

package groups

import (
	"errors"
	"maps"
	"math/rand"
	"slices"
	"testing"

	"felix/internal/testseed"
)

// mOff is the model's view of one delivered offset.
type mOff struct {
	state      entryState // stateLeased, statePending, or mAcked / mDead
	deliveries uint32
	consumer   ConsumerID
	at         int64
	deadAt     int64
}

const (
	mAcked entryState = 10
	mDead  entryState = 11
)

// model is a plain restatement of docs/groups.md semantics for one group, with no
// queues: every decision scans every offset.
type model struct {
	cfg      GroupConfig
	frontier uint64
	offs     map[uint64]mOff
}

func (m *model) clone() *model {
	c := *m
	c.offs = maps.Clone(m.offs)
	return &c
}

func (m *model) expire(now int64) {
	for _, off := range slices.Sorted(maps.Keys(m.offs)) {
		o := m.offs[off]
		if o.state != stateLeased || o.at > now {
			continue
		}
		if o.deliveries >= m.cfg.MaxDeliveries {
			o.state, o.deadAt = mDead, now
		} else {
			o.state = statePending
		}
		m.offs[off] = o
	}
}

func (m *model) poll(c ConsumerID, max int, now int64, end uint64) []Lease {
	m.expire(now)
	max = min(max, int(m.cfg.MaxPollRecords))
	var ready []uint64
	for off, o := range m.offs {
		if o.state == statePending && o.at <= now {
			ready = append(ready, off)
		}
	}
	slices.SortFunc(ready, func(a, b uint64) int {
		if m.offs[a].at != m.offs[b].at {
			return int(m.offs[a].at - m.offs[b].at)
		}
		return int(a) - int(b)
	})
	var out []Lease
	deadline := now + m.cfg.VisibilityTimeoutMillis
	take := func(off uint64, o mOff) {
		o.deliveries++
		o.state, o.consumer, o.at = stateLeased, c, deadline
		m.offs[off] = o
		out = append(out, Lease{Offset: off, Delivery: o.deliveries, DeadlineMillis: deadline})
	}
	for _, off := range ready {
		if len(out) == max {
			return out
		}
		take(off, m.offs[off])
	}
	for ; len(out) < max && m.frontier < end; m.frontier++ {
		take(m.frontier, mOff{})
	}
	return out
}

// settle reports whether c may ack or nack off now.
func (m *model) settle(c ConsumerID, off uint64, now int64) (mOff, bool) {
	o, ok := m.offs[off]
	return o, ok && o.state == stateLeased && o.consumer == c && now < o.at
}

func (m *model) ack(c ConsumerID, offs []uint64, now int64) (refused []uint64) {
	for _, off := range offs {
		o, ok := m.settle(c, off, now)
		switch {
		case ok:
			o.state = mAcked
			m.offs[off] = o
		case o.state == mAcked:
		default:
			refused = append(refused, off)
		}
	}
	return refused
}

func (m *model) nack(c ConsumerID, offs []uint64, delay, now int64) (refused []uint64) {
	for _, off := range offs {
		o, ok := m.settle(c, off, now)
		switch {
		case ok && o.deliveries >= m.cfg.MaxDeliveries:
			o.state, o.deadAt = mDead, now
			m.offs[off] = o
		case ok:
			o.state, o.at = statePending, now+delay
			m.offs[off] = o
		case o.state == mAcked:
		default:
			refused = append(refused, off)
		}
	}
	return refused
}

func (m *model) redrive(offs []uint64, now int64) int {
	n := 0
	for _, off := range offs {
		if o := m.offs[off]; o.state == mDead {
			m.offs[off] = mOff{state: statePending, at: now}
			n++
		}
	}
	return n
}

func (m *model) restart(now int64) {
	for off, o := range m.offs {
		switch {
		case o.state == stateLeased && o.deliveries >= m.cfg.MaxDeliveries:
			o.state, o.deadAt = mDead, now
		case o.state == stateLeased || o.state == statePending:
			o.state, o.at = statePending, now
		}
		m.offs[off] = o
	}
}

func (m *model) dead() []DeadLetter {
	var out []DeadLetter
	for _, off := range slices.Sorted(maps.Keys(m.offs)) {
		if o := m.offs[off]; o.state == mDead {
			out = append(out, DeadLetter{Offset: off, Deliveries: o.deliveries, AtMillis: o.deadAt})
		}
	}
	return out
}

func refusedOffsets(t *testing.T, err error) []uint64 {
	t.Helper()
	if err == nil {
		return nil
	}
	var oe *OffsetsError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v is not an *OffsetsError", err)
	}
	var out []uint64
	for _, r := range oe.Refused {
		if !errors.Is(r.Err, ErrLeaseExpired) && !errors.Is(r.Err, ErrNotLeased) && !errors.Is(r.Err, ErrNotDead) {
			t.Fatalf("refusal reason %v", r.Err)
		}
		out = append(out, r.Offset)
	}
	return out
}

// TestAgainstModel runs random schedules of polls, acks, nacks, lease expiries, redrives,
// publishes, syncs and crashes (which drop everything not synced) against the model,
// comparing every answer, and checks that no two consumers ever hold one record.
func TestAgainstModel(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 50
	}
	testseed.Run(t, 1, seeds, func(t *testing.T, seed uint64) { runModel(t, int64(seed)) })
}

var runModelDebug bool

func runModel(t *testing.T, seed int64) {
	rnd := rand.New(rand.NewSource(seed))
	cfg := GroupConfig{
		VisibilityTimeoutMillis: 1 + rnd.Int63n(50),
		MaxDeliveries:           1 + uint32(rnd.Intn(4)),
		RedeliveryDelayMillis:   1 + rnd.Int63n(20),
		MaxPollRecords:          1 + uint32(rnd.Intn(8)),
	}
	r := newRig(t, cfg)
	if _, err := r.s.CreateGroup("g", GroupConfig{}, 0); err != nil {
		t.Fatal(err)
	}
	r.sync()
	cur := &model{cfg: cfg, offs: map[uint64]mOff{}}
	durable := cur.clone()
	var end uint64
	held := map[uint64]Lease{} // offset → latest lease handed out (for exclusivity)
	holder := map[uint64]ConsumerID{}
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: "+format, append([]any{seed, step}, args...)...)
	}
	pick := func() []uint64 {
		var offs []uint64
		for i := rnd.Intn(4); i >= 0 && end > 0; i-- {
			if off := uint64(rnd.Int63n(int64(end))); !slices.Contains(offs, off) {
				offs = append(offs, off)
			}
		}
		return offs
	}
	for step := 0; step < 200; step++ {
		c := ConsumerID(1 + rnd.Intn(3))
		op := rnd.Intn(100)
		if runModelDebug {
			t.Logf("step %d op %d c %d now %d end %d", step, op, c, r.now, end)
		}
		switch {
		case op < 10:
			end += uint64(1 + rnd.Intn(5))
		case op < 35:
			max := 1 + rnd.Intn(6)
			got := r.poll("g", c, max, end)
			want := cur.poll(c, max, r.now, end)
			if !slices.Equal(got, want) {
				fail(step, "poll got %+v, want %+v", got, want)
			}
			for _, l := range got {
				if prev, ok := held[l.Offset]; ok && prev.DeadlineMillis > r.now {
					fail(step, "offset %d leased to %d while consumer %d's lease runs until %d",
						l.Offset, c, holder[l.Offset], prev.DeadlineMillis)
				}
				held[l.Offset], holder[l.Offset] = l, c
			}
		case op < 55:
			offs := pick()
			got := refusedOffsets(t, r.ack("g", c, offs...))
			if want := cur.ack(c, offs, r.now); !slices.Equal(got, want) {
				fail(step, "ack %v by %d refused %v, want %v", offs, c, got, want)
			}
			release(held, holder, c, offs, got)
		case op < 68:
			offs := pick()
			delay := rnd.Int63n(30) - 1
			got := refusedOffsets(t, r.nack("g", c, delay, offs...))
			d := delay
			if d < 0 {
				d = cfg.RedeliveryDelayMillis
			}
			if want := cur.nack(c, offs, d, r.now); !slices.Equal(got, want) {
				fail(step, "nack %v by %d refused %v, want %v", offs, c, got, want)
			}
			release(held, holder, c, offs, got)
		case op < 72:
			offs := pick()
			n, _, _ := r.s.Redrive("g", offs, r.now)
			if want := cur.redrive(offs, r.now); n != want {
				fail(step, "redrive %v: %d, want %d", offs, n, want)
			}
		case op < 80:
			r.s.Tick(r.now)
			cur.expire(r.now)
		case op < 90:
			r.sync()
			durable = cur.clone()
		case op < 95:
			r.crash()
			cur = durable.clone()
			cur.restart(r.now)
			durable = cur.clone()
			clear(held)
		default:
			r.now += rnd.Int63n(60)
		}
		r.now += rnd.Int63n(5)
		got, _, err := r.s.DeadLetters(nil, "g", 0, 1000)
		if err != nil {
			fail(step, "dead letters: %v", err)
		}
		if want := cur.dead(); !slices.Equal(got, want) {
			fail(step, "dead letters %+v, want %+v", got, want)
		}
		checkExclusive(t, r.s.byName["g"], r.now)
	}
}

// release forgets the leases c settled (offsets not refused).
func release(held map[uint64]Lease, holder map[uint64]ConsumerID, c ConsumerID, offs, refused []uint64) {
	for _, off := range offs {
		if holder[off] == c && !slices.Contains(refused, off) {
			delete(held, off)
		}
	}
}

// checkExclusive checks the state machine's own invariants: one holder per offset (by
// construction of the entry map), every outstanding offset below the frontier, and no
// offset both outstanding and dead.
func checkExclusive(t *testing.T, g *group, now int64) {
	t.Helper()
	for off, e := range g.entries {
		if off >= g.frontier {
			t.Fatalf("outstanding offset %d at or above frontier %d", off, g.frontier)
		}
		if _, dead := g.dead[off]; dead {
			t.Fatalf("offset %d both outstanding and dead", off)
		}
		if e.deliveries > g.cfg.MaxDeliveries+1 {
			t.Fatalf("offset %d delivered %d times, max %d", off, e.deliveries, g.cfg.MaxDeliveries)
		}
	}
}

// Package clocktest holds the one fake clock.Clock of the module (tests only): Fake, whose
// time moves only through Advance and whose timers fire when Advance passes their deadline.
// core/coretest's manual engine, the core, seglog, auth and testbed tests use it.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"felix/clock"
)

// Epoch is the wall time NewFake(time.Time{}) starts at: 2023-11-14T22:13:20Z, whose
// UnixMicro is 1_700_000_000_000_000 (a fixed, recognisable instant).
var Epoch = time.UnixMicro(1_700_000_000_000_000).UTC()

// Fake is a clock.Clock stepped by hand. Its monotonic reading starts at 0 and its wall
// reading at the start given to NewFake; both move only through Advance, together. Safe for
// concurrent use; the zero value is a Fake started at Epoch. Timers fire (a value is sent on C, buffered 1) inside the Advance that
// reaches their deadline, in deadline order.
type Fake struct {
	mu     sync.Mutex
	start  time.Time
	mono   time.Duration
	timers []*fakeTimer
}

var _ clock.Clock = (*Fake)(nil)

// NewFake returns a Fake whose wall time is start (Epoch when start is zero) and whose
// monotonic reading is 0.
func NewFake(start time.Time) *Fake {
	if start.IsZero() {
		start = Epoch
	}
	return &Fake{start: start.Round(0)}
}

// MonoNanos implements clock.Clock: nanoseconds advanced since NewFake.
func (c *Fake) MonoNanos() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.mono)
}

// Now implements clock.Clock: the start plus everything advanced.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.base().Add(c.mono)
}

// base is the wall time at monotonic 0 (the caller holds mu): Epoch for a zero Fake.
func (c *Fake) base() time.Time {
	if c.start.IsZero() {
		return Epoch
	}
	return c.start
}

// WallMicros implements clock.Clock.
func (c *Fake) WallMicros() int64 { return c.Now().UnixMicro() }

// Advance moves both readings forward by d (d <= 0 changes nothing: time never goes back)
// and fires every active timer whose deadline is now reached.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mono += max(d, 0)
	due := make([]*fakeTimer, 0, len(c.timers))
	for _, t := range c.timers {
		if t.active && t.when <= c.mono {
			due = append(due, t)
		}
	}
	sort.SliceStable(due, func(i, j int) bool { return due[i].when < due[j].when })
	for _, t := range due {
		t.fire(c.base().Add(c.mono))
	}
}

// Deadlines returns the wall times at which the active timers will fire, earliest first:
// what a test waits on before it advances past one.
func (c *Fake) Deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.timers {
		if t.active {
			out = append(out, c.base().Add(t.when))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// NewTimer implements clock.Clock: a timer that fires once the clock has advanced d (at
// once, inside NewTimer, when d <= 0).
func (c *Fake) NewTimer(d time.Duration) clock.Timer {
	t := &fakeTimer{clock: c, c: make(chan time.Time, 1)}
	c.mu.Lock()
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	t.Reset(d)
	return t
}

// fakeTimer is a Fake's timer: when is its deadline on the monotonic reading.
type fakeTimer struct {
	clock  *Fake
	c      chan time.Time
	when   time.Duration
	active bool
}

// fire sends now (the clock's lock held) and disarms the timer.
func (t *fakeTimer) fire(now time.Time) {
	t.active = false
	select {
	case t.c <- now:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

// Reset re-arms the timer d from now, draining a value of an earlier arming first.
func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.active
	t.drain()
	t.when, t.active = c.mono+d, true
	if d <= 0 {
		t.fire(c.base().Add(c.mono))
	}
	return was
}

// Stop disarms the timer, draining a value not yet received.
func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.active
	t.active = false
	t.drain()
	return was
}

func (t *fakeTimer) drain() {
	select {
	case <-t.c:
	default:
	}
}

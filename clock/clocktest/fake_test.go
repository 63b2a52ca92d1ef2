package clocktest

import (
	"testing"
	"time"
)

func TestFakeReadingsMoveOnlyThroughAdvance(t *testing.T) {
	c := NewFake(time.Time{})
	if c.MonoNanos() != 0 || c.WallMicros() != 1_700_000_000_000_000 || !c.Now().Equal(Epoch) {
		t.Fatalf("start: mono %d wall %d now %v", c.MonoNanos(), c.WallMicros(), c.Now())
	}
	c.Advance(1500 * time.Microsecond)
	c.Advance(-time.Hour) // never backwards
	if c.MonoNanos() != 1_500_000 || c.WallMicros() != 1_700_000_000_001_500 {
		t.Fatalf("after advance: mono %d wall %d", c.MonoNanos(), c.WallMicros())
	}
}

func received(tm interface{ C() <-chan time.Time }) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}

func TestFakeTimers(t *testing.T) {
	c := NewFake(time.Time{})
	a, b := c.NewTimer(10*time.Second), c.NewTimer(time.Second)
	if got := c.Deadlines(); len(got) != 2 || !got[0].Equal(Epoch.Add(time.Second)) {
		t.Fatalf("deadlines %v", got)
	}
	c.Advance(999 * time.Millisecond)
	if received(a) || received(b) {
		t.Fatal("fired early")
	}
	c.Advance(time.Millisecond)
	if !received(b) || received(a) {
		t.Fatal("b must fire at 1s, a not yet")
	}
	if a.Stop() != true || a.Stop() != false {
		t.Fatal("Stop reports whether the timer was active")
	}
	c.Advance(time.Minute)
	if received(a) {
		t.Fatal("a stopped timer fired")
	}
	if b.Reset(time.Second) != false {
		t.Fatal("a fired timer is not active")
	}
	c.Advance(2 * time.Second)
	c.Advance(2 * time.Second) // a second pass past the deadline fires nothing more
	if !received(b) || received(b) {
		t.Fatal("a reset timer fires once")
	}
	z := c.NewTimer(0)
	if !received(z) {
		t.Fatal("a timer of 0 fires at once")
	}
	if len(c.Deadlines()) != 0 {
		t.Fatalf("no timer is active: %v", c.Deadlines())
	}
}

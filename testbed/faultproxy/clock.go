package faultproxy

import (
	"time"

	felixclock "felix/clock"
)

// Clock is the proxy's time source: Now stamps each datagram for the fault decisions (delay, rate,
// reorder timeout) and NewTimer wakes a link's scheduler when its next delayed datagram is due.
// The zero Config uses the system clock; tests pass clock/clocktest.Fake to step time by hand
// (any felix/clock.Clock is a Clock).
type Clock interface {
	// Now returns the current time (with a monotonic reading for the system clock).
	Now() time.Time
	// NewTimer returns a running timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the module's timer interface (felix/clock.Timer: C, Reset, Stop with Go 1.23
// semantics), so clock.Clock implementations and clock/clocktest.Fake are Clocks here.
type Timer = felixclock.Timer

// SystemClock is the Clock of the time package.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer(d).
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

// systemTimer adapts *time.Timer to Timer.
type systemTimer struct{ t *time.Timer }

// C, Reset and Stop forward to the *time.Timer.

func (s systemTimer) C() <-chan time.Time        { return s.t.C }
func (s systemTimer) Reset(d time.Duration) bool { return s.t.Reset(d) }
func (s systemTimer) Stop() bool                 { return s.t.Stop() }

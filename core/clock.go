package core

import "time"

// clock is the engine's one source of time (the seam tests replace with a
// fake): monotonic nanoseconds for deadlines and latencies, wall microseconds
// for record timestamps.
type clock interface {
	// MonoNanos is a monotonic reading in nanoseconds; only differences
	// between readings mean anything.
	MonoNanos() int64
	// WallMicros is the wall clock in microseconds since the Unix epoch.
	WallMicros() int64
}

// realClock reads the process clocks.
type realClock struct{ base time.Time }

func newRealClock() *realClock { return &realClock{base: time.Now()} }

func (c *realClock) MonoNanos() int64  { return int64(time.Since(c.base)) }
func (c *realClock) WallMicros() int64 { return time.Now().UnixMicro() }

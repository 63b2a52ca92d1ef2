// Package clock is Felix's time seam: the one source of wall and monotonic time that the
// engine and the broker read (core.Config.Clock, broker.Config.Clock), so that a test can
// replace it, and so that the cluster test bed can run one process on a skewed or slowed
// clock (testbed/supervisor's clock hook; docs/cluster-testing.md, "Supervisor").
//
// The hook: FromEnv reads FELIX_TEST_CLOCK_OFFSET_MS (a base-10 int64 of milliseconds added
// to the wall clock, may be negative) and FELIX_TEST_CLOCK_RATE (a decimal in (0, 1e9]: how
// fast the clock runs against real time). With offset o and rate r, read once at start with
// the real instants W0 (wall) and M0 (monotonic):
//
//	wall = W0 + o + r × (mono_real − M0)
//	mono = r × (mono_real − M0)
//
// Both are test-only settings: felix-broker logs a warning when either is set.
package clock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Clock is a source of time. MonoNanos is monotonic nanoseconds (only differences mean
// anything); WallMicros is wall time in microseconds since the Unix epoch; Now is wall time
// as a time.Time; NewTimer returns a running timer that fires once, d from now on this
// clock's time (a Skewed clock at rate r fires after d/r of real time; a fake one when its
// Advance passes the deadline). Implementations are safe for concurrent use.
// The fake is clock/clocktest.Fake.
type Clock interface {
	MonoNanos() int64
	WallMicros() int64
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer a Clock's user needs, with Go 1.23 semantics: after Stop
// or Reset returns, no value from the earlier arming is received from C. Reset and Stop
// report whether the timer was active.
type Timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// Environment variables of the test clock hook (see the package doc).
const (
	EnvOffsetMS = "FELIX_TEST_CLOCK_OFFSET_MS"
	EnvRate     = "FELIX_TEST_CLOCK_RATE"
)

// Real returns the process clock.
func Real() Clock { return &skewed{start: time.Now(), rate: 1} }

// Skewed returns a clock that starts now, offset by offset on the wall, running at rate
// times real speed (rate 1 = real speed). It panics on a rate that is not > 0: callers
// validate (FromEnv returns an error instead).
func Skewed(offset time.Duration, rate float64) Clock {
	if !(rate > 0) || math.IsInf(rate, 0) {
		panic(fmt.Sprintf("clock: rate %v", rate))
	}
	return &skewed{start: time.Now(), offset: offset, rate: rate}
}

// skewed is Real and Skewed: start holds both the wall and the monotonic reading.
type skewed struct {
	start  time.Time
	offset time.Duration
	rate   float64
}

func (c *skewed) elapsed() time.Duration {
	d := time.Since(c.start)
	if c.rate == 1 {
		return d
	}
	return time.Duration(float64(d) * c.rate)
}

func (c *skewed) MonoNanos() int64  { return int64(c.elapsed()) }
func (c *skewed) Now() time.Time    { return c.start.Round(0).Add(c.offset + c.elapsed()) }
func (c *skewed) WallMicros() int64 { return c.Now().UnixMicro() }

// NewTimer starts a time.Timer for d of this clock's time (d/rate of real time).
func (c *skewed) NewTimer(d time.Duration) Timer {
	return &realTimer{t: time.NewTimer(c.real(d)), c: c}
}

// real converts a duration of this clock's time into real time.
func (c *skewed) real(d time.Duration) time.Duration {
	if c.rate == 1 || d <= 0 {
		return d
	}
	return time.Duration(float64(d) / c.rate)
}

// realTimer adapts *time.Timer to Timer, scaling durations by its clock's rate.
type realTimer struct {
	t *time.Timer
	c *skewed
}

func (t *realTimer) C() <-chan time.Time        { return t.t.C }
func (t *realTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }
func (t *realTimer) Stop() bool                 { return t.t.Stop() }

// FromEnv returns the clock the test hook asks for, read through lookup (os.LookupEnv):
// Real and false when neither variable is set (or both are empty), else Skewed and true.
// Errors name the variable: an offset that is not an int64 of milliseconds, a rate that
// is not a number in (0, 1e9].
func FromEnv(lookup func(string) (string, bool)) (Clock, bool, error) {
	var offset time.Duration
	rate := 1.0
	set := false
	if v, ok := lookup(EnvOffsetMS); ok && strings.TrimSpace(v) != "" {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
			return nil, false, fmt.Errorf("clock: %s=%q: want an int64 of milliseconds", EnvOffsetMS, v)
		}
		offset, set = time.Duration(ms)*time.Millisecond, true
	}
	if v, ok := lookup(EnvRate); ok && strings.TrimSpace(v) != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(r > 0) || r > 1e9 {
			return nil, false, fmt.Errorf("clock: %s=%q: want a number in (0, 1e9]", EnvRate, v)
		}
		rate, set = r, true
	}
	if !set {
		return Real(), false, nil
	}
	return Skewed(offset, rate), true, nil
}

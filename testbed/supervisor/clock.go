package supervisor

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"felix/clock"
)

// The fake-clock hook: two variables the supervisor sets on the one process whose Spec has a
// Clock (and strips from every other process's inherited environment, so a clock set on the
// test binary never leaks into a node by accident). felix-broker reads them with
// felix/clock.FromEnv (its engine's and its token checks' time); the contract is in the doc
// of that package and of Clock.
const (
	// EnvClockOffsetMS is the offset added to the process's wall clock: a base-10 int64 in
	// milliseconds, may be negative ("-1500"). Absent = 0.
	EnvClockOffsetMS = clock.EnvOffsetMS
	// EnvClockRate is the speed of the process's clock relative to real time: a base-10
	// decimal > 0 ("1", "0.5", "10"); absent = 1.
	EnvClockRate = clock.EnvRate
)

// Clock is a fake-clock setting for one process. A process that honours the hook reads both
// variables once at start, keeps its real start instants (wall W0 and monotonic M0), and
// from then on reads
//
//	wall(t) = W0 + Offset + Rate × (mono(t) − M0)
//	mono(t) = Rate × (mono(t) − M0)        (monotonic nanoseconds since start)
//
// so Offset shifts its wall clock (skew against the other nodes) and Rate makes its time run
// fast (> 1) or slow (< 1); Rate must be in (0, 1e9] (time never stops or runs backwards). The zero
// Clock (Offset 0, Rate 0 meaning 1) is the real clock; Env then sets nothing.
type Clock struct {
	Offset time.Duration // added to the wall clock; carried in whole milliseconds
	Rate   float64       // clock speed relative to real time; 0 = 1 (real speed)
}

// Env returns the "K=V" entries for c: EnvClockOffsetMS when Offset is not 0 and
// EnvClockRate when Rate is neither 0 nor 1. Errors: Rate < 0, above 1e9 or NaN; an
// Offset that is not a whole number of milliseconds.
func (c Clock) Env() ([]string, error) {
	if c.Rate < 0 || c.Rate != c.Rate || c.Rate > 1e9 {
		return nil, fmt.Errorf("supervisor: clock rate %v: want a number > 0", c.Rate)
	}
	if c.Offset%time.Millisecond != 0 {
		return nil, fmt.Errorf("supervisor: clock offset %v is not a whole number of milliseconds", c.Offset)
	}
	var env []string
	if c.Offset != 0 {
		env = append(env, EnvClockOffsetMS+"="+strconv.FormatInt(c.Offset.Milliseconds(), 10))
	}
	if c.Rate != 0 && c.Rate != 1 {
		env = append(env, EnvClockRate+"="+strconv.FormatFloat(c.Rate, 'g', -1, 64))
	}
	return env, nil
}

// ParseClock reads the hook back from an environment lookup (os.LookupEnv): what a process
// honouring it would do at start. Absent variables give Offset 0 and Rate 1. Errors: a value
// that does not parse, or a Rate outside (0, 1e9], naming the variable.
func ParseClock(lookup func(string) (string, bool)) (Clock, error) {
	c := Clock{Rate: 1}
	if v, ok := lookup(EnvClockOffsetMS); ok && strings.TrimSpace(v) != "" {
		ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return Clock{}, fmt.Errorf("supervisor: %s=%q: %w", EnvClockOffsetMS, v, err)
		}
		c.Offset = time.Duration(ms) * time.Millisecond
	}
	if v, ok := lookup(EnvClockRate); ok && strings.TrimSpace(v) != "" {
		r, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(r > 0) || r > 1e9 {
			return Clock{}, fmt.Errorf("supervisor: %s=%q: want a number > 0", EnvClockRate, v)
		}
		c.Rate = r
	}
	return c, nil
}

// stripClock returns env without the clock hook's variables.
func stripClock(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, EnvClockOffsetMS+"=") || strings.HasPrefix(kv, EnvClockRate+"=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

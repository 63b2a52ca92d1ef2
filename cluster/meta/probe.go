package meta

import "time"

// The conflict probe's bounds (seed: a member answering with a conflict
// before it accepted anything from the current leader "is held only until a
// probe of that member alone answers, or gives up after 200 ms and a second
// try of up to a second").
const (
	ProbeFirstTry  = 200 * time.Millisecond
	ProbeSecondTry = time.Second
)

// ProbeAnswer is what the probe of a conflicting member got back: Answered
// false while no answer came; Level the metadata level it reported.
type ProbeAnswer struct {
	Answered bool
	Level    Level
}

// ProbeStep is Holds.Conflict's decision: the hold action and, while the
// probe is still waiting, which try it is on (1 or 2; the caller sends the
// second try when Try first reads 2).
type ProbeStep struct {
	Action HoldAction
	Try    int
}

// Conflict decides for a member that answered the leader with a conflict
// before accepting anything from it (an empty member does), with the probe
// started at startedMs and nowMs now (Unix ms): held from the first call;
// released when the probe answers at or above floor, or when both tries
// (ProbeFirstTry, then ProbeSecondTry) got no answer; held on evidence (as
// Observe) when it answers below floor. A member already held on evidence
// stays held whatever the probe says below the floor.
func (h *Holds) Conflict(member string, floor Level, startedMs, nowMs int64, ans ProbeAnswer) ProbeStep {
	start := h.hold(member)
	keep := HoldKeep
	if start {
		keep = HoldStart
	}
	if ans.Answered {
		if ans.Level < floor {
			return ProbeStep{Action: keep}
		}
		delete(h.held, member)
		return ProbeStep{Action: HoldRelease}
	}
	switch elapsed := nowMs - startedMs; {
	case elapsed < ProbeFirstTry.Milliseconds():
		return ProbeStep{Action: keep, Try: 1}
	case elapsed < (ProbeFirstTry + ProbeSecondTry).Milliseconds():
		return ProbeStep{Action: keep, Try: 2}
	}
	delete(h.held, member)
	return ProbeStep{Action: HoldRelease}
}

// hold marks member held and reports whether it was not before.
func (h *Holds) hold(member string) bool {
	if h.held[member] {
		return false
	}
	if h.held == nil {
		h.held = map[string]bool{}
	}
	h.held[member] = true
	return true
}

package meta

import (
	"slices"
	"strconv"
	"time"
)

// AutoFinalizeWindow is how long after the first registration the new-cluster
// rule keeps retrying while a control-plane member is still starting (seed,
// "A new cluster starts with them finalized": "for up to ten minutes").
const AutoFinalizeWindow = 10 * time.Minute

// AutoAction is AutoFinalizePlan's decision.
type AutoAction int

// The decisions.
const (
	// AutoIdle: no broker has registered yet; nothing to do.
	AutoIdle AutoAction = iota
	// AutoDone: the cluster is not new, or every feature the rule would
	// finalize is enabled or cannot pass the checks; stop.
	AutoDone
	// AutoPropose: propose Commands, in order, now.
	AutoPropose
	// AutoWait: a member is still starting (not reported, or below this
	// release); ask again later (RetryAtMs).
	AutoWait
	// AutoGiveUp: ten minutes passed while a member was still starting: log
	// a warning once; the features are finalized with the runbook.
	AutoGiveUp
)

// String gives the decision's name.
func (a AutoAction) String() string {
	if a < AutoIdle || a > AutoGiveUp {
		return "AutoAction(" + strconv.Itoa(int(a)) + ")"
	}
	return [...]string{"idle", "done", "propose", "wait", "give-up"}[a]
}

// AutoStep is one decision of the new-cluster rule: the action, the finalize
// commands to propose (AutoPropose), the members still starting (AutoWait,
// AutoGiveUp) and when to ask again (AutoWait, Unix ms).
type AutoStep struct {
	Action    AutoAction
	Commands  []FinalizeFeature
	Starting  []string
	RetryAtMs int64
}

// AutoRetryInterval is how often AutoWait asks to be retried.
const AutoRetryInterval = time.Second

// AutoFinalizePlan is the pure decision behind the new-cluster rule (seed,
// "A new cluster starts with them finalized"), run by the leader after each
// registration and on a timer, with nowMs the leader's wall clock (Unix ms)
// and voters the Raft configuration's member ids. It finalizes, in
// FeatureOrder, every feature a live or draining broker reports except
// publisher_principal, through CheckFinalize's checks (a feature some broker
// does not report stays off, along with the features that need it), only
// while IsNewCluster and once every voter has reported a level at or above
// BuildMaxLevel ("only once every member runs this release"); until then it
// waits, for up to AutoFinalizeWindow after the first registration, then
// gives up.
func AutoFinalizePlan(s *State, voters []string, nowMs int64, liveness time.Duration) AutoStep {
	if s.meta.FirstRegistrationMs == 0 {
		return AutoStep{Action: AutoIdle}
	}
	cmds := autoCandidates(s, nowMs, liveness)
	if !IsNewCluster(s) || len(cmds) == 0 {
		return AutoStep{Action: AutoDone}
	}
	var starting []string
	for _, v := range slices.Sorted(slices.Values(voters)) {
		if m, ok := s.members.get(v); !ok || m.Level < BuildMaxLevel {
			starting = append(starting, v)
		}
	}
	if len(starting) == 0 {
		return AutoStep{Action: AutoPropose, Commands: cmds}
	}
	if nowMs-s.meta.FirstRegistrationMs >= AutoFinalizeWindow.Milliseconds() {
		return AutoStep{Action: AutoGiveUp, Starting: starting}
	}
	return AutoStep{Action: AutoWait, Starting: starting, RetryAtMs: nowMs + AutoRetryInterval.Milliseconds()}
}

// autoCandidates gives the finalize commands that would pass, in order,
// each counting the ones before it as enabled.
func autoCandidates(s *State, nowMs int64, liveness time.Duration) []FinalizeFeature {
	reported := map[string]bool{}
	for _, b := range s.brokers.values() {
		if BrokerState(b, nowMs, liveness) != "down" {
			for _, f := range b.Features {
				reported[f] = true
			}
		}
	}
	planned := map[string]bool{}
	var out []FinalizeFeature
	for _, f := range FeatureOrder {
		if f == FeaturePublisherPrincipal || !reported[f] || s.IsEnabled(f) {
			continue
		}
		if len(LackingBrokers(s, f, nowMs, liveness)) > 0 {
			continue
		}
		ok := true
		for _, p := range featurePrerequisites[f] {
			ok = ok && (s.IsEnabled(p) || planned[p])
		}
		if !ok {
			continue
		}
		planned[f] = true
		out = append(out, FinalizeFeature{Feature: f, Auto: true, AtMs: nowMs})
	}
	return out
}

package forward

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"felix/core/cache"
	"felix/internal/testseed"
	"felix/proto"
)

// TestMachineRandomOutcomes drives the retry machine with random outcomes (seeded:
// FELIX_TEST_SEED replays one, FELIX_SIM_SEEDS widens the loop) and checks, at every step,
// the seed's rules: it ends within the budget with exactly one terminal action; it acks
// only on the owner's Ok in the request's shape; it never re-sends a publish, a Put or a
// CounterAdd after an unknown outcome, and never reports failed after any unknown outcome;
// it never follows a redirect to a (broker, generation) already tried; it never sends an
// owner a kind that owner answered UnsupportedKind, nor a fallback kind unless that owner
// refused the kind it falls back from.
func TestMachineRandomOutcomes(t *testing.T) {
	for _, seed := range testseed.Seeds(t, 1, 3000) {
		rng := rand.New(rand.NewPCG(seed, 0xf0))
		if msg := randomRun(rng); msg != "" {
			t.Fatalf("seed %d: %s\n%s", seed, msg, testseed.Replay(t, seed))
		}
	}
}

var randomRequests = []Request{
	{Kind: proto.KindAuthorizedForwardPublish}, {Kind: proto.KindIdempotentForwardPublish},
	{Kind: proto.KindForwardPublish}, {Kind: proto.KindForwardCacheOp, Op: proto.CacheOpGet},
	{Kind: proto.KindAuthorizedForwardCacheOp, Op: proto.CacheOpPut},
	{Kind: proto.KindAuthorizedForwardCacheOp, Op: proto.CacheOpGet},
	{Kind: proto.KindAuthorizedForwardCacheOp, Op: proto.CacheOpDelete},
	{Kind: proto.KindAuthorizedForwardCacheOp, Op: proto.CacheOpCounterAdd},
	{Kind: proto.KindAuthorizedForwardCacheOp, Op: proto.CacheOpCounterGet},
}

var randomNodes = []string{"a", "b", "c", "d", "B"}

var randomKinds = []proto.Kind{proto.KindForwardPublish, proto.KindAuthorizedForwardPublish,
	proto.KindIdempotentForwardPublish, proto.KindForwardCacheOp, proto.KindAuthorizedForwardCacheOp}

// randomEvent is one random outcome of an attempt sent as kind.
func randomEvent(rng *rand.Rand, kind proto.Kind) Event {
	ev := Event{Outcome: Outcome(1 + rng.IntN(int(OutOther)))}
	switch ev.Outcome {
	case OutNotLeader:
		ev.Owner, ev.Generation = randomNodes[rng.IntN(len(randomNodes))], uint64(rng.IntN(4))
		if rng.IntN(20) == 0 {
			ev.Owner = ""
		}
	case OutPublishError, OutCacheError:
		ev.Code = proto.InternalCode(1 + rng.IntN(12))
	case OutUnsupportedKind:
		ev.RefusedKind = kind
		if rng.IntN(5) == 0 {
			ev.RefusedKind = randomKinds[rng.IntN(len(randomKinds))]
		}
	case OutPublishOk, OutDuplicate:
		ev.FirstOffset = rng.Uint64N(1000)
		ev.LastOffset = ev.FirstOffset + rng.Uint64N(10)
	case OutCacheOk:
		ev.Present, ev.Value = rng.IntN(2) == 0, []byte{byte(rng.IntN(256))}
	}
	return ev
}

// runState is what the checker remembers of one run.
type runState struct {
	req     Request
	budget  int
	tried   map[target]bool
	refused map[owned]bool // (owner, kind) answered UnsupportedKind
	unknown bool           // some attempt's outcome was unknown
}

// randomRun runs one random request to its end and returns the first broken rule, or "".
func randomRun(rng *rand.Rand) string {
	req := randomRequests[rng.IntN(len(randomRequests))]
	opts := Options{Attempts: rng.IntN(MaxAttempts + 1)}
	st := &runState{req: req, budget: opts.Attempts, tried: map[target]bool{}, refused: map[owned]bool{}}
	if st.budget == 0 {
		st.budget = DefaultAttempts
	}
	m, act, err := NewMachine(req, randomNodes[rng.IntN(len(randomNodes))], uint64(rng.IntN(4)), opts)
	if err != nil {
		return "NewMachine: " + err.Error()
	}
	for steps := 0; ; steps++ {
		if msg := st.checkSend(act, m); msg != "" {
			return msg
		}
		ev := randomEvent(rng, act.Kind)
		next, err := m.Step(ev)
		if err != nil {
			return "Step before the end: " + err.Error()
		}
		if msg := st.checkStep(act, ev, next); msg != "" {
			return msg + " (event " + ev.Outcome.String() + ")"
		}
		if next.Step != Send {
			return st.checkEnd(m, next)
		}
		if steps > MaxAttempts {
			return "no terminal action within MaxAttempts steps"
		}
		act = next
	}
}

// checkSend checks a Send before its outcome: within the budget, not a refused kind.
func (st *runState) checkSend(act Action, m *Machine) string {
	node := strings.ToLower(act.To)
	switch {
	case act.Step != Send:
		return "non-terminal action is " + act.Step.String()
	case act.Attempt > st.budget || m.Attempts() > st.budget:
		return "sent beyond the attempt budget"
	case st.refused[owned{node, act.Kind}]:
		return "sent " + act.Kind.String() + " again to an owner that answered UnsupportedKind for it"
	case act.Backoff < 0 || act.Backoff > DefaultMaxBackoff:
		return "backoff out of bounds"
	case act.Kind != st.req.Kind && !st.fellBack(node, act.Kind):
		return "sent " + act.Kind.String() + " to an owner that never refused the kind it falls back from"
	}
	st.tried[target{node, act.Generation}] = true
	return ""
}

// fellBack reports whether node answered UnsupportedKind for the kind that falls back to k.
func (st *runState) fellBack(node string, k proto.Kind) bool {
	for _, from := range randomKinds {
		if next, ok := fallback(from); ok && next == k && st.refused[owned{node, from}] {
			return true
		}
	}
	return false
}

// checkStep checks the action that followed ev, the outcome of the attempt sent.
func (st *runState) checkStep(sent Action, ev Event, next Action) string {
	publish := publishKind(st.req.Kind)
	okShape := (ev.Outcome == OutPublishOk && publish) || (ev.Outcome == OutCacheOk && !publish) ||
		(ev.Outcome == OutDuplicate && sent.Kind == proto.KindIdempotentForwardPublish)
	if (next.Step == Ack) != okShape {
		return "ack is not exactly the owner's Ok in the request's shape"
	}
	if next.Step == Ack && (next.FirstOffset != ev.FirstOffset || next.LastOffset != ev.LastOffset ||
		next.Present != ev.Present || string(next.Value) != string(ev.Value)) {
		return "ack does not carry the owner's answer"
	}
	if ev.Outcome == OutDropped || ev.Outcome == OutTimedOut {
		resendable := !publish && cache.SafeToResend(cache.OpKind(st.req.Op)) && !st.unknown
		if next.Step == Send && (!resendable || next.To != sent.To || next.Generation != sent.Generation) {
			return "re-sent after an unknown outcome"
		}
		if next.Step != Send && next.Step != Indeterminate {
			return "an unknown outcome ended as " + next.Step.String()
		}
		st.unknown = true
	}
	if st.unknown && next.Step == Fail {
		return "reported failed after an unknown outcome"
	}
	if ev.Outcome == OutNotLeader && next.Step == Send {
		if next.To != ev.Owner || next.Generation != ev.Generation {
			return "a redirect not to the owner named"
		}
		if st.tried[target{strings.ToLower(ev.Owner), ev.Generation}] {
			return "followed a redirect to a (broker, generation) already tried"
		}
	}
	if ev.Outcome == OutUnsupportedKind && ev.RefusedKind == sent.Kind {
		st.refused[owned{strings.ToLower(sent.To), sent.Kind}] = true
	}
	refusedFinal := (ev.Outcome == OutPublishError || ev.Outcome == OutCacheError) && !ev.Code.Retryable()
	if refusedFinal && next.Step == Send {
		return "retried a refusal that is not retryable"
	}
	return ""
}

// checkEnd checks the terminal action: one, repeated with ErrFinished.
func (st *runState) checkEnd(m *Machine, end Action) string {
	if !m.Done() {
		return "terminal action but not Done"
	}
	again, err := m.Step(Event{Outcome: OutPublishOk})
	if !errors.Is(err, ErrFinished) || again.Step != end.Step || again.Reason != end.Reason {
		return "a second terminal action"
	}
	if end.Step == Indeterminate && end.ClientCode() != "indeterminate" ||
		end.Step == Ack && end.ClientCode() != "" {
		return "client code does not match the step"
	}
	return ""
}

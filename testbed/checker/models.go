package checker

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"felix/testbed/history"
)

// linInput is the input porcupine sees for one operation of one object.
// Kind is the history kind; KindPublish stands for the write of one payload
// at one stream offset.
type linInput struct {
	kind  history.Kind
	value string // put value, catalog spec, payload written
	delta int64  // counter-add
	index int    // Op.Index, for descriptions
}

// linOutput is the answer; known is false for an info operation (open-ended
// in time, any answer accepted).
type linOutput struct {
	known      bool
	found      bool
	value      string
	valueKnown bool // false: the value is not compared (a catalog spec "", a delete's old value not recorded)
	sum        int64
}

// linState is the state of one object: a register (cache key, catalog
// entry, stream offset) or a counter. Comparable, so porcupine's default
// equality works.
type linState struct {
	present bool
	value   string
	sum     int64
}

// linModel is the one sequential specification of every object: Step
// dispatches on the input's kind, so one model (and one visualization)
// covers caches, counters, catalog entries and stream offsets.
func linModel() porcupine.Model {
	return porcupine.Model{
		Init: func() interface{} { return linState{} },
		Step: func(state, input, output interface{}) (bool, interface{}) {
			return linStep(state.(linState), input.(linInput), output.(linOutput))
		},
		DescribeOperation: func(input, output interface{}) string {
			return describeOp(input.(linInput), output.(linOutput))
		},
		DescribeState:             func(state interface{}) string { return describeState(state.(linState)) },
		DescribeOperationMetadata: func(info interface{}) string { return fmt.Sprintf("history op %v", info) },
	}
}

// readMatches: a read's found and value agree with s.
func readMatches(s linState, out linOutput) bool {
	if out.found != s.present {
		return false
	}
	return !out.found || !out.valueKnown || out.value == s.value
}

func linStep(s linState, in linInput, out linOutput) (bool, linState) {
	switch in.kind {
	case history.KindCachePut:
		return true, linState{present: true, value: in.value}
	case history.KindPublish: // one record at one offset: written once
		if s.present && s.value != in.value {
			return false, s
		}
		return true, linState{present: true, value: in.value}
	case history.KindCacheGet, history.KindStreamRead, history.KindCatalogGet:
		return readMatches(s, out), s
	case history.KindCacheDelete, history.KindCatalogDelete:
		return !out.known || readMatches(s, out), linState{}
	case history.KindCatalogCreate:
		if out.known && out.found != s.present { // found: it already existed
			return false, s
		}
		if s.present {
			return true, s
		}
		return true, linState{present: true, value: in.value}
	case history.KindCounterAdd:
		sum := s.sum + in.delta // an absent counter has sum 0
		return !out.known || out.sum == sum, linState{present: true, sum: sum}
	case history.KindCounterGet:
		return out.found == s.present && (!out.found || out.sum == s.sum), s
	}
	return false, s
}

func describeState(s linState) string {
	switch {
	case !s.present:
		return "absent"
	case s.value != "":
		return fmt.Sprintf("%q", s.value)
	}
	return fmt.Sprintf("present (sum %d)", s.sum)
}

// describeOp renders one operation for porcupine's visualization.
func describeOp(in linInput, out linOutput) string {
	answer := "?"
	if out.known {
		answer = describeAnswer(in.kind, out)
	}
	switch in.kind {
	case history.KindCachePut:
		return fmt.Sprintf("#%d put(%q)", in.index, in.value)
	case history.KindPublish:
		return fmt.Sprintf("#%d write(%q)", in.index, in.value)
	case history.KindCatalogCreate:
		return fmt.Sprintf("#%d create(%q) -> %s", in.index, in.value, answer)
	case history.KindCounterAdd:
		return fmt.Sprintf("#%d add(%+d) -> %s", in.index, in.delta, answer)
	}
	return fmt.Sprintf("#%d %s() -> %s", in.index, in.kind, answer)
}

func describeAnswer(kind history.Kind, out linOutput) string {
	switch {
	case kind == history.KindCatalogCreate && out.found:
		return "exists"
	case kind == history.KindCatalogCreate:
		return "created"
	case kind == history.KindCounterAdd:
		return fmt.Sprint(out.sum)
	case !out.found:
		return "absent"
	case kind == history.KindCounterGet:
		return fmt.Sprint(out.sum)
	case !out.valueKnown:
		return "found"
	}
	return fmt.Sprintf("%q", out.value)
}

package checker

import (
	"fmt"
	"io"

	"felix/testbed/history"
)

// Options configures CheckAll.
type Options struct {
	Linear LinearOptions // the linearizability checker's options
}

// CheckResult is the outcome of one checker on one history.
type CheckResult struct {
	Name     string    // "streams", "replicas", "groups" or "linearizability"
	Findings []Finding // sorted; empty when the checker passed
}

// Report is the outcome of every checker on one history.
type Report struct {
	Checks        []CheckResult // in the order streams, replicas, groups, linearizability
	Unknown       []string      // linearizability objects whose search timed out (not failures)
	Visualization string        // porcupine's HTML file, when one was written
}

// Checker names, in Report order.
const (
	CheckerStreams  = "streams"
	CheckerReplicas = "replicas"
	CheckerGroups   = "groups"
	CheckerLinear   = "linearizability"
)

// CheckAll runs every checker on h. Errors: only the linearizability
// checker's (writing its visualization); the report is complete anyway.
func CheckAll(h *history.History, opts Options) (Report, error) {
	lin, err := CheckLinearizable(h, opts.Linear)
	return Report{
		Checks: []CheckResult{
			{Name: CheckerStreams, Findings: CheckStreams(h)},
			{Name: CheckerReplicas, Findings: CheckReplicas(h)},
			{Name: CheckerGroups, Findings: CheckGroups(h)},
			{Name: CheckerLinear, Findings: lin.Findings},
		},
		Unknown:       lin.Unknown,
		Visualization: lin.Visualization,
	}, err
}

// Findings returns every finding of the report, checker by checker.
func (r Report) Findings() []Finding {
	var out []Finding
	for _, c := range r.Checks {
		out = append(out, c.Findings...)
	}
	return out
}

// Has reports whether some finding of the report is of anomaly a.
func (r Report) Has(a Anomaly) bool {
	for _, f := range r.Findings() {
		if f.Anomaly == a {
			return true
		}
	}
	return false
}

// Print writes the report: one line per finding, one summary line per
// checker ("checker NAME: ok" or "checker NAME: N findings"), a line per
// timed-out object, and returns how many checkers passed and failed.
func (r Report) Print(w io.Writer) (passed, failed int) {
	for _, c := range r.Checks {
		for _, f := range c.Findings {
			fmt.Fprintf(w, "  %s\n", f)
		}
		if len(c.Findings) == 0 {
			fmt.Fprintf(w, "checker %s: ok\n", c.Name)
			passed++
			continue
		}
		fmt.Fprintf(w, "checker %s: %d findings\n", c.Name, len(c.Findings))
		failed++
	}
	for _, u := range r.Unknown {
		fmt.Fprintf(w, "linearizability search timed out (not a failure): %s\n", u)
	}
	return passed, failed
}

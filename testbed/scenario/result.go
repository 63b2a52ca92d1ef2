package scenario

import (
	"fmt"
	"io"
	"strings"
	"time"

	"felix/testbed/checker"
)

// Verdict is a result row's judgement.
type Verdict string

// The verdicts of a row.
const (
	Note Verdict = ""     // informational: a figure, not a check
	Pass Verdict = "ok"   // the check held
	Fail Verdict = "FAIL" // the check failed: the run fails
)

// Row is one line of a run's table: what was checked, the figure, the verdict.
type Row struct {
	Check   string  // what was checked or measured, one line
	Result  string  // the figure found, one line
	Verdict Verdict // Note, Pass or Fail
}

// Result is the outcome of one scenario run.
type Result struct {
	Scenario string        // the scenario's name
	Seed     uint64        // the run's seed
	Dir      string        // the run's work directory
	Sizes    Sizes         // the sizes the run used
	Elapsed  time.Duration // wall time of the run
	Rows     []Row         // the table, in the order the scenario checked
	// Report is the checkers' report on the run's history (zero when the run ended before
	// checking); its findings also appear, counted, in the checker rows.
	Report checker.Report
}

// Note adds an informational row.
func (r *Result) Note(check, format string, args ...any) {
	r.Rows = append(r.Rows, Row{Check: check, Result: fmt.Sprintf(format, args...)})
}

// Check adds a row whose verdict is Pass when ok holds, else Fail.
func (r *Result) Check(check string, ok bool, format string, args ...any) {
	v := Fail
	if ok {
		v = Pass
	}
	r.Rows = append(r.Rows, Row{Check: check, Result: fmt.Sprintf(format, args...), Verdict: v})
}

// Counts returns how many rows passed and failed (informational rows count in neither).
func (r Result) Counts() (passed, failed int) {
	for _, row := range r.Rows {
		switch row.Verdict {
		case Pass:
			passed++
		case Fail:
			failed++
		}
	}
	return passed, failed
}

// Passed reports whether the run has no failed row and at least one passed one.
func (r Result) Passed() bool {
	p, f := r.Counts()
	return f == 0 && p > 0
}

// Failures returns the failed rows as "check: result" lines.
func (r Result) Failures() []string {
	var out []string
	for _, row := range r.Rows {
		if row.Verdict == Fail {
			out = append(out, row.Check+": "+row.Result)
		}
	}
	return out
}

// maxFindingsPrinted bounds the finding lines Print writes (the history keeps them all).
const maxFindingsPrinted = 40

// Print writes the run's report: a header line (scenario, seed, sizes, wall time, work
// dir), the table as markdown (| check | result | verdict |), then up to 40 checker
// findings, one per line. It does not write the final "N passed, M failed" line: the
// command that ran the scenarios does.
func (r Result) Print(w io.Writer) {
	fmt.Fprintf(w, "scenario %s seed=%d ops=%d kills=%d duration=%s: %s in %s\n", r.Scenario, r.Seed,
		r.Sizes.Ops, r.Sizes.Kills, r.Sizes.Duration, verdictWord(r.Passed()), r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "work dir: %s\n\n", r.Dir)
	fmt.Fprintln(w, "| check | result | verdict |")
	fmt.Fprintln(w, "| --- | --- | --- |")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %s | %s |\n", cell(row.Check), cell(row.Result), row.Verdict)
	}
	fs := r.Report.Findings()
	if len(fs) > 0 {
		fmt.Fprintf(w, "\nfindings (%d):\n", len(fs))
		for i, f := range fs {
			if i == maxFindingsPrinted {
				fmt.Fprintf(w, "... %d more (felix-chaos check %s)\n", len(fs)-i, r.Dir+"/history.jsonl")
				break
			}
			fmt.Fprintln(w, f.String())
		}
	}
	if r.Report.Visualization != "" {
		fmt.Fprintf(w, "linearizability visualization: %s\n", r.Report.Visualization)
	}
	fmt.Fprintln(w)
}

// ReplayLine is the command that runs r again with its seed and sizes.
func (r Result) ReplayLine() string {
	return fmt.Sprintf("replay: go run ./cmd/felix-chaos run --scenario %s --seed %d --ops %d --kills %d --duration %s",
		r.Scenario, r.Seed, r.Sizes.Ops, r.Sizes.Kills, r.Sizes.Duration)
}

func verdictWord(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

// cell keeps a table cell on one line and its pipes escaped.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", `\|`)
}

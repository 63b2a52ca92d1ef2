package checker

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"felix/testbed/history"
)

// CaseResult is the outcome of one selftest case.
type CaseResult struct {
	Case    Case
	Passed  bool   // the anomaly was found in the planted history and nothing in the clean twin
	Planted Report // every checker on the planted history
	Clean   Report // every checker on the clean twin
}

// Line renders the result as the selftest prints it:
// "PASS name: planted <first matching finding>; clean twin: no findings".
func (r CaseResult) Line() string {
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	planted := fmt.Sprintf("planted %s not found", r.Case.Anomaly)
	for _, f := range r.Planted.Findings() {
		if f.Anomaly == r.Case.Anomaly {
			planted = "planted: " + f.String()
			break
		}
	}
	clean := "clean twin: no findings"
	if fs := r.Clean.Findings(); len(fs) > 0 {
		clean = fmt.Sprintf("clean twin: %d findings, first %s", len(fs), fs[0])
	}
	return fmt.Sprintf("%s %s: %s; %s", verdict, r.Case.Name, planted, clean)
}

// RunCase builds both histories of c, passes each through the JSON-lines
// format (history.Write, then history.Load) and runs every checker on them.
// vizPath, when not empty, is where the planted history's linearizability
// visualization goes. Errors: a history that does not survive the round
// trip, or a visualization that cannot be written.
func RunCase(c Case, vizPath string) (CaseResult, error) {
	res := CaseResult{Case: c}
	var err error
	if res.Planted, err = checkRoundTrip(c.Build(true), vizPath); err != nil {
		return res, fmt.Errorf("%s, planted: %w", c.Name, err)
	}
	if res.Clean, err = checkRoundTrip(c.Build(false), ""); err != nil {
		return res, fmt.Errorf("%s, clean twin: %w", c.Name, err)
	}
	res.Passed = res.Planted.Has(c.Anomaly) && len(res.Clean.Findings()) == 0
	return res, nil
}

func checkRoundTrip(h *history.History, vizPath string) (Report, error) {
	var buf bytes.Buffer
	if err := history.Write(&buf, h); err != nil {
		return Report{}, err
	}
	loaded, err := history.Load(&buf)
	if err != nil {
		return Report{}, err
	}
	return CheckAll(loaded, Options{Linear: LinearOptions{VisualizationPath: vizPath}})
}

// RunSelfTest runs every case of SelfTestCases and writes one line per case
// (CaseResult.Line), then the final line "N passed, M failed". A case whose
// run errs counts as failed, its line saying why. vizDir, when not empty, is
// a directory (which must exist) for the planted histories' visualizations,
// one file per case ("<case-name>.html").
func RunSelfTest(w io.Writer, vizDir string) (passed, failed int) {
	for _, c := range SelfTestCases() {
		vizPath := ""
		if vizDir != "" {
			vizPath = filepath.Join(vizDir, strings.ReplaceAll(c.Name, " ", "-")+".html")
		}
		res, err := RunCase(c, vizPath)
		switch {
		case err != nil:
			fmt.Fprintf(w, "FAIL %s: %v\n", c.Name, err)
			failed++
		case res.Passed:
			fmt.Fprintln(w, res.Line())
			passed++
		default:
			fmt.Fprintln(w, res.Line())
			failed++
		}
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", passed, failed)
	return passed, failed
}

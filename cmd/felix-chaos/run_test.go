package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"felix/testbed/checker"
	"felix/testbed/history"
	"felix/testbed/scenario"
)

// finalLine is the shape of the last line of run and soak.
var finalLine = regexp.MustCompile(`^(\d+) passed, (\d+) failed$`)

// The CI size of single-node-kill: what `make chaos-ci` runs.
const (
	ciKills = "20"
	ciOps   = "2000"
)

// TestRunSingleNodeKillCI runs the CI-sized single-node-kill through the command (real
// broker processes, 20 SIGKILLs while operations are in flight, every checker on the
// history) and requires "N passed, 0 failed". Then it shows the checks have teeth on the
// run's own history: one acknowledged publish removed from every read is a lost write,
// and one Get answered with a value nobody wrote is a non-linearizable cache key.
func TestRunSingleNodeKillCI(t *testing.T) {
	if testing.Short() {
		t.Skip("single-node-kill: builds the binaries and SIGKILLs a broker 20 times; skipped with -short (make chaos-ci)")
	}
	dir := filepath.Join(t.TempDir(), "work")
	began := time.Now()
	code, out, errw := runCLI("run", "--scenario", scenario.SingleNodeKill, "--kills", ciKills, "--ops", ciOps, "--dir", dir)
	t.Logf("felix-chaos run in %s (exit %d):\n%s", time.Since(began).Round(time.Millisecond), code, out)
	m := finalLine.FindStringSubmatch(lastLine(out))
	if code != exitOK || errw != "" || m == nil || m[2] != "0" || m[1] == "0" {
		t.Fatalf("exit %d, stderr %q, final line %q", code, errw, lastLine(out))
	}
	if !strings.Contains(out, "| SIGKILLs with operations in flight (counted; want "+ciKills+") / with none (not counted) | "+ciKills+" / ") {
		t.Errorf("the report does not show %s counted kills", ciKills)
	}
	h, err := history.LoadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("planted lost write is found", func(t *testing.T) { plantLostWrite(t, h) })
	t.Run("planted stale read is found", func(t *testing.T) { plantStaleRead(t, h) })
}

// clone deep-copies the ops of h (the plants change records and outputs).
func clone(t *testing.T, h *history.History) *history.History {
	t.Helper()
	path := writeHistory(t, h)
	c, err := history.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// plantLostWrite removes the payload of one ok publish (one every read saw, below the
// final reads' end) from every read of the run, and requires `felix-chaos check` to
// report a lost-write naming that publish and its offset.
func plantLostWrite(t *testing.T, orig *history.History) {
	h := clone(t, orig)
	var pub *history.Op // the first ok publish, at an offset above 0, that some read saw
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Kind == history.KindPublish && op.Outcome == history.OK && op.Out.Offsets[0] > 0 && readCount(h, op.In.Payloads[0]) > 0 {
			pub = op
			break
		}
	}
	if pub == nil {
		t.Fatal("no ok publish in the history")
	}
	payload, shard, off := pub.In.Payloads[0].String(), pub.Out.Shard, pub.Out.Offsets[0]
	removed := 0
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Kind != history.KindSubscribeRead {
			continue
		}
		kept := op.Out.Records[:0]
		for _, r := range op.Out.Records {
			if r.Payload.String() == payload {
				removed++
				continue
			}
			kept = append(kept, r)
		}
		op.Out.Records = kept
	}
	t.Logf("publish #%d (%q, shard %d offset %d): removed from %d reads", pub.Index, payload, shard, off, removed)
	if removed == 0 {
		t.Fatal("the publish was never read: nothing to remove")
	}
	rep, err := checker.CheckAll(h, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range rep.Findings() {
		if f.Anomaly == checker.LostWrite && f.Shard == shard && contains(f.Ops, pub.Index) && containsU(f.Offsets, off) {
			found = true
			t.Logf("found: %s", f)
		}
	}
	if !found {
		t.Fatalf("no lost-write finding for publish #%d; findings: %v", pub.Index, rep.Findings())
	}
	code, out, _ := runCLI("check", "-viz", "-", writeHistory(t, h))
	if code != exitFindings || !strings.Contains(out, "lost-write") {
		t.Fatalf("felix-chaos check: exit %d\n%s", code, out)
	}
}

// plantStaleRead changes the answer of one ok Get that found a value to a value no Put
// wrote, and requires a non-linearizable-cache finding for that key.
func plantStaleRead(t *testing.T, orig *history.History) {
	h := clone(t, orig)
	var get *history.Op
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == history.KindCacheGet && op.Outcome == history.OK && op.Out.Found {
			get = op
			break
		}
	}
	if get == nil {
		t.Fatal("no ok Get that found a value")
	}
	get.Out.Value = history.Bytes("never-written")
	rep, err := checker.CheckAll(h, checker.Options{Linear: checker.LinearOptions{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Has(checker.NonLinearCache) {
		t.Fatalf("Get #%d of %q answered a value nobody wrote: no finding (%v)", get.Index, get.In.Key, rep.Findings())
	}
	t.Logf("Get #%d of key %q: %v", get.Index, get.In.Key, rep.Findings())
}

// readCount is how many read records of h hold payload p.
func readCount(h *history.History, p history.Bytes) int {
	n := 0
	for _, op := range h.Ops {
		for _, r := range op.Out.Records {
			if r.Payload.String() == p.String() {
				n++
			}
		}
	}
	return n
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func containsU(xs []uint64, x uint64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// alwaysFails is a scenario registered by this test file only: it checks one thing and
// fails it, so run's and soak's exit codes and final lines can be seen on a failure.
const alwaysFails = "test-always-fails"

func init() {
	scenario.MustRegister(scenario.Scenario{Name: alwaysFails, Description: "a test scenario with one failed check",
		Defaults: scenario.Sizes{Ops: 1, Duration: time.Minute},
		Run: func(ctx context.Context, env *scenario.Env) (scenario.Result, error) {
			var r scenario.Result
			r.Check("something that holds", true, "yes")
			r.Check("something that does not", false, "seed %d", env.Seed)
			return r, nil
		}})
}

func TestRunFailedScenarioExitsOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	code, out, _ := runCLI("run", "--scenario", alwaysFails, "--seed", "42", "--dir", dir)
	if code != exitFindings || lastLine(out) != "1 passed, 1 failed" {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"seed 42 (--seed)", "| something that does not | seed 42 | FAIL |",
		"replay: go run ./cmd/felix-chaos run --scenario " + alwaysFails + " --seed 42"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunSeedFromEnvironment(t *testing.T) {
	t.Setenv(scenario.SeedEnv, "777")
	code, out, _ := runCLI("run", "--scenario", alwaysFails, "--dir", filepath.Join(t.TempDir(), "w"))
	if code != exitFindings || !strings.Contains(out, "seed 777 ("+scenario.SeedEnv+")") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	t.Setenv(scenario.SeedEnv, "x")
	if code, _, errw := runCLI("run", "--scenario", alwaysFails); code != exitUsage || !strings.Contains(errw, scenario.SeedEnv) {
		t.Fatalf("bad %s: exit %d, %q", scenario.SeedEnv, code, errw)
	}
}

func TestSoakCountsRuns(t *testing.T) {
	code, out, _ := runCLI("soak", "--scenario", alwaysFails, "--duration", "1ms", "--dir", filepath.Join(t.TempDir(), "soak"))
	runs := strings.Count(out, "| something that does not | seed ")
	if code != exitFindings || runs == 0 || lastLine(out) != fmt.Sprintf("0 passed, %d failed", runs) || !strings.Contains(out, "run 1 seed=") {
		t.Fatalf("exit %d, %d failed runs reported\n%s", code, runs, out)
	}
}

func TestRunListAndUsage(t *testing.T) {
	code, out, _ := runCLI("run", "--list")
	if code != exitOK || !strings.Contains(out, scenario.SingleNodeKill+"  ") || !strings.Contains(out, "ops=4000 kills=20") {
		t.Fatalf("run --list: exit %d\n%s", code, out)
	}
	if n := strings.Count(out, "\n"); n != len(scenario.All()) {
		t.Errorf("run --list: %d lines for %d scenarios", n, len(scenario.All()))
	}
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run"}, {"run", "--scenario", "nope"}, {"run", "--scenario", alwaysFails, "extra"},
		{"run", "--scenario", alwaysFails, "--dir", nonEmpty}, {"soak"}, {"soak", "--duration", "1s", "--scenario", "nope"}} {
		if code, _, errw := runCLI(args...); code != exitUsage || errw == "" {
			t.Errorf("%q: exit %d, stderr %q; want %d and a message", args, code, errw, exitUsage)
		}
	}
	if _, out, _ := runCLI("help"); !strings.Contains(out, "run ") || !strings.Contains(out, "soak ") {
		t.Errorf("help lacks run and soak:\n%s", out)
	}
}

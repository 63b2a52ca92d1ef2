package testseed

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSeedTakesTheEnvironmentOverTheDefault(t *testing.T) {
	t.Setenv(Env, "")
	if got := Seed(t, 7); got != 7 {
		t.Fatalf("unset: seed %d, want the default 7", got)
	}
	t.Setenv(Env, "18446744073709551615")
	if got := Seed(t, 7); got != 18446744073709551615 {
		t.Fatalf("set: seed %d", got)
	}
	if got := Replay(t, 42); got != "replay: FELIX_TEST_SEED=42 go test -run '^TestSeedTakesTheEnvironmentOverTheDefault$' ." {
		t.Fatal(got)
	}
}

func TestRunReplaysOnlyTheSeedAsked(t *testing.T) {
	var ran []uint64
	t.Setenv(Env, "")
	Run(t, 10, 3, func(t *testing.T, seed uint64) { ran = append(ran, seed) })
	t.Setenv(Env, "11")
	Run(t, 10, 3, func(t *testing.T, seed uint64) { ran = append(ran, seed) })
	if !slices.Equal(ran, []uint64{10, 11, 12, 11}) {
		t.Fatalf("ran seeds %v", ran)
	}
}

// recorder is a testing.TB that records what Seed asks of it.
type recorder struct {
	testing.TB
	failed   bool
	logs     []string
	cleanups []func()
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(f string, a ...any) {
	r.failed = true
	r.logs = append(r.logs, fmt.Sprintf(f, a...))
}
func (r *recorder) Logf(f string, a ...any) { r.logs = append(r.logs, fmt.Sprintf(f, a...)) }
func (r *recorder) Log(a ...any)            { r.logs = append(r.logs, fmt.Sprint(a...)) }
func (r *recorder) Cleanup(f func())        { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Failed() bool            { return r.failed }
func (r *recorder) Name() string            { return "TestX/seed=99" }
func (r *recorder) has(s string) bool       { return strings.Contains(strings.Join(r.logs, "\n"), s) }
func (r *recorder) fail()                   { r.failed = true }
func (r *recorder) cleanup() {
	slices.Reverse(r.cleanups)
	for _, f := range r.cleanups {
		f()
	}
}

// A failed test's log names the seed to replay; a bad FELIX_TEST_SEED fails the test.
func TestFailureNamesTheReplay(t *testing.T) {
	t.Setenv(Env, "99")
	r := &recorder{TB: t}
	Seed(r, 1)
	r.fail()
	r.cleanup()
	if !r.has("seed FELIX_TEST_SEED=99") || !r.has("replay: FELIX_TEST_SEED=99 go test -run '^TestX$' .") {
		t.Fatalf("logs %q", r.logs)
	}
	t.Setenv(Env, "-3")
	r = &recorder{TB: t}
	Seed(r, 1)
	if !r.failed || !r.has(`FELIX_TEST_SEED="-3" is not a uint64`) {
		t.Fatalf("a bad seed: failed %v, logs %q", r.failed, r.logs)
	}
}

func TestSeedsLoop(t *testing.T) {
	t.Setenv(Env, "")
	t.Setenv(EnvSeeds, "")
	if got := Seeds(t, 10, 3); len(got) != 3 || got[0] != 10 || got[2] != 12 {
		t.Fatalf("Seeds(10, 3) = %v", got)
	}
	t.Setenv(EnvSeeds, "5")
	if got := Seeds(t, 1, 3); len(got) != 5 {
		t.Fatalf("Seeds with %s=5 = %v", EnvSeeds, got)
	}
	t.Setenv(Env, "77")
	if got := Seeds(t, 1, 10); len(got) != 1 || got[0] != 77 {
		t.Fatalf("Seeds with %s=77 = %v, want [77]", Env, got)
	}
}

// Package testseed gives the property and simulation tests their random seeds, so that a
// failure replays: FELIX_TEST_SEED (a uint64) overrides a test's own seed, the seed used
// is always logged, and a failed test logs the line that replays it:
//
//	replay: FELIX_TEST_SEED=12345 go test -run '^TestSimulation$' .
//
// (run from the test's package directory). Seed loops use Run (one subtest per seed) or
// Seeds (FELIX_SIM_SEEDS widens the loop). Only tests import it.
package testseed

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Env is the environment variable that sets the seed.
const Env = "FELIX_TEST_SEED"

// EnvSeeds, when set to a positive int, is how many seeds a seed loop (Seeds) runs
// instead of the test's own budget (a soak: FELIX_SIM_SEEDS=100000).
const EnvSeeds = "FELIX_SIM_SEEDS"

// Seed returns FELIX_TEST_SEED when it is set, else def (a test's fixed seed, or one it
// derived, e.g. from the clock). It logs "seed FELIX_TEST_SEED=<n>" and, if t fails,
// the Replay line. A FELIX_TEST_SEED that is not a uint64 fails t.
func Seed(t testing.TB, def uint64) uint64 {
	t.Helper()
	seed, ok := fromEnv(t)
	if !ok {
		seed = def
	}
	t.Logf("seed %s=%d", Env, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(Replay(t, seed))
		}
	})
	return seed
}

// Run runs fn in one subtest per seed, named seed=<n>: first, first+1, … first+count-1,
// or only FELIX_TEST_SEED when it is set (the replay of one failed subtest). Each subtest
// logs its seed and, if it fails, the line replaying it (Seed).
func Run(t *testing.T, first uint64, count int, fn func(t *testing.T, seed uint64)) {
	t.Helper()
	var seeds []uint64
	if seed, ok := fromEnv(t); ok {
		seeds = []uint64{seed}
	} else {
		for i := range count {
			seeds = append(seeds, first+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { fn(t, Seed(t, seed)) })
	}
}

// Seeds returns the seeds of a seed loop: only FELIX_TEST_SEED when it is set (replaying
// one failure), else n consecutive seeds from first, n being FELIX_SIM_SEEDS when set. It
// logs the range. Malformed variables fail t.
func Seeds(t testing.TB, first uint64, n int) []uint64 {
	t.Helper()
	if s, ok := fromEnv(t); ok {
		t.Logf("replaying %s=%d only", Env, s)
		return []uint64{s}
	}
	if v := os.Getenv(EnvSeeds); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil || m <= 0 {
			t.Fatalf("%s=%q: want a positive int", EnvSeeds, v)
		}
		n = m
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = first + uint64(i)
	}
	t.Logf("seeds %d to %d (%s=N replays one, %s=M runs M)", first, first+uint64(n)-1, Env, EnvSeeds)
	return seeds
}

// Replay returns the command line that reruns seed in t's top-level test, for failure
// messages: "replay: FELIX_TEST_SEED=7 go test -run '^TestX$' .". Run it from the
// test's package directory (or replace "." with its path).
func Replay(t testing.TB, seed uint64) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("replay: %s=%d go test -run '^%s$' .", Env, seed, name)
}

// fromEnv returns FELIX_TEST_SEED and whether it is set (an empty value is unset); a
// value that is not a uint64 fails t.
func fromEnv(t testing.TB) (uint64, bool) {
	t.Helper()
	v := os.Getenv(Env)
	if v == "" {
		return 0, false
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q is not a uint64: %v", Env, v, err)
	}
	return seed, true
}

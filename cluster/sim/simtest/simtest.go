// Package simtest gives tests of the cluster their seeds: FELIX_TEST_SEED
// replays one run, FELIX_SIM_SEEDS widens a seed loop, and every seed a test
// uses is logged with the line that replays it. It reads the environment,
// so it lives outside the pure package felix/cluster/sim.
package simtest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Environment variables read by this package.
const (
	// EnvSeed, when set to a uint64, is the only seed a test runs.
	EnvSeed = "FELIX_TEST_SEED"
	// EnvSeeds, when set to a positive int, is how many seeds a seed loop
	// runs instead of the test's own budget (a soak: FELIX_SIM_SEEDS=100000).
	EnvSeeds = "FELIX_SIM_SEEDS"
)

// Seed returns FELIX_TEST_SEED when it is set, else fallback, and logs it
// as "seed FELIX_TEST_SEED=N". A set but malformed variable fails the test.
func Seed(t testing.TB, fallback uint64) uint64 {
	t.Helper()
	seed := fallback
	if s, ok := envSeed(t); ok {
		seed = s
	}
	t.Logf("seed %s=%d", EnvSeed, seed)
	return seed
}

// Seeds returns the seeds of a seed loop: only FELIX_TEST_SEED when it is
// set (replaying one failure), else n consecutive seeds from first, n being
// FELIX_SIM_SEEDS when set. It logs the range. Malformed variables fail the
// test.
func Seeds(t testing.TB, first uint64, n int) []uint64 {
	t.Helper()
	if s, ok := envSeed(t); ok {
		t.Logf("replaying %s=%d only", EnvSeed, s)
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
	t.Logf("seeds %d to %d (%s=N replays one, %s=M runs M)", first, first+uint64(n)-1, EnvSeed, EnvSeeds)
	return seeds
}

func envSeed(t testing.TB) (uint64, bool) {
	t.Helper()
	v := os.Getenv(EnvSeed)
	if v == "" {
		return 0, false
	}
	s, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: want a uint64", EnvSeed, v)
	}
	return s, true
}

// Replay returns the command line that reruns seed in t's top-level test,
// for failure messages: "replay: FELIX_TEST_SEED=7 go test -run '^TestX$' .".
// Run it from the test's package directory (or replace "." with its path).
func Replay(t testing.TB, seed uint64) string {
	name, _, _ := strings.Cut(t.Name(), "/")
	return fmt.Sprintf("replay: %s=%d go test -run '^%s$' .", EnvSeed, seed, name)
}

package controlplane

import (
	"context"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"felix/testbed/scenario"
)

// binary is the felix-controlplane built once by TestMain.
var binary string

// TestMain builds ./cmd/felix-controlplane once into a temp dir for every test.
func TestMain(m *testing.M) {
	scenario.MainWithCommands("felix-cp-e2e-bin", func(p map[string]string) { binary = p["felix-controlplane"] },
		m.Run, "felix-controlplane")
}

// The knobs of the tests, each an environment variable.
const (
	envKills   = "FELIX_CP_KILLS"   // leader kills of TestLeaderKillLoop (10)
	envSeed    = "FELIX_CP_SEED"    // the workload's seed (random, printed)
	envWrites  = "FELIX_CP_WRITES"  // sequential writes of TestApplyLatency (500)
	envClients = "FELIX_CP_CLIENTS" // concurrent workload clients (4)
	envKeep    = "FELIX_CP_KEEP"    // a directory that receives the history and the logs even on success
)

// envInt reads a positive integer knob, def when unset; a bad value fails the test.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// seed gives the run's seed (FELIX_CP_SEED or random) and logs it, and again when t fails.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := rand.Uint64()
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
	}
	t.Logf("seed %d (replay with %s=%d)", s, envSeed, s)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d (replay with %s=%d)", s, envSeed, s)
		}
	})
	return s
}

// poll calls try once at once and then once per every tick until it reports done or
// fails, bounded by within; try's ctx ends with that bound (use it for requests). Errors:
// try's, or context.DeadlineExceeded when within ran out first (the caller says what it
// last saw).
func poll(within, every time.Duration, try func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if done, err := try(ctx); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

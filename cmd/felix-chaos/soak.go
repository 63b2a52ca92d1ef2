package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"felix/testbed/scenario"
)

// runSoak is `felix-chaos soak`: the scenario again and again, each run with a fresh
// random seed, until --duration has passed (at least one run; the run under way at the
// deadline finishes), then
// "N passed, M failed" over the runs; exit 1 when a run failed. A passed run prints one
// line and its work directory is removed (unless --keep); a failed one prints its report
// and replay line and keeps its directory.
func runSoak(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("soak", stderr)
	duration := fs.Duration("duration", 0, "how long to keep starting runs (required)")
	name := fs.String("scenario", scenario.SingleNodeKill, "the scenario to repeat")
	dir := fs.String("dir", "", "directory for the runs' work directories, empty or absent (default: a temporary one)")
	keep := fs.Bool("keep", false, "keep the work directories of passed runs too")
	runDuration := fs.Duration("run-duration", 0, "bound on each run (0: the scenario's default)")
	sizes := addSizeFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *duration <= 0 {
		fmt.Fprintln(stderr, "felix-chaos soak: --duration D (> 0) is required")
		return exitUsage
	}
	sc, code := pickScenario(fs, *name, stderr)
	if code != exitOK {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, _, err := workDir(*dir, "felix-chaos-soak-")
	if err != nil {
		fmt.Fprintf(stderr, "felix-chaos soak: %v\n", err)
		return exitUsage
	}
	bins, err := scenario.Build(ctx, filepath.Join(root, "bin"))
	if err != nil {
		fmt.Fprintf(stdout, "felix-chaos soak: %v\n0 passed, 1 failed\n", err)
		return exitFindings
	}
	fmt.Fprintf(stdout, "soak %s for %s, runs under %s\n", sc.Name, *duration, root)
	deadline := time.Now().Add(*duration)
	passed, failed := 0, 0
	for n := 1; (n == 1 || time.Now().Before(deadline)) && ctx.Err() == nil; n++ {
		seed := rand.Uint64() // fresh: FELIX_TEST_SEED and --seed are for replaying one run
		runDir := filepath.Join(root, fmt.Sprintf("run-%04d", n))
		var log bytesLog
		res, err := scenario.Run(ctx, sc, scenario.RunOptions{Seed: seed, Dir: runDir, Bins: bins, Log: &log,
			Sizes: scenario.Sizes{Ops: *sizes.ops, Kills: *sizes.kills, Duration: *runDuration}})
		if err != nil {
			res.Check("scenario started", false, "%v", err)
		}
		p, f := res.Counts()
		fmt.Fprintf(stdout, "run %d seed=%d: %d passed, %d failed in %s\n", n, seed, p, f, res.Elapsed.Round(time.Second))
		if res.Passed() {
			passed++
			if !*keep {
				os.RemoveAll(runDir)
			}
			continue
		}
		failed++
		stdout.Write(log.b)
		res.Print(stdout)
		fmt.Fprintln(stdout, res.ReplayLine())
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 || passed == 0 {
		return exitFindings
	}
	return exitOK
}

// bytesLog keeps a run's progress lines, printed only when the run fails.
type bytesLog struct{ b []byte }

// Write appends p; it never fails.
func (l *bytesLog) Write(p []byte) (int, error) {
	l.b = append(l.b, p...)
	return len(p), nil
}

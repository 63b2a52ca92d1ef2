package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"

	"felix/testbed/scenario"
)

// sizeFlags are the size knobs run and soak share; unset ones take the scenario's defaults.
type sizeFlags struct {
	ops, kills *int
}

func addSizeFlags(fs *flag.FlagSet) sizeFlags {
	return sizeFlags{
		ops:   fs.Int("ops", 0, "client operations of the load phase (0: the scenario's default)"),
		kills: fs.Int("kills", -1, "faults that must land while operations are in flight (0: none, a baseline; -1: the scenario's default)"),
	}
}

// runRun is `felix-chaos run`: one scenario once, its report, then "N passed, M failed"
// over the report's checks; exit 1 when a check failed. --list lists the scenarios.
func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("run", stderr)
	name := fs.String("scenario", "", "the scenario to run (--list shows them)")
	list := fs.Bool("list", false, "list the scenarios and exit")
	seed := fs.Uint64("seed", 0, "the run's seed (default: FELIX_TEST_SEED when set, else random)")
	dir := fs.String("dir", "", "work directory, empty or absent (default: a temporary one, removed when the run passes)")
	duration := fs.Duration("duration", 0, "bound on the whole run (0: the scenario's default)")
	sizes := addSizeFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *list {
		listScenarios(stdout)
		return exitOK
	}
	sc, code := pickScenario(fs, *name, stderr)
	if code != exitOK {
		return code
	}
	var explicit *uint64
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "seed" {
			explicit = seed
		}
	})
	s, source, err := scenario.Seed(explicit)
	if err != nil {
		fmt.Fprintf(stderr, "felix-chaos run: %v\n", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, cleanup, err := workDir(*dir, "felix-chaos-run-")
	if err != nil {
		fmt.Fprintf(stderr, "felix-chaos run: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "seed %d (%s)\n", s, source)
	bins, err := scenario.Build(ctx, filepath.Join(root, "bin"))
	if err != nil {
		fmt.Fprintf(stdout, "felix-chaos run: %v\n0 passed, 1 failed\n", err)
		return exitFindings
	}
	res := runOne(ctx, sc, scenario.RunOptions{Seed: s, Dir: root, Bins: bins, Log: stdout,
		Sizes: scenario.Sizes{Ops: *sizes.ops, Kills: *sizes.kills, Duration: *duration}}, stdout)
	passed, failed := res.Counts()
	if failed == 0 && cleanup != nil {
		cleanup()
	}
	fmt.Fprintf(stdout, "%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return exitFindings
	}
	return exitOK
}

// runOne runs one scenario, prints its report (and the replay line when it failed) and
// returns the result; a run that could not start is a result with one FAIL row.
func runOne(ctx context.Context, sc scenario.Scenario, opts scenario.RunOptions, stdout io.Writer) scenario.Result {
	res, err := scenario.Run(ctx, sc, opts)
	if err != nil {
		res.Check("scenario started", false, "%v", err)
	}
	res.Print(stdout)
	if !res.Passed() {
		fmt.Fprintln(stdout, res.ReplayLine())
	}
	return res
}

// pickScenario resolves --scenario; it prints the problem and returns exitUsage when the
// name is missing or unknown.
func pickScenario(fs *flag.FlagSet, name string, stderr io.Writer) (scenario.Scenario, int) {
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "%s: takes no arguments (got %q)\n", fs.Name(), fs.Args())
		return scenario.Scenario{}, exitUsage
	}
	if name == "" {
		fmt.Fprintf(stderr, "%s: --scenario NAME is required; one of: %s\n", fs.Name(), strings.Join(scenario.Names(), ", "))
		return scenario.Scenario{}, exitUsage
	}
	sc, ok := scenario.Lookup(name)
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown scenario %q; one of: %s\n", fs.Name(), name, strings.Join(scenario.Names(), ", "))
		return scenario.Scenario{}, exitUsage
	}
	return sc, exitOK
}

// listScenarios prints one line per scenario: name, default sizes, description.
func listScenarios(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, s := range scenario.All() {
		d := s.Defaults
		fmt.Fprintf(tw, "%s\tops=%d kills=%d duration=%s\t%s\n", s.Name, d.Ops, d.Kills, d.Duration, s.Description)
	}
	tw.Flush()
}

// workDir returns the work directory: dir itself when given (created; it must be empty),
// else a fresh temporary directory and the function removing it.
func workDir(dir, pattern string) (root string, cleanup func(), err error) {
	if dir == "" {
		root, err = os.MkdirTemp("", pattern)
		if err != nil {
			return "", nil, err
		}
		return root, func() { os.RemoveAll(root) }, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	if len(entries) > 0 {
		return "", nil, fmt.Errorf("work dir %s is not empty", dir)
	}
	root, err = filepath.Abs(dir)
	return root, nil, err
}

package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"felix/testbed/history"
	"felix/testbed/supervisor"
)

// RunOptions say how Run runs one scenario.
type RunOptions struct {
	Seed  uint64    // the run's seed (Seed chooses one)
	Dir   string    // the work directory; created when missing, must be empty of a previous history
	Sizes Sizes     // unset knobs take the scenario's Defaults
	Bins  Binaries  // the binaries; zero: built into Dir/bin first (Build)
	Log   io.Writer // progress lines; nil = io.Discard
}

// Run runs s once: it makes the work directory, builds the binaries unless given, starts
// a supervisor (logs in Dir/logs) and a history recorder (Dir/history.jsonl), runs s.Run
// under a context bounded by the sizes' Duration, then kills whatever the scenario left
// running and closes the recorder. The result always carries the scenario, seed, sizes,
// directory and wall time; when s.Run fails, or leaves no passed row, a FAIL row says why.
// Errors: only what kept the scenario from starting (directory, build, supervisor,
// recorder); a failing scenario is a failed Result, not an error.
func Run(ctx context.Context, s Scenario, opts RunOptions) (res Result, err error) {
	sizes := opts.Sizes.WithDefaults(s.Defaults)
	res = Result{Scenario: s.Name, Seed: opts.Seed, Sizes: sizes}
	began := time.Now()
	defer func() { res.Elapsed = time.Since(began) }()
	dir, err := filepath.Abs(opts.Dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return res, fmt.Errorf("scenario: work dir: %w", err)
	}
	res.Dir = dir
	bins := opts.Bins
	if bins == (Binaries{}) {
		if bins, err = Build(ctx, filepath.Join(dir, "bin")); err != nil {
			return res, err
		}
	}
	env, err := newEnv(s.Name, opts.Seed, dir, bins, sizes, opts.Log)
	if err != nil {
		return res, err
	}
	rctx, cancel := context.WithTimeout(ctx, sizes.Duration)
	defer cancel()
	got, runErr := s.Run(rctx, env)
	res.Rows, res.Report = got.Rows, got.Report
	if cerr := closeEnv(env); cerr != nil {
		res.Check("run cleanup (processes reaped, history closed)", false, "%v", cerr)
	}
	switch {
	case runErr != nil:
		res.Check("scenario ran to the end", false, "%v", runErr)
	case len(res.Rows) == 0:
		res.Check("scenario ran to the end", false, "the scenario checked nothing")
	}
	return res, nil
}

// newEnv opens the supervisor and recorder of one run.
func newEnv(name string, seed uint64, dir string, bins Binaries, sizes Sizes, log io.Writer) (*Env, error) {
	if log == nil {
		log = io.Discard
	}
	sup, err := supervisor.New(filepath.Join(dir, "logs"))
	if err != nil {
		return nil, err
	}
	hp := filepath.Join(dir, "history.jsonl")
	rec, err := history.CreateRecorder(hp, history.RecorderOptions{})
	if err != nil {
		sup.Close()
		return nil, fmt.Errorf("scenario: history: %w", err)
	}
	return &Env{Scenario: name, Seed: seed, Dir: dir, Bins: bins, Supervisor: sup, History: rec,
		HistoryPath: hp, Sizes: sizes, Log: log}, nil
}

// closeEnv kills every process the run left (Supervisor.Close: each reaped within
// supervisor.KillWait) and closes the recorder (a no-op when the scenario already closed
// it through CheckHistory).
func closeEnv(env *Env) error {
	return errors.Join(env.Supervisor.Close(), env.History.Close())
}

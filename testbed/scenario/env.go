package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"felix/testbed/checker"
	"felix/testbed/history"
	"felix/testbed/supervisor"
)

// SeedEnv is the environment variable that sets a run's seed when --seed is not given:
// a base-10 uint64 (the repository's FELIX_TEST_SEED, internal/testseed).
const SeedEnv = "FELIX_TEST_SEED"

// Sizes are a run's size knobs. A knob left unset takes the scenario's default.
type Sizes struct {
	// Ops is how many client operations the load phase invokes (publishes and cache
	// operations; subscriber reads and the final reads come on top). <= 0: the default.
	Ops int
	// Kills is how many faults (for single-node-kill: SIGKILLs) must land while operations
	// are in flight; 0 is a baseline run without faults. < 0: the default.
	Kills int
	// Duration bounds the whole run, wall clock (the context Run gets). <= 0: the default.
	Duration time.Duration
}

// WithDefaults returns s with every unset knob taken from def.
func (s Sizes) WithDefaults(def Sizes) Sizes {
	if s.Ops <= 0 {
		s.Ops = def.Ops
	}
	if s.Kills < 0 {
		s.Kills = max(def.Kills, 0)
	}
	if s.Duration <= 0 {
		s.Duration = def.Duration
	}
	return s
}

// Binaries are the paths of the built binaries a scenario starts.
type Binaries struct {
	Broker string // felix-broker
	CLI    string // felix (felix log verify, ...)
}

// Build runs `go build -o DIR/ ./cmd/felix-broker ./cmd/felix` in the module root (the
// first directory at or above the working directory whose go.mod declares module felix)
// and returns the two paths under dir (created when missing). The go command comes from
// PATH. Errors: no module root, the build's failure with its output.
func Build(ctx context.Context, dir string) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Binaries{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", abs+string(filepath.Separator), "./cmd/felix-broker", "./cmd/felix")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("scenario: go build in %s: %w\n%s", root, err, out)
	}
	return Binaries{Broker: filepath.Join(abs, "felix-broker"), CLI: filepath.Join(abs, "felix")}, nil
}

// ModuleRoot returns the first directory at or above the working directory holding a
// go.mod that declares "module felix". Errors: none found.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if f := strings.Fields(string(b)); len(f) >= 2 && f[0] == "module" && f[1] == "felix" {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scenario: no go.mod of module felix at or above the working directory")
		}
		dir = parent
	}
}

// Seed chooses a run's seed: *explicit when not nil (--seed), else SeedEnv when set,
// else a random one. source says which ("--seed", "FELIX_TEST_SEED" or "random").
// Errors: a SeedEnv value that is not a uint64.
func Seed(explicit *uint64) (seed uint64, source string, err error) {
	if explicit != nil {
		return *explicit, "--seed", nil
	}
	if v, ok := os.LookupEnv(SeedEnv); ok && v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, "", fmt.Errorf("scenario: %s=%q: want a uint64", SeedEnv, v)
		}
		return s, SeedEnv, nil
	}
	return rand.Uint64(), "random", nil
}

// Env is what a scenario's Run gets: its seed, directory, binaries, supervisor,
// history recorder and sizes. The runner (Run) owns it and closes it after Run returns.
type Env struct {
	Scenario    string                 // the scenario's name
	Seed        uint64                 // the run's seed; derive every random choice from it (Rand)
	Dir         string                 // the run's work directory (exists; absolute)
	Bins        Binaries               // the built binaries
	Supervisor  *supervisor.Supervisor // logs into Dir/logs; killed at the end of the run
	History     *history.Recorder      // writes HistoryPath
	HistoryPath string                 // Dir/history.jsonl
	Sizes       Sizes                  // defaults applied
	Log         io.Writer              // progress lines (never nil)
}

// Logf writes one progress line to e.Log.
func (e *Env) Logf(format string, args ...any) {
	fmt.Fprintf(e.Log, format+"\n", args...)
}

// Rand returns a generator for one purpose of the run: PCG(seed, stream), so each
// purpose (the kill schedule, each worker) draws the same numbers on a replay whatever
// the others do.
func (e *Env) Rand(stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(e.Seed, stream))
}

// VisualizationPath is where the linearizability checker writes porcupine's HTML
// visualization when it finds a non-linearizable object: Dir/history.lin.html.
func (e *Env) VisualizationPath() string { return filepath.Join(e.Dir, "history.lin.html") }

// CheckHistory closes the recorder (completing what is still pending as info), loads
// HistoryPath back and runs every checker on it (checker.CheckAll; linearizability
// bounded by linTimeout per object, its visualization at VisualizationPath). Errors: the
// recorder's sticky write error, a history that does not load, the visualization write
// (the report is returned with it).
func (e *Env) CheckHistory(linTimeout time.Duration) (checker.Report, *history.History, error) {
	if err := e.History.Close(); err != nil {
		return checker.Report{}, nil, fmt.Errorf("scenario: history: %w", err)
	}
	h, err := history.LoadFile(e.HistoryPath)
	if err != nil {
		return checker.Report{}, nil, fmt.Errorf("scenario: %s: %w", e.HistoryPath, err)
	}
	rep, err := checker.CheckAll(h, checker.Options{Linear: checker.LinearOptions{
		Timeout: linTimeout, VisualizationPath: e.VisualizationPath()}})
	return rep, h, err
}

// BuildCommands runs `go build -o DIR/ ./cmd/NAME...` in the module root for each of
// names (e.g. "felix-broker", "felix-controlplane") and returns name → path under dir
// (created when missing). Errors: no module root, the build's failure with its output.
func BuildCommands(ctx context.Context, dir string, names ...string) (map[string]string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	args := []string{"build", "-o", abs + string(filepath.Separator)}
	paths := make(map[string]string, len(names))
	for _, n := range names {
		args = append(args, "./cmd/"+n)
		paths[n] = filepath.Join(abs, n)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("scenario: go build in %s: %w\n%s", root, err, out)
	}
	return paths, nil
}

// MainWithCommands is the body of a process-test package's TestMain: it builds the
// commands names into a fresh temp dir (prefix names it) once, hands their paths to set,
// runs the tests (run is the testing.M's Run), removes the dir and exits with their code.
// A failed build prints the go command's output and exits 1 without running anything.
func MainWithCommands(prefix string, set func(paths map[string]string), run func() int, names ...string) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	paths, err := BuildCommands(context.Background(), dir, names...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	set(paths)
	code := run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

package supervisor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Errors of the supervisor. Each is wrapped with the process name and what was waited for.
var (
	// ErrExited: the process exited while something waited for it (readiness, output, a stop).
	ErrExited = errors.New("supervisor: process exited")
	// ErrRunning: Restart was called on a run that has not exited.
	ErrRunning = errors.New("supervisor: process still running")
	// ErrDrainTimeout: Terminate's drain budget ran out; the process was SIGKILLed.
	ErrDrainTimeout = errors.New("supervisor: drain did not finish")
	// ErrNameInUse: Start was given the Name of another process of this supervisor.
	ErrNameInUse = errors.New("supervisor: process name in use")
	// ErrClosed: the supervisor was closed.
	ErrClosed = errors.New("supervisor: closed")
)

// KillWait bounds every wait for a SIGKILLed process to be reaped when no caller deadline
// applies (Close, the kill after a drain timeout): 10 s.
const KillWait = 10 * time.Second

// Spec describes one process: what to run, where, and how to tell that it is ready.
type Spec struct {
	// Name labels the process in errors and names its log file <Supervisor.Dir>/<Name>.log;
	// letters, digits, '.', '_' and '-'. Empty = the base name of Path. Unique per supervisor.
	Name string
	Path string   // binary to run (looked up in PATH when it has no '/')
	Args []string // arguments after argv[0]
	// Env holds "K=V" entries added to the supervisor's own environment (os.Environ(), less
	// the clock hook's variables); later entries win.
	Env   []string
	Dir   string // working directory; "" = the supervisor's
	Ready Ready  // how Start waits for readiness; the zero Ready does not wait
	// Clock, when set, is this process's fake-clock hook (clock.go); nil = real clock.
	Clock *Clock
	// TailBytes bounds the in-memory output tail of each run (stdout and stderr interleaved);
	// 0 = DefaultTailBytes.
	TailBytes int
}

func (s Spec) clone() Spec {
	s.Args, s.Env = slices.Clone(s.Args), slices.Clone(s.Env)
	if s.Clock != nil {
		c := *s.Clock
		s.Clock = &c
	}
	return s
}

var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Supervisor starts test processes and owns them until Close. Safe for concurrent use.
type Supervisor struct {
	dir string

	mu     sync.Mutex
	names  map[string]*Process // the latest run under each name
	live   map[*Process]bool   // runs not yet reaped
	closed bool
}

// New returns a supervisor that writes one log file per process name into dir (created,
// 0755, when missing). Errors: dir cannot be created.
func New(dir string) (*Supervisor, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("supervisor: log dir: %w", err)
	}
	return &Supervisor{dir: dir, names: map[string]*Process{}, live: map[*Process]bool{}}, nil
}

// NewForTest returns a supervisor logging into a fresh t.TempDir() whose Close runs at
// t's cleanup (killing every process it started); when t failed, the cleanup first logs
// the last 40 output lines of every run, with its log file's path.
func NewForTest(t testing.TB) *Supervisor {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range s.all() {
				t.Logf("%s run %d (pid %d, %s), log %s, last lines:\n%s", p.name, p.run, p.PID(),
					p.describeExit(), p.LogPath(), lastLines(p.Tail(), 40))
			}
		}
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Dir is the directory holding the log files.
func (s *Supervisor) Dir() string { return s.dir }

// Start runs spec as a new process (run 1 of its name), its stdout and stderr appended to
// its log file and kept in a bounded tail, its peak RSS sampled, and waits for spec.Ready
// (bounded by ctx and Ready.Timeout). When the process is not ready in time or exits first
// it is SIGKILLed and the error (wrapping ErrExited, context.DeadlineExceeded or the
// readiness error) quotes its last output lines; that run stays the name's latest
// (Supervisor.Process), which Restart can start again. Errors also: ErrNameInUse, ErrClosed,
// a bad Spec, the exec failure.
func (s *Supervisor) Start(ctx context.Context, spec Spec) (*Process, error) {
	spec = spec.clone()
	if spec.Name == "" {
		spec.Name = filepath.Base(spec.Path)
	}
	s.mu.Lock()
	_, used := s.names[spec.Name]
	s.mu.Unlock()
	if used {
		return nil, fmt.Errorf("%w: %q", ErrNameInUse, spec.Name)
	}
	return s.launch(ctx, spec, 1)
}

// Restart starts the next run of p's name from p's Spec, changed by edit when edit is not nil
// (edit receives a copy; changing Name is ignored), and waits for readiness as Start does.
// p must have exited (Kill, Terminate or on its own): else ErrRunning. Other errors as Start.
func (s *Supervisor) Restart(ctx context.Context, p *Process, edit func(*Spec)) (*Process, error) {
	if p.Running() {
		return nil, fmt.Errorf("%w: %s run %d (pid %d)", ErrRunning, p.name, p.run, p.PID())
	}
	spec := p.spec.clone()
	if edit != nil {
		edit(&spec)
		spec.Name = p.name
	}
	return s.launch(ctx, spec, p.run+1)
}

// launch starts run number run of spec and waits for its readiness.
func (s *Supervisor) launch(ctx context.Context, spec Spec, run int) (*Process, error) {
	if spec.Path == "" || !validName.MatchString(spec.Name) {
		return nil, fmt.Errorf("supervisor: bad spec: path %q, name %q", spec.Path, spec.Name)
	}
	env := append(stripClock(os.Environ()), spec.Env...)
	if spec.Clock != nil {
		ce, err := spec.Clock.Env()
		if err != nil {
			return nil, err
		}
		env = append(stripClock(env), ce...)
	}
	if spec.Ready.File != "" {
		if err := os.Remove(spec.Ready.File); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("supervisor: stale ready file: %w", err)
		}
	}
	p, err := s.exec(spec, env, run)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx); err != nil {
		p.kill(KillWait)
		return nil, fmt.Errorf("supervisor: %s run %d not ready: %w\nlog %s, last lines:\n%s",
			p.name, run, err, p.LogPath(), lastLines(p.Tail(), 20))
	}
	return p, nil
}

// exec starts the process and registers it.
func (s *Supervisor) exec(spec Spec, env []string, run int) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, used := s.names[spec.Name]; used && run == 1 {
		return nil, fmt.Errorf("%w: %q", ErrNameInUse, spec.Name) // a concurrent Start won
	}
	logPath := filepath.Join(s.dir, spec.Name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("supervisor: log file: %w", err)
	}
	fmt.Fprintf(logFile, "=== %s run %d: %s %q (started %s)\n", spec.Name, run, spec.Path, spec.Args,
		time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env, cmd.Dir = env, spec.Dir
	p := newProcess(s, spec, run, cmd, logFile, logPath)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	// Pdeathsig: a test binary that dies leaves no node behind (it fires when the OS thread
	// that forked exits; Go's threads outlive the test unless a goroutine locked one).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second // output pipes held open by a grandchild do not block Wait
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("supervisor: start %s: %w", spec.Name, err)
	}
	s.names[spec.Name], s.live[p] = p, true
	go p.reap()
	go p.sampleRSS()
	return p, nil
}

// reaped drops p from the live set.
func (s *Supervisor) reaped(p *Process) {
	s.mu.Lock()
	delete(s.live, p)
	s.mu.Unlock()
}

// Process returns the latest run started under name, or nil.
func (s *Supervisor) Process(name string) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names[name]
}

// all returns the latest run of every name, sorted by name.
func (s *Supervisor) all() []*Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Process, 0, len(s.names))
	for _, p := range s.names {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Process) int { return cmp.Compare(a.name, b.name) })
	return out
}

// Close SIGKILLs every process still running (including paused ones), waits up to KillWait
// for each to be reaped, and refuses later Starts (ErrClosed). Idempotent. Errors: a process
// that was not reaped in time (joined, one per process).
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	live := make([]*Process, 0, len(s.live))
	for p := range s.live {
		live = append(live, p)
	}
	s.mu.Unlock()
	var errs []error
	for _, p := range live {
		if err := p.kill(KillWait); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// RSSInterval is how often a running process's peak RSS (VmHWM) is sampled: 20 ms. It is
// also read right before every SIGTERM and SIGKILL the supervisor sends.
const RSSInterval = 20 * time.Millisecond

// stateInterval is how often Pause and Resume re-read /proc/<pid>/stat while they wait.
const stateInterval = 2 * time.Millisecond

// ExitStatus is how a run ended.
type ExitStatus struct {
	Code   int            // exit code; -1 when a signal ended the process
	Signal syscall.Signal // the signal that ended it; 0 when it exited on its own
}

// Success reports exit code 0 without a signal.
func (e ExitStatus) Success() bool { return e.Code == 0 && e.Signal == 0 }

// String is "exit 0", "exit 3" or "signal killed".
func (e ExitStatus) String() string {
	if e.Signal != 0 {
		return "signal " + e.Signal.String()
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// Process is one run of a Spec. Its methods are safe for concurrent use. A Process is not
// reused: Restart returns a new one (the next run of the same name, same log file).
type Process struct {
	sup     *Supervisor
	spec    Spec
	name    string
	run     int
	cmd     *exec.Cmd
	logFile *os.File
	logPath string
	tail    *tail
	out     io.Writer // log file + tail; one writer value, so exec copies from one goroutine at a time

	exited chan struct{} // closed once reaped and the output fully copied
	status ExitStatus    // set before exited closes
	peak   atomic.Int64  // bytes

	mu        sync.Mutex
	readyData []byte
}

func newProcess(s *Supervisor, spec Spec, run int, cmd *exec.Cmd, logFile *os.File, logPath string) *Process {
	p := &Process{sup: s, spec: spec, name: spec.Name, run: run, cmd: cmd, logFile: logFile, logPath: logPath,
		tail: newTail(spec.TailBytes), exited: make(chan struct{})}
	p.out = io.MultiWriter(logFile, p.tail)
	return p
}

// reap waits for the process, records its status and closes exited.
func (p *Process) reap() {
	err := p.cmd.Wait()
	st := ExitStatus{Code: -1}
	if ps := p.cmd.ProcessState; ps != nil {
		st.Code = ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			st.Signal = ws.Signal()
		}
	}
	fmt.Fprintf(p.logFile, "=== %s run %d: %s (wait: %v)\n", p.name, p.run, st, err)
	p.logFile.Close()
	p.status = st
	close(p.exited)
	p.sup.reaped(p)
}

// sampleRSS notes VmHWM every RSSInterval until the process exits.
func (p *Process) sampleRSS() {
	tick := time.NewTicker(RSSInterval)
	defer tick.Stop()
	for {
		p.noteRSS()
		select {
		case <-p.exited:
			return
		case <-tick.C:
		}
	}
}

func (p *Process) noteRSS() {
	if v, err := PeakRSS(p.PID()); err == nil {
		for {
			old := p.peak.Load()
			if v <= old || p.peak.CompareAndSwap(old, v) {
				return
			}
		}
	}
}

// PeakRSS is the largest VmHWM sampled from this run, in bytes (0 before the first sample).
func (p *Process) PeakRSS() int64 { return p.peak.Load() }

// PID is the process id (that of the exec'd program: `ip netns exec` execs in place).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Name is the Spec's name; Run counts the runs of that name from 1.
func (p *Process) Name() string { return p.name }

// Run is this run's number: 1 for Start, one more for each Restart.
func (p *Process) Run() int { return p.run }

// Spec returns a copy of the Spec this run was started from (Name filled in).
func (p *Process) Spec() Spec { return p.spec.clone() }

// LogPath is the log file every run of this name appends to, with "=== " lines marking
// each run's start and exit.
func (p *Process) LogPath() string { return p.logPath }

// Tail returns the last Spec.TailBytes bytes of this run's stdout and stderr.
func (p *Process) Tail() string { s, _, _ := p.tail.snapshot(); return s }

// WaitOutput blocks until this run's output tail contains substr. Errors: ErrExited (the
// process exited and its whole output lacks substr), ctx's error.
func (p *Process) WaitOutput(ctx context.Context, substr string) error {
	return p.tail.waitFor(ctx, substr, p.exited)
}

// ReadyData returns the ready file's contents read when the run became ready (nil when
// Spec.Ready.File is empty).
func (p *Process) ReadyData() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyData
}

// ReadyJSON decodes ReadyData into v (e.g. a struct with the broker's quic_addr, http_addr,
// admin_token_file). Errors: no ready data, or the JSON error.
func (p *Process) ReadyJSON(v any) error {
	b := p.ReadyData()
	if len(b) == 0 {
		return fmt.Errorf("supervisor: %s run %d has no ready data", p.name, p.run)
	}
	return json.Unmarshal(b, v)
}

// Exited is closed once the process was reaped and its output copied.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Running reports whether the process has not been reaped yet (a paused process is running).
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Status returns the exit status and true once the process exited; else false.
func (p *Process) Status() (ExitStatus, bool) {
	select {
	case <-p.exited:
		return p.status, true
	default:
		return ExitStatus{}, false
	}
}

// Wait blocks until the process exits on its own and returns its status. Errors: ctx's
// error (the process keeps running).
func (p *Process) Wait(ctx context.Context) (ExitStatus, error) {
	select {
	case <-p.exited:
		return p.status, nil
	case <-ctx.Done():
		return ExitStatus{}, fmt.Errorf("supervisor: %s run %d still running: %w", p.name, p.run, ctx.Err())
	}
}

// Signal sends sig to the process. Errors: ErrExited when it was already reaped.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("%w: %s run %d", ErrExited, p.name, p.run)
		}
		return fmt.Errorf("supervisor: signal %s to %s: %w", sig, p.name, err)
	}
	return nil
}

func (p *Process) describeExit() string {
	if st, ok := p.Status(); ok {
		return st.String()
	}
	return "running"
}

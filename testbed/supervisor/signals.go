package supervisor

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// Pause sends SIGSTOP and waits until /proc/<pid>/stat shows the process stopped (state T).
// Errors: ErrExited, ctx's error (the SIGSTOP was sent; the process may stop later).
func (p *Process) Pause(ctx context.Context) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return p.waitState(ctx, true)
}

// Resume sends SIGCONT and waits until the process is no longer stopped. Errors: ErrExited,
// ctx's error.
func (p *Process) Resume(ctx context.Context) error {
	if err := p.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	return p.waitState(ctx, false)
}

// Paused reports whether the process is stopped now (state T or t). Errors: ErrExited, a
// /proc read error.
func (p *Process) Paused() (bool, error) {
	if !p.Running() {
		return false, fmt.Errorf("%w: %s run %d", ErrExited, p.name, p.run)
	}
	st, err := procState(p.PID())
	if err != nil {
		return false, err
	}
	return stopped(st), nil
}

// waitState waits until the process's stopped state equals want.
func (p *Process) waitState(ctx context.Context, want bool) error {
	tick := time.NewTicker(stateInterval)
	defer tick.Stop()
	for {
		got, err := p.Paused()
		if err == nil && got == want {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%s) while waiting for stopped=%v", ErrExited, p.status, want)
		case <-ctx.Done():
			return fmt.Errorf("supervisor: %s run %d: stopped=%v not reached: %w (last: %v, %v)",
				p.name, p.run, want, ctx.Err(), got, err)
		case <-tick.C:
		}
	}
}

// Terminate sends SIGTERM (and SIGCONT, so a paused process drains too) and waits up to
// drain (≤ 0: until ctx ends) for the process to exit; it returns the exit status, which
// the caller judges (a broker's clean drain is exit 0). When the drain does not finish in
// time (or ctx ends first) the process is SIGKILLed, reaped within KillWait, and the error
// wraps ErrDrainTimeout with the status after the kill. A process that already exited gives
// its status and no error.
func (p *Process) Terminate(ctx context.Context, drain time.Duration) (ExitStatus, error) {
	if st, ok := p.Status(); ok {
		return st, nil
	}
	p.noteRSS()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return p.Wait(ctx)
	}
	p.Signal(syscall.SIGCONT)
	var expire <-chan time.Time
	if drain > 0 {
		timer := time.NewTimer(drain)
		defer timer.Stop()
		expire = timer.C
	}
	why := ""
	select {
	case <-p.exited:
		return p.status, nil
	case <-expire:
		why = fmt.Sprintf("within %v", drain)
	case <-ctx.Done():
		why = ctx.Err().Error()
	}
	if err := p.kill(KillWait); err != nil {
		return ExitStatus{}, fmt.Errorf("%w (%s), and then: %w", ErrDrainTimeout, why, err)
	}
	return p.status, fmt.Errorf("%w (%s): %s run %d was SIGKILLed (%s)", ErrDrainTimeout, why, p.name, p.run, p.status)
}

// Kill sends SIGKILL and waits until the process is reaped (gone from the process table)
// and returns its status. Errors: ctx's error when it was not reaped in time. A process
// that already exited gives its status and no error.
func (p *Process) Kill(ctx context.Context) (ExitStatus, error) {
	if st, ok := p.Status(); ok {
		return st, nil
	}
	p.noteRSS()
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
		return p.status, nil
	case <-ctx.Done():
		return ExitStatus{}, fmt.Errorf("supervisor: %s run %d (pid %d) not reaped after SIGKILL: %w", p.name, p.run, p.PID(), ctx.Err())
	}
}

// kill is Kill bounded by d.
func (p *Process) kill(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := p.Kill(ctx)
	return err
}

// Restart is p's supervisor's Restart: the next run of p's name, p's Spec changed by edit.
func (p *Process) Restart(ctx context.Context, edit func(*Spec)) (*Process, error) {
	return p.sup.Restart(ctx, p, edit)
}

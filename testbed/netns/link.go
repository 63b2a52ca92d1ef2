package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/testbed/supervisor"
)

// pollInterval is how often LinkUp re-reads the link state while it waits.
const pollInterval = 10 * time.Millisecond

// NewForTest is New for a test: the namespace is torn down at t's cleanup. When the
// machine refuses (not root, `ip` missing, `ip netns add` not permitted) t is skipped, or
// failed under CI=true; any other error fails t. Create it before the processes that run in
// it (before their supervisor), so that cleanup kills them before the namespace goes.
func NewForTest(t testing.TB) *Namespace {
	t.Helper()
	if os.Geteuid() != 0 {
		supervisor.SkipOrFail(t, "network namespaces need root (euid %d)", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		supervisor.SkipOrFail(t, "iproute2's ip is not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*CommandTimeout)
	defer cancel()
	n, err := New(ctx)
	if err != nil && (strings.Contains(err.Error(), "not permitted") || strings.Contains(err.Error(), "denied")) {
		supervisor.SkipOrFail(t, "ip netns refused: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// Wrap returns the command line that runs path with args inside the namespace: "ip" and
// ["netns", "exec", Name, path, args...]. `ip netns exec` execs in place, so the process
// keeps the pid the caller started (what a supervisor's ready-file check expects). For a
// supervisor.Spec: Path, Args = n.Wrap(bin, args).
func (n *Namespace) Wrap(path string, args []string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.Name, path}, args...)
}

// Command is exec.CommandContext of name and args inside the namespace (through Wrap).
func (n *Namespace) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	p, a := n.Wrap(name, args)
	return exec.CommandContext(ctx, p, a...)
}

// Down reports whether the link is down (LinkDown was called, LinkUp not since).
func (n *Namespace) Down() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.down
}

// LinkDown takes both veth ends down: the namespace is cut off from the root namespace
// (and so from every other namespace and from 127.0.0.1 of the root) until LinkUp. Sends
// to it from the root fail at once (the unreachable route); inside, nothing but loopback
// works. Errors: ErrClosed, an ip command's failure, ctx's error.
func (n *Namespace) LinkDown(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	n.down = true
	if _, err := ip(ctx, "link", "set", n.HostIf, "down"); err != nil {
		return err
	}
	_, err := ip(ctx, "-n", n.Name, "link", "set", n.NSIf, "down")
	return err
}

// LinkUp brings both veth ends up again and waits (bounded by ctx) until both are
// operationally up and the root's connected route to the /30 is back. Errors: ErrClosed,
// an ip command's failure, ctx's error.
func (n *Namespace) LinkUp(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if _, err := ip(ctx, "-n", n.Name, "link", "set", n.NSIf, "up"); err != nil {
		return err
	}
	if _, err := ip(ctx, "link", "set", n.HostIf, "up"); err != nil {
		return err
	}
	if err := n.waitUp(ctx); err != nil {
		return err
	}
	n.down = false
	return nil
}

// waitUp polls until both ends report operstate UP and the connected route is present.
func (n *Namespace) waitUp(ctx context.Context) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		err := n.upNow(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("netns: %s link not up: %w (last: %v)", n.Name, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

var errNotUp = errors.New("not up")

func (n *Namespace) upNow(ctx context.Context) error {
	for _, args := range [][]string{{"-o", "link", "show", n.HostIf}, {"-n", n.Name, "-o", "link", "show", n.NSIf}} {
		out, err := ip(ctx, args...)
		if err != nil {
			return err
		}
		if !strings.Contains(out, " state UP ") {
			return fmt.Errorf("%w: %s", errNotUp, strings.TrimSpace(out))
		}
	}
	out, err := ip(ctx, "-4", "route", "show", n.Subnet.String(), "dev", n.HostIf)
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) == "" {
		return fmt.Errorf("%w: no route to %s on %s", errNotUp, n.Subnet, n.HostIf)
	}
	return nil
}

// Close tears the namespace down: the veth pair (deleting one end deletes both), the root's
// unreachable route and the namespace itself. Processes still inside keep an empty
// namespace until they exit: stop them first. Idempotent. Errors: the first ip failure
// other than "not there".
func (n *Namespace) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	return n.teardown()
}

// teardown removes whatever exists of n, ignoring what is already gone.
func (n *Namespace) teardown() error {
	ctx := context.Background()
	var errs []error
	for _, args := range [][]string{
		{"link", "del", n.HostIf},
		{"route", "del", "unreachable", n.Subnet.String(), "metric", strconv.Itoa(UnreachableMetric)},
		{"netns", "del", n.Name},
	} {
		if _, err := ip(ctx, args...); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gone reports an ip error that says the object does not exist.
func gone(err error) bool {
	s := err.Error()
	return strings.Contains(s, "Cannot find device") || strings.Contains(s, "No such process") ||
		strings.Contains(s, "No such file") || strings.Contains(s, "does not exist")
}

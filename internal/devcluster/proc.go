package devcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one running child.
type proc struct {
	node     Node
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process was waited for
	err      error         // cmd.Wait's result, set before done closes
	stopOnce sync.Once
	stopping chan struct{} // closed when Stop begins on it
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// StartError is a child that exited before it was ready, or was not ready in time.
type StartError struct {
	Node   Node
	Reason string // "exited: exit status 2", "not ready within 1m30s: ..."
	Tail   string // the last lines of its log
}

func (e *StartError) Error() string {
	return fmt.Sprintf("devcluster: %s %s; the last lines of %s:\n%s", e.Node.Name, e.Reason, e.Node.LogPath, e.Tail)
}

// launch starts n's program with its log appended to n.LogPath, in its own process
// group (a Ctrl-C in the terminal reaches only the parent, which stops the children in
// order) and with SIGKILL as its parent-death signal (no child outlives a killed parent).
func (c *Cluster) launch(path string, n Node) (*proc, error) {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	defer logf.Close() // the child holds its own descriptor
	fmt.Fprintf(logf, "--- devcluster: %s %s starting at %s\n", n.Kind, n.Name, time.Now().UTC().Format(time.RFC3339))
	cmd := exec.Command(path)
	cmd.Dir = c.Layout.Dir
	cmd.Env = append(append(os.Environ(), c.cfg.Env...), c.Layout.Env(n)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devcluster: start %s: %w", n.Name, err)
	}
	p := &proc{node: n, cmd: cmd, done: make(chan struct{}), stopping: make(chan struct{})}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	_ = os.WriteFile(n.PIDPath, pidString(cmd.Process.Pid), 0o644)
	fmt.Fprintf(c.cfg.Log, "%s started (pid %d), log %s\n", n.Name, cmd.Process.Pid, n.LogPath)
	go c.reap(p)
	return p, nil
}

// reap waits for p and reports an exit that Stop did not ask for.
func (c *Cluster) reap(p *proc) {
	p.err = p.cmd.Wait()
	_ = os.Remove(p.node.PIDPath)
	close(p.done)
	select {
	case <-p.stopping:
	default:
		c.exits <- Exit{Node: p.node, Err: p.err, Tail: tail(p.node.LogPath, 20)}
	}
}

// waitReady polls p's ready URL every 50 ms until it answers 200, p exits, ctx ends or
// the deadline passes.
func (p *proc) waitReady(ctx context.Context, deadline time.Time) error {
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = probe(ctx, hc, p.node.ReadyURL()); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return &StartError{Node: p.node, Reason: "exited before it was ready: " + exitText(p.err), Tail: tail(p.node.LogPath, 20)}
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return &StartError{Node: p.node, Reason: fmt.Sprintf("not ready in time (%s: %v)", p.node.ReadyURL(), last),
				Tail: tail(p.node.LogPath, 20)}
		}
	}
}

// probe is nil when GET url answers 200.
func probe(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// exitText describes a cmd.Wait result.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// stop sends SIGTERM to a running p, waits up to d, then SIGKILL and waits. The error
// names a SIGKILL or a failed exit; nil when p exited 0 (or had already exited).
func (p *proc) stop(d time.Duration) error {
	if p.exited() {
		return nil
	}
	p.stopOnce.Do(func() { close(p.stopping) })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if p.err != nil && !isSignal(p.err, syscall.SIGTERM) {
			return fmt.Errorf("devcluster: %s after SIGTERM: %v", p.node.Name, p.err)
		}
		return nil
	case <-time.After(d):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("devcluster: %s did not exit within %v of SIGTERM: killed (SIGKILL)", p.node.Name, d)
}

// isSignal reports whether err is an exit by sig.
func isSignal(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// tail is the last n lines of the file at path ("" when unreadable).
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimRight(string(bytes.Join(lines, []byte("\n"))), "\n")
}

// ensureDefaultCatalog creates the tenant and namespace "default" through the control
// plane (the CLI's defaults; a broker in cluster mode takes its catalog from the control
// plane). 201 and 409 (exists) are both fine; a 503 (no leader yet) is retried until
// the deadline.
func ensureDefaultCatalog(ctx context.Context, l Layout, deadline time.Time) error {
	token, err := os.ReadFile(l.ControlPlaneTokenFile())
	if err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	for _, p := range []struct{ path, body string }{
		{"/v1/tenants", `{"tenant_id":"default","display_name":"default"}`},
		{"/v1/tenants/default/namespaces", `{"tenant_id":"default","namespace":"default","display_name":"default"}`},
	} {
		for {
			status, err := post(ctx, hc, l.ControlPlaneURLs()[0]+p.path, strings.TrimSpace(string(token)), p.body)
			if err == nil && (status == http.StatusCreated || status == http.StatusConflict) {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("devcluster: POST %s on the control plane: status %d, %v", p.path, status, err)
			}
			time.Sleep(100 * time.Millisecond) // the control plane's Retry-After is 1 s; poll faster
		}
	}
	return nil
}

// getUntil polls GET url every 100 ms until it answers 200, ctx ends or the deadline
// passes (the last failure).
func getUntil(ctx context.Context, url string, deadline time.Time) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	for {
		err := probe(ctx, hc, url)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func post(ctx context.Context, hc *http.Client, url, token, body string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ProcessesIn are the pids of the processes whose working directory is dir (Linux /proc):
// a cluster's children run in its Layout.Dir, so after Stop (or a killed parent: their
// parent-death signal is SIGKILL) none should be left. Unreadable entries are skipped;
// the error is /proc's.
func ProcessesIn(dir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			out = append(out, pid)
		}
	}
	return out, nil
}

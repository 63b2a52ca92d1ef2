package bench

// The QUIC ceilings (issue 22): minimal quic-go programs with the broker's TLS and QUIC
// settings (module bench/ceilings, command felix-ceilings), run by compare beside the
// Felix shapes they bound, and the client-process runner they share with the peers.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// BuildCeilings compiles bench/ceilings/cmd/felix-ceilings (its own Go module, quic-go
// only) into outDir. Errors wrap ErrPeerUnavailable.
func BuildCeilings(ctx context.Context, repoRoot, outDir string) (string, error) {
	bin := filepath.Join(outDir, "felix-ceilings")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/felix-ceilings")
	cmd.Dir = filepath.Join(repoRoot, "bench", "ceilings")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go build bench/ceilings/cmd/felix-ceilings: %v\n%s", ErrPeerUnavailable, err, out.String())
	}
	return bin, nil
}

// Ceilings runs the felix-ceilings servers and clients.
type Ceilings struct {
	// Bin is the felix-ceilings executable (BuildCeilings).
	Bin string
	// WorkDir holds the servers' ready files.
	WorkDir string
	// Log receives the servers' output.
	Log io.Writer
}

// Start starts a ceiling server, mode "relay" or "echo", on a random loopback port and
// waits for its ready file (address and certificate fingerprint). Errors wrap
// ErrPeerUnavailable.
func (c *Ceilings) Start(ctx context.Context, mode string) (*PeerProc, error) {
	if err := os.MkdirAll(c.WorkDir, 0o755); err != nil {
		return nil, err
	}
	ready := filepath.Join(c.WorkDir, "ceiling-"+mode+".json")
	_ = os.Remove(ready)
	cmd := exec.Command(c.Bin, "server", "--mode", mode, "--ready", ready)
	if c.Log != nil {
		cmd.Stdout, cmd.Stderr = c.Log, c.Log
	}
	pp, err := start(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile(ready); err == nil {
			var r struct {
				Addr        string `json:"addr"`
				Fingerprint string `json:"fingerprint"`
			}
			if json.Unmarshal(b, &r) == nil && r.Addr != "" {
				pp.Addr, pp.Fingerprint = r.Addr, r.Fingerprint
				return pp, nil
			}
		}
		select {
		case <-pp.exited:
			return nil, fmt.Errorf("%w: felix-ceilings server exited before ready", ErrPeerUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pp.Stop()
	return nil, fmt.Errorf("%w: felix-ceilings server not ready", ErrPeerUnavailable)
}

// Client runs one felix-ceilings client (relay or echo) against server with args and
// returns its Result, checked like a Felix run: its books must balance (Account; the
// client checks every record's sequence itself and fails on a lost one) and a run that
// moved no more than the send window carries the warning, or fails with ErrTooSmall
// under Settings.RefuseSmall.
func (c *Ceilings) Client(ctx context.Context, sub string, s Settings, server *PeerProc, args ...string) (Result, error) {
	s.defaults()
	all := append([]string{sub, "--addr", server.Addr, "--fingerprint", server.Fingerprint,
		"--warmup", s.Warmup.String(), "--duration", s.Duration.String(), "--drain", s.Drain.String()}, args...)
	res, err := runTool(ctx, c.Bin, all, server)
	if err != nil {
		return Result{}, fmt.Errorf("felix-ceilings %w", err)
	}
	res.Settings = s
	if err := Account(res.Shape.Name, res.System+" client", res.Sent, res.Delivered, 0); err != nil {
		return Result{}, err
	}
	n := int64(res.RecordsPerSec*res.Elapsed.Seconds() + 0.5)
	res.Warnings = nil
	if err := res.finish(n, n*int64(res.Shape.Payload)); err != nil {
		return Result{}, err
	}
	return res, nil
}

// runTool runs bin with args (a felix-peers or felix-ceilings client), reads its stdout's
// JSON lines and returns the result line. A {"mark":"start"} / {"mark":"end"} line is the
// client's measured phase: server's CPU is taken between the two marks (without marks:
// over the whole client run) and its RSS at the end. Errors: the tool's exit status with
// its stderr, or no result line.
func runTool(ctx context.Context, bin string, args []string, server *PeerProc) (Result, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	sm := serverMarks{server: server}
	sm.sample("run")
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("%s: %v", args[0], err)
	}
	var res Result
	var lines []string
	found := false
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m struct {
			Mark string `json:"mark"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.Mark != "" {
			sm.sample(m.Mark)
			continue
		}
		lines = append(lines, sc.Text())
		if json.Unmarshal(sc.Bytes(), &res) == nil && res.System != "" {
			found = true
		}
	}
	if err := cmd.Wait(); err != nil {
		return Result{}, fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	if !found {
		return Result{}, fmt.Errorf("%s: no result line in %q", args[0], strings.Join(lines, "\n"))
	}
	sm.sample("exit")
	sm.fill(&res)
	return res, nil
}

// serverMarks samples a server process's usage at the client's marks.
type serverMarks struct {
	server *PeerProc
	at     map[string]time.Time
	usage  map[string]ProcUsage
}

func (m *serverMarks) sample(mark string) {
	if m.server == nil {
		return
	}
	if m.at == nil {
		m.at, m.usage = map[string]time.Time{}, map[string]ProcUsage{}
	}
	if u, err := ReadProcUsage(m.server.PID); err == nil {
		m.at[mark], m.usage[mark] = time.Now(), u
	}
}

// fill sets res's server CPU (cores) between the marks, or over the run, and its RSS.
func (m *serverMarks) fill(res *Result) {
	from, to := "start", "end"
	if _, ok := m.at[from]; !ok {
		from = "run"
	}
	if _, ok := m.at[to]; !ok {
		to = "exit"
	}
	t0, ok0 := m.at[from]
	t1, ok1 := m.at[to]
	if !ok0 || !ok1 || !t1.After(t0) {
		return
	}
	res.BrokerCPUCores = (m.usage[to].CPU - m.usage[from].CPU).Seconds() / t1.Sub(t0).Seconds()
	if u, ok := m.usage["exit"]; ok {
		res.BrokerRSS = u.RSS
	}
}

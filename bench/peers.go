package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrPeerUnavailable is wrapped when a peer cannot be run here (no redis-server and no
// way to install it, the peers module does not build); the comparison skips that peer
// and says why.
var ErrPeerUnavailable = errors.New("bench: peer unavailable")

// BuildPeers compiles bench/peers/cmd/felix-peers (its own Go module, so the broker's
// go.mod stays free of NATS and Redis) into outDir. Errors wrap ErrPeerUnavailable.
func BuildPeers(ctx context.Context, repoRoot, outDir string) (string, error) {
	bin := filepath.Join(outDir, "felix-peers")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/felix-peers")
	cmd.Dir = filepath.Join(repoRoot, "bench", "peers")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go build bench/peers/cmd/felix-peers: %v\n%s", ErrPeerUnavailable, err, out.String())
	}
	return bin, nil
}

// EnsureRedis returns the path of redis-server, installing the Debian package
// redis-server with apt-get when it is missing and this process is root with apt-get
// available. Errors wrap ErrPeerUnavailable and say why.
func EnsureRedis(ctx context.Context, log io.Writer) (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: redis-server is not installed and this is not root (apt-get install -y redis-server)", ErrPeerUnavailable)
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return "", fmt.Errorf("%w: redis-server is not installed and apt-get is missing", ErrPeerUnavailable)
	}
	install := func() error {
		cmd := exec.CommandContext(ctx, apt, "install", "-y", "redis-server")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		return cmd.Run()
	}
	if install() != nil {
		upd := exec.CommandContext(ctx, apt, "update")
		upd.Stdout, upd.Stderr = log, log
		_ = upd.Run()
		if err := install(); err != nil {
			return "", fmt.Errorf("%w: apt-get install -y redis-server: %v", ErrPeerUnavailable, err)
		}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("%w: redis-server not found after installing it", ErrPeerUnavailable)
	}
	return p, nil
}

// PeerProc is a peer server process the harness started.
type PeerProc struct {
	// Addr is how clients reach it: a nats:// URL or host:port.
	Addr string
	// PID is the server's process id (its CPU and RSS are read like the broker's).
	PID int
	// Fingerprint is the server certificate's SHA-256 (hex) for a TLS server (the QUIC
	// ceilings), "" otherwise.
	Fingerprint string
	cmd         *exec.Cmd
	exited      chan struct{}
	dir         string // removed by Stop ("" = none)
}

// Stop sends SIGTERM, then kills after 10 s, and removes the server's store.
func (p *PeerProc) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// Peers runs the peers' servers and client workloads.
type Peers struct {
	// Bin is the felix-peers executable (BuildPeers).
	Bin string
	// WorkDir holds the JetStream stores.
	WorkDir string
	// Log receives the peers' server output.
	Log io.Writer
}

func (p *Peers) log() io.Writer {
	if p.Log == nil {
		return io.Discard
	}
	return p.Log
}

func start(cmd *exec.Cmd) (*PeerProc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pp := &PeerProc{cmd: cmd, exited: make(chan struct{}), PID: cmd.Process.Pid}
	go func() { _ = cmd.Wait(); close(pp.exited) }()
	return pp, nil
}

// StartNATS starts the embedded NATS server with JetStream on file storage; sync is
// "default" (JetStream's periodic sync, acked before disk) or "always" (sync_interval:
// always, one fsync per write).
func (p *Peers) StartNATS(ctx context.Context, sync string) (*PeerProc, error) {
	dir := filepath.Join(p.WorkDir, "nats-"+sync)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ready := filepath.Join(dir, "ready.json")
	_ = os.Remove(ready)
	cmd := exec.Command(p.Bin, "nats-server", "--store", filepath.Join(dir, "store"), "--sync", sync, "--ready", ready)
	cmd.Stdout, cmd.Stderr = p.log(), p.log()
	pp, err := start(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
	}
	pp.dir = dir
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if b, err := os.ReadFile(ready); err == nil {
			var r struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(b, &r) == nil && r.URL != "" {
				pp.Addr = r.URL
				return pp, nil
			}
		}
		select {
		case <-pp.exited:
			return nil, fmt.Errorf("%w: nats-server exited before ready", ErrPeerUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pp.Stop()
	return nil, fmt.Errorf("%w: nats-server not ready", ErrPeerUnavailable)
}

// StartRedis starts redis-server (EnsureRedis) on a free loopback port, without
// persistence (the cache shapes compare in-memory answers).
func (p *Peers) StartRedis(ctx context.Context) (*PeerProc, error) {
	bin, err := EnsureRedis(ctx, p.log())
	if err != nil {
		return nil, err
	}
	port, err := freeTCPPort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--protected-mode", "yes", "--dir", p.WorkDir)
	cmd.Stdout, cmd.Stderr = p.log(), p.log()
	pp, err := start(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPeerUnavailable, err)
	}
	pp.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", pp.Addr); err == nil {
			c.Close()
			return pp, nil
		}
		select {
		case <-pp.exited:
			return nil, fmt.Errorf("%w: redis-server exited at start", ErrPeerUnavailable)
		case <-time.After(20 * time.Millisecond):
		}
	}
	pp.Stop()
	return nil, fmt.Errorf("%w: redis-server not accepting connections", ErrPeerUnavailable)
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Client runs one felix-peers client subcommand (js-publish, js-async, nats-pubsub,
// redis) with args and returns its Result (System names the peer and its settings). The
// run's warm-up and duration come from s. server, when set, is sampled for CPU and RSS
// over the client's measured phase (runTool). Errors: the subcommand's own (an
// unaccounted message fails it).
func (p *Peers) Client(ctx context.Context, sub string, s Settings, server *PeerProc, args ...string) (Result, error) {
	s.defaults()
	all := append([]string{sub, "--warmup", s.Warmup.String(), "--duration", s.Duration.String(), "--drain", s.Drain.String()}, args...)
	res, err := runTool(ctx, p.Bin, all, server)
	if err != nil {
		return Result{}, fmt.Errorf("felix-peers %w", err)
	}
	res.Settings = s
	return res, nil
}

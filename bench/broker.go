package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"felix/client"
)

// ErrBroker is wrapped by every failure to build, start or stop the broker process.
var ErrBroker = errors.New("bench: broker")

// RepoRoot walks up from dir to the directory holding go.mod of module felix.
// Errors: ErrBroker when none is found.
func RepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module felix\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("%w: no go.mod of module felix above %s", ErrBroker, dir)
		}
		d = parent
	}
}

// BuildBroker compiles ./cmd/felix-broker of the repository at repoRoot into outDir and
// returns the binary's path. Errors wrap ErrBroker with the compiler's output.
func BuildBroker(ctx context.Context, repoRoot, outDir string) (string, error) {
	bin := filepath.Join(outDir, "felix-broker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/felix-broker")
	cmd.Dir = repoRoot
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go build ./cmd/felix-broker: %v\n%s", ErrBroker, err, out.String())
	}
	return bin, nil
}

// BrokerOptions start one broker process (docs/operations.md, "Configuration"). It always
// binds 127.0.0.1 with random ports and reads the bound addresses from its ready file.
type BrokerOptions struct {
	// Binary is the felix-broker executable (BuildBroker).
	Binary string
	// DataDir is the data directory (created; the caller removes it).
	DataDir string
	// FsyncMode is FELIX_DURABLE_FSYNC_MODE: on_commit, periodic or none ("" = broker default).
	FsyncMode string
	// FsyncIntervalMs is FELIX_DURABLE_FSYNC_INTERVAL_MS for periodic (0 = broker default 250).
	FsyncIntervalMs int
	// Cores is FELIX_CORE_SHARDS (0 = one per CPU).
	Cores int
	// Env holds further FELIX_* settings ("K=V").
	Env []string
	// Log receives the broker's output (nil = kept in memory and shown on a failed start).
	Log io.Writer
}

// Broker is a running felix-broker process.
type Broker struct {
	// Addr is the QUIC address (127.0.0.1:port), HTTPAddr the admin/ops HTTP address.
	Addr, HTTPAddr string
	// Fingerprint pins the broker's self-signed certificate.
	Fingerprint string
	// Token is the admin token of tenant "default".
	Token string
	// PID is the broker's process id.
	PID int

	cmd    *exec.Cmd
	exited chan struct{}
	logs   *syncWriter
}

type readyFile struct {
	QUICAddr       string `json:"quic_addr"`
	HTTPAddr       string `json:"http_addr"`
	Fingerprint    string `json:"fingerprint"`
	AdminTokenFile string `json:"admin_token_file"`
	PID            int    `json:"pid"`
}

// StartBroker starts the broker and waits (bounded by ctx and 60 s) for its ready file.
// Errors wrap ErrBroker and carry the broker's output.
func StartBroker(ctx context.Context, o BrokerOptions) (*Broker, error) {
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBroker, err)
	}
	ready := filepath.Join(o.DataDir, "..", filepath.Base(o.DataDir)+".ready.json")
	_ = os.Remove(ready)
	cmd := exec.Command(o.Binary)
	env := append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR="+o.DataDir, "FELIX_READY_FILE="+ready,
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_LOG_LEVEL=warn")
	if o.FsyncMode != "" {
		env = append(env, "FELIX_DURABLE_FSYNC_MODE="+o.FsyncMode)
	}
	if o.FsyncIntervalMs > 0 {
		env = append(env, "FELIX_DURABLE_FSYNC_INTERVAL_MS="+strconv.Itoa(o.FsyncIntervalMs))
	}
	if o.Cores > 0 {
		env = append(env, "FELIX_CORE_SHARDS="+strconv.Itoa(o.Cores))
	}
	cmd.Env = append(env, o.Env...)
	b := &Broker{cmd: cmd, exited: make(chan struct{}), logs: &syncWriter{w: &bytes.Buffer{}}}
	var w io.Writer = b.logs
	if o.Log != nil {
		w = io.MultiWriter(w, o.Log)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start %s: %v", ErrBroker, o.Binary, err)
	}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(ready); err == nil {
			var r readyFile
			if json.Unmarshal(data, &r) == nil && r.QUICAddr != "" {
				tokPath := r.AdminTokenFile
				if !filepath.IsAbs(tokPath) {
					tokPath = filepath.Join(o.DataDir, filepath.Base(tokPath))
				}
				tok, err := os.ReadFile(tokPath)
				if err != nil {
					b.Stop()
					return nil, fmt.Errorf("%w: admin token: %v", ErrBroker, err)
				}
				b.Addr, b.HTTPAddr, b.Fingerprint, b.PID = r.QUICAddr, r.HTTPAddr, r.Fingerprint, cmd.Process.Pid
				b.Token = strings.TrimSpace(string(tok))
				return b, nil
			}
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("%w: exited before ready:\n%s", ErrBroker, b.Logs())
		case <-ctx.Done():
			b.Stop()
			return nil, fmt.Errorf("%w: %v", ErrBroker, ctx.Err())
		case <-deadline.C:
			b.Stop()
			return nil, fmt.Errorf("%w: not ready after 60 s:\n%s", ErrBroker, b.Logs())
		case <-tick.C:
		}
	}
}

// Logs returns what the broker printed so far.
func (b *Broker) Logs() string {
	return b.logs.String()
}

// Stop sends SIGTERM and waits up to 10 s for the drain, then kills the process.
func (b *Broker) Stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// Dial connects an SDK client to the broker as the admin of tenant "default", pinned
// to its certificate. conns is the SDK's connection pool size (0 = SDK default).
func (b *Broker) Dial(ctx context.Context, conns int, opts ...client.Option) (*client.Client, error) {
	all := []client.Option{client.WithTenant("default"), client.WithToken(b.Token), client.WithFingerprint(b.Fingerprint)}
	if conns > 0 {
		all = append(all, client.WithConnPool(conns))
	}
	return client.Dial(ctx, b.Addr, append(all, opts...)...)
}

// Admin returns an admin API client for tenant "default", namespace "default".
func (b *Broker) Admin() (*client.Admin, error) {
	return client.NewAdmin(b.HTTPAddr, client.AdminToken(b.Token), client.AdminTenant("default"))
}

// Usage reads the broker's CPU time and resident memory.
func (b *Broker) Usage() (ProcUsage, error) { return ReadProcUsage(b.PID) }

// ProcUsage is a process's CPU time (user+system) and resident set size.
type ProcUsage struct {
	CPU time.Duration
	RSS int64 // bytes
}

// ReadProcUsage reads /proc/<pid>/stat (utime, stime in clock ticks of 1/100 s) and
// /proc/<pid>/status (VmRSS). Errors: the read or parse failure.
func ReadProcUsage(pid int) (ProcUsage, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	cpu, err := ParseProcStatCPU(stat)
	if err != nil {
		return ProcUsage{}, fmt.Errorf("bench: /proc/%d/stat: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ProcUsage{}, err
	}
	return ProcUsage{CPU: cpu, RSS: ParseVmRSS(status)}, nil
}

// ErrProcFormat is wrapped when a /proc file does not have the expected layout.
var ErrProcFormat = errors.New("unexpected /proc format")

// ParseProcStatCPU returns utime+stime of a /proc/<pid>/stat line (fields 14 and 15, in
// ticks of 10 ms, counted after the parenthesised command name, which may hold spaces).
// Errors: ErrProcFormat.
func ParseProcStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: no command name", ErrProcFormat)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: %d fields after the command name", ErrProcFormat, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 || ut > math.MaxInt64/2/int64(10*time.Millisecond) || st > math.MaxInt64/2/int64(10*time.Millisecond) {
		return 0, fmt.Errorf("%w: bad utime/stime %q %q", ErrProcFormat, f[11], f[12])
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// ParseVmRSS returns the VmRSS line of a /proc/<pid>/status file in bytes (0 when absent
// or malformed).
func ParseVmRSS(status []byte) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil && kb >= 0 && kb < 1<<43 {
				return kb << 10
			}
		}
	}
	return 0
}

package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"felix/client"
	"felix/testbed/supervisor"
)

// Broker is one felix-broker of a scenario, run by the Env's supervisor on fixed
// 127.0.0.1 ports (FreePort: restarts find the same address) with a fixed certificate
// (WriteCert: the pinned fingerprint survives restarts) and its data in Dir/<name>/data.
// It is a KillTarget. Its methods are safe for concurrent use.
type Broker struct {
	Name     string // the supervisor's process name (its log: Dir/logs/<name>.log)
	QUICAddr string // 127.0.0.1:port, UDP
	HTTPAddr string // 127.0.0.1:port, TCP: /ready, /metrics, the admin API
	DataDir  string // FELIX_DURABLE_STORAGE_DIR
	Cert     Cert   // the broker's TLS certificate
	Token    string // the admin token the broker wrote at its first start

	sup   *supervisor.Supervisor
	mu    sync.Mutex
	proc  *supervisor.Process
	kills int
}

// BrokerReadyWait bounds each start of a broker until its ready file names it.
const BrokerReadyWait = time.Minute

// StartBroker starts broker name (letters, digits, '-') in env and waits for it to be
// ready. extraEnv ("K=V") is added to the broker's environment after the defaults: two
// engine cores, warn logs, 16 KiB segments (so the load crosses segment rollovers), a
// 10 s SIGTERM drain budget. Errors: no free port, the certificate, the supervisor's
// Start error (quoting the broker's last output), an unreadable admin token.
func StartBroker(ctx context.Context, env *Env, name string, extraEnv ...string) (*Broker, error) {
	dir := filepath.Join(env.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	cert, err := WriteCert(dir)
	if err != nil {
		return nil, fmt.Errorf("scenario: broker %s certificate: %w", name, err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	b := &Broker{Name: name, QUICAddr: addr, HTTPAddr: addr, DataDir: filepath.Join(dir, "data"), Cert: cert, sup: env.Supervisor}
	ready := filepath.Join(dir, "ready.json")
	spec := supervisor.Spec{Name: name, Path: env.Bins.Broker, Dir: dir,
		Env: append([]string{"FELIX_QUIC_BIND=" + addr, "FELIX_BROKER_METRICS_BIND=" + addr,
			"FELIX_DURABLE_STORAGE_DIR=" + b.DataDir, "FELIX_READY_FILE=" + ready,
			"FELIX_TLS_CERT=" + cert.CertFile, "FELIX_TLS_KEY=" + cert.KeyFile,
			"FELIX_LOG_LEVEL=warn", "FELIX_CORE_SHARDS=2", "FELIX_DURABLE_SEGMENT_BYTES=16384",
			"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=10000"}, extraEnv...),
		Ready: supervisor.Ready{File: ready, Timeout: BrokerReadyWait}}
	p, err := env.Supervisor.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	b.proc = p
	tok, err := os.ReadFile(filepath.Join(b.DataDir, "admin.token"))
	if err != nil {
		return nil, fmt.Errorf("scenario: broker %s admin token: %w", name, err)
	}
	b.Token = strings.TrimSpace(string(tok))
	return b, nil
}

// Process returns the broker's current run.
func (b *Broker) Process() *supervisor.Process {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.proc
}

// Kill SIGKILLs the running broker and returns once it is reaped. Errors: ctx's.
func (b *Broker) Kill(ctx context.Context) error {
	p := b.Process()
	if _, err := p.Kill(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	b.kills++
	b.mu.Unlock()
	return nil
}

// Restart starts the next run of the broker (same ports, certificate and data) once the
// previous one exited, and waits for it to be ready. Errors: supervisor.ErrRunning, the
// start's error.
func (b *Broker) Restart(ctx context.Context) error {
	p, err := b.sup.Restart(ctx, b.Process(), nil)
	if p != nil {
		b.mu.Lock()
		b.proc = p
		b.mu.Unlock()
	}
	return err
}

// Terminate sends SIGTERM and waits up to drain for a clean exit (supervisor's
// Process.Terminate: SIGKILL and ErrDrainTimeout after drain).
func (b *Broker) Terminate(ctx context.Context, drain time.Duration) (supervisor.ExitStatus, error) {
	return b.Process().Terminate(ctx, drain)
}

// Dial connects an SDK client: the pinned certificate, the admin token, reconnect backoff
// 20 ms to 300 ms, and maxAttempts sends per request (client.WithMaxAttempts; 1 makes
// every lost answer ErrIndeterminate, never a silent re-send). opts come after. ctx
// bounds the first connection (at most 30 s). Errors: client.Dial's.
func (b *Broker) Dial(ctx context.Context, maxAttempts int, opts ...client.Option) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	all := append([]client.Option{client.WithFingerprint(b.Cert.Fingerprint), client.WithToken(b.Token),
		client.WithMaxAttempts(maxAttempts), client.WithReconnectBackoff(20*time.Millisecond, 300*time.Millisecond)}, opts...)
	return client.Dial(dctx, b.QUICAddr, all...)
}

// Admin returns an admin API client with the admin token. Errors: client.NewAdmin's.
func (b *Broker) Admin() (*client.Admin, error) {
	return client.NewAdmin(b.HTTPAddr, client.AdminToken(b.Token))
}

// Kills is how many SIGKILLs Kill delivered.
func (b *Broker) Kills() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.kills
}

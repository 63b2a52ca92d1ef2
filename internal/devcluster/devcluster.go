package devcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"felix/auth"
)

// Config is one local cluster (the flags of `felix dev cluster`). Zero fields take the
// defaults: DefaultBrokers, DefaultControlPlanes, min(DefaultReplicationFactor, Brokers),
// DefaultBasePort, DefaultDataDir, DefaultReadyTimeout, DefaultStopTimeout.
type Config struct {
	Brokers, ControlPlanes int
	// ReplicationFactor is recorded in the layout (the CLI's FELIX_REPLICATION_FACTOR): the
	// control plane has no default replication factor of its own (it is 1), so the cluster
	// passes it to nothing; `felix cluster stream create` uses it.
	ReplicationFactor int
	BasePort          int
	DataDir           string
	// BinDir holds felix-controlplane and felix-broker; a program missing there (or every
	// program, when BinDir is "") is looked up in PATH.
	BinDir string
	// Env is added to every child's environment after the inherited one (the layout's
	// settings still win), e.g. FELIX_CORE_SHARDS=1 in tests.
	Env          []string
	ReadyTimeout time.Duration // bound of Start's wait for every child
	StopTimeout  time.Duration // SIGTERM → SIGKILL bound of Stop, per child
	// Log receives one line per start, readiness and exit; nil discards them.
	Log io.Writer
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Brokers, DefaultBrokers)
	def(&c.ControlPlanes, DefaultControlPlanes)
	def(&c.ReplicationFactor, min(DefaultReplicationFactor, c.Brokers))
	def(&c.BasePort, DefaultBasePort)
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Cluster is a running local cluster (Start). Its methods are safe for concurrent use.
type Cluster struct {
	Layout Layout
	cfg    Config
	lock   *os.File // Dir/LOCK, flocked while the cluster runs
	mu     sync.Mutex
	procs  []*proc
	exits  chan Exit
}

// Exit is a child that exited while the cluster ran (not through Stop).
type Exit struct {
	Node Node
	Err  error // the exit status (nil: exit 0)
	Tail string
}

// ErrPortInUse is Start's error when a port of the layout cannot be bound: a child would
// fail to bind it, and its /ready might be answered by whatever holds the port.
var ErrPortInUse = errors.New("devcluster: a port of the layout is in use")

// ErrBusy is Start's error when another `felix dev cluster` runs on the same data dir.
var ErrBusy = errors.New("devcluster: another cluster runs on this data dir")

// Start starts the members, waits until each answers /ready, makes sure the tenant and
// namespace "default" exist, gives the brokers the control plane's signing key of tenant
// default (shareTenantKeys), starts the brokers and waits until all are ready, bounded
// by Config.ReadyTimeout. A child that exits before it
// is ready, or is not ready in time, fails Start with an *StartError naming it with the
// tail of its log; the children already started are stopped. Other errors: the layout's,
// ErrBusy, ErrPortInUse, a missing program, file errors.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	l, err := cfg.Layout()
	if err != nil {
		return nil, err
	}
	bins := map[Kind]string{}
	for _, k := range []Kind{KindControlPlane, KindBroker} {
		if bins[k], err = findProgram(cfg.BinDir, string(k)); err != nil {
			return nil, err
		}
	}
	c := &Cluster{Layout: l, cfg: cfg, exits: make(chan Exit, len(l.Nodes()))}
	if c.lock, err = lockDir(l.Dir); err != nil {
		return nil, err
	}
	if port, ok := busyPort(l.Ports()); !ok {
		c.lock.Close()
		return nil, fmt.Errorf("%w: 127.0.0.1:%d (another cluster on base port %d? choose another --base-port)", ErrPortInUse, port, cfg.BasePort)
	}
	if err := c.start(ctx, bins); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context, bins map[Kind]string) error {
	l := c.Layout
	if err := shareControlPlaneToken(l); err != nil {
		return err
	}
	deadline := time.Now().Add(c.cfg.ReadyTimeout)
	if err := c.startAll(ctx, bins, l.ControlPlanes, deadline); err != nil {
		return err
	}
	if err := ensureDefaultCatalog(ctx, l, deadline); err != nil {
		return err
	}
	if err := shareTenantKeys(ctx, l, deadline); err != nil {
		return err
	}
	return c.startAll(ctx, bins, l.Brokers, deadline)
}

// startAll starts nodes and waits until each is ready.
func (c *Cluster) startAll(ctx context.Context, bins map[Kind]string, nodes []Node, deadline time.Time) error {
	var started []*proc
	for _, n := range nodes {
		p, err := c.launch(bins[n.Kind], n)
		if err != nil {
			return err
		}
		started = append(started, p)
	}
	for _, p := range started {
		if err := p.waitReady(ctx, deadline); err != nil {
			return err
		}
		fmt.Fprintf(c.cfg.Log, "%s ready (pid %d)\n", p.node.Name, p.cmd.Process.Pid)
	}
	return nil
}

// findProgram is dir/name when it is an executable file, else name in PATH.
func findProgram(dir, name string) (string, error) {
	if dir != "" {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("devcluster: %s not found in %q nor in PATH (make build puts it in bin/): %w", name, dir, err)
	}
	return filepath.Abs(p)
}

// lockDir creates dir and takes dir/LOCK (flock, non-blocking): ErrBusy when held.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devcluster: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (%s): %v", ErrBusy, dir, err)
	}
	return f, nil
}

// memberSecrets are the files every member of a group must hold the same copy of: the
// admin token and the tenant-key secret the tenants' signing keys derive from
// (docs/controlplane.md).
var memberSecrets = []string{"admin-token", "tenant-key-secret"}

// shareControlPlaneToken gives every member the same copy of each memberSecrets file: an
// existing member's, else a new random one (32 bytes, hex, mode 0600, the control
// plane's own format).
func shareControlPlaneToken(l Layout) error {
	for _, name := range memberSecrets {
		var secret []byte
		for _, n := range l.ControlPlanes {
			if data, err := os.ReadFile(filepath.Join(n.Dir, name)); err == nil && len(data) > 0 {
				secret = data
				break
			}
		}
		if secret == nil {
			b := make([]byte, 32)
			if _, err := rand.Read(b); err != nil {
				return err
			}
			secret = []byte(hex.EncodeToString(b) + "\n")
		}
		for _, n := range l.ControlPlanes {
			if err := writeIfMissing(filepath.Join(n.Dir, name), secret); err != nil {
				return err
			}
		}
	}
	return nil
}

// shareTenantKeys gives every broker that has no key store (auth/keys.json) a copy of
// cp1's, which holds tenant default's signing key derived from the group's
// tenant-key-secret (asked for through GET /v1/tenants/default/jwks, retried until the
// deadline while cp1 has not applied the tenant yet). A broker in cluster mode verifies
// its clients' tokens with the control plane's JWKS and its admin API's with its own key
// store; with the same key in both, the admin.token each broker writes serves the CLI for
// both, on every broker.
func shareTenantKeys(ctx context.Context, l Layout, deadline time.Time) error {
	cp := l.ControlPlanes[0]
	if err := getUntil(ctx, cp.AdminURL()+"/v1/tenants/default/jwks", deadline); err != nil {
		return fmt.Errorf("devcluster: tenant default's keys on %s: %w", cp.Name, err)
	}
	keys, err := os.ReadFile(auth.KeyStorePath(cp.Dir))
	if err != nil {
		return fmt.Errorf("devcluster: %s's tenant keys: %w", cp.Name, err)
	}
	for _, n := range l.Brokers {
		if err := writeIfMissing(auth.KeyStorePath(n.Dir), keys); err != nil {
			return err
		}
	}
	return nil
}

// writeIfMissing writes data to path (0600, its directory 0700) unless path exists.
func writeIfMissing(path string, data []byte) error {
	if _, err := os.Stat(path); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("devcluster: %w", err)
	}
	return nil
}

// Exits delivers each child that exits while the cluster runs (not through Stop).
func (c *Cluster) Exits() <-chan Exit { return c.exits }

// Running are the nodes whose process runs.
func (c *Cluster) Running() []Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Node
	for _, p := range c.procs {
		if !p.exited() {
			out = append(out, p.node)
		}
	}
	return out
}

// Stop stops every child: the brokers first (each drains, its last heartbeat reaching
// the control plane), then the members; each gets SIGTERM and, if it has not exited
// within Config.StopTimeout, SIGKILL. It waits for every process, removes the pid files
// and releases the data dir. The error names each child that needed SIGKILL or exited
// with a failure after SIGTERM (a child that had already exited is not counted).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	procs := append([]*proc(nil), c.procs...)
	c.mu.Unlock()
	var errs []error
	for _, kind := range []Kind{KindBroker, KindControlPlane} {
		var wg sync.WaitGroup
		results := make([]error, len(procs))
		for i, p := range procs {
			if p.node.Kind != kind {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); results[i] = p.stop(c.cfg.StopTimeout) }()
		}
		wg.Wait()
		errs = append(errs, results...)
	}
	if c.lock != nil {
		c.lock.Close() // releases the flock
		c.lock = nil
	}
	return errors.Join(errs...)
}

// pidString is a pid file's contents.
func pidString(pid int) []byte { return []byte(strconv.Itoa(pid) + "\n") }

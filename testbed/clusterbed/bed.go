// Package clusterbed starts a whole Felix cluster as supervised processes on 127.0.0.1 for
// process tests: a control plane of 1, 3 or 5 felix-controlplane members (one Raft group)
// and felix-broker processes in cluster mode (FELIX_CONTROLPLANE_URL naming every member),
// on free ports, with one pinned self-signed certificate, one control-plane admin token, and
// each process's log kept by testbed/supervisor (printed when the test fails). It kills,
// restarts and pauses members and brokers, finds the Raft leader, reads the control plane's
// placement and each broker's ownership table, and dials SDK clients.
//
// Brokers run with FELIX_AUTH=off (the clients' tokens are not what these tests examine) and
// forward admin writes to the control plane with its admin token file. docs/cluster-testing.md,
// "Cluster test bed".
package clusterbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/testbed/scenario"
	"felix/testbed/supervisor"
)

// Config is what Start starts. ControlPlaneBin and BrokerBin are required (built once by
// the test package's TestMain, scenario.MainWithCommands).
type Config struct {
	ControlPlaneBin, BrokerBin string
	Members, Brokers           int      // default 3 and 3
	MemberEnv, BrokerEnv       []string // extra "K=V" for every member / broker
	// HeartbeatMS is the brokers' heartbeat interval (default 250); SuspectMS and DownMS
	// the control plane's failure detection (default 750 and 1500).
	HeartbeatMS, SuspectMS, DownMS int
	// AutoFailover runs the control plane's placement loop (FELIX_CONTROLPLANE_AUTO_FAILOVER=on).
	AutoFailover bool
	ReadyTimeout time.Duration // each process's start bound (default 60 s)
}

// Member is one control-plane member: REST, Raft and metrics addresses, data dir, and its
// current run.
type Member struct {
	ID, REST, Raft, Metrics, Dir string
	Proc                         *supervisor.Process
}

// URL is the member's REST base URL.
func (m *Member) URL() string { return "http://" + m.REST }

// Broker is one broker: client QUIC and ops/admin HTTP on Addr (the same port number), the
// internal transport on Internal, its data dir, and its current run.
type Broker struct {
	ID, Addr, Internal, Dir string
	Proc                    *supervisor.Process
}

// OpsURL is the broker's admin and ops HTTP base URL.
func (b *Broker) OpsURL() string { return "http://" + b.Addr }

// Bed is a running cluster. Its methods are for one test goroutine unless they say otherwise.
type Bed struct {
	t       testing.TB
	cfg     Config
	Sup     *supervisor.Supervisor
	Root    string
	Cert    scenario.Cert
	Token   string // the control plane's admin token
	Members []*Member
	Brokers []*Broker

	mu   sync.Mutex
	peak map[string]int64 // node id → peak RSS over its runs so far
}

func (c Config) withDefaults() Config {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Members, 3)
	def(&c.Brokers, 3)
	def(&c.HeartbeatMS, 250)
	def(&c.SuspectMS, 750)
	def(&c.DownMS, 1500)
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = time.Minute
	}
	return c
}

// Start starts the members, waits for a Raft leader, then starts the brokers and waits for
// each one's ready file. Failures end the test (t.Fatal); everything is stopped at cleanup.
func Start(ctx context.Context, t testing.TB, cfg Config) *Bed {
	t.Helper()
	cfg = cfg.withDefaults()
	b := &Bed{t: t, cfg: cfg, Sup: supervisor.NewForTest(t), Root: t.TempDir()}
	var err error
	if b.Cert, err = scenario.WriteCert(b.Root); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		t.Fatal(err)
	}
	b.Token = hex.EncodeToString(tok)
	b.startMembers(ctx)
	if _, err := b.WaitLeader(ctx, cfg.ReadyTimeout); err != nil {
		t.Fatal(err)
	}
	for i := range cfg.Brokers {
		b.startBroker(ctx, i)
	}
	return b
}

// freeAddr is a 127.0.0.1 address whose port was free for UDP and TCP a moment ago.
func (b *Bed) freeAddr() string {
	b.t.Helper()
	p, err := scenario.FreePort()
	if err != nil {
		b.t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

func (b *Bed) startMembers(ctx context.Context) {
	b.t.Helper()
	var peers, urls []string
	for i := 1; i <= b.cfg.Members; i++ {
		m := &Member{ID: fmt.Sprintf("cp%d", i), REST: b.freeAddr(), Raft: b.freeAddr(), Metrics: b.freeAddr(),
			Dir: filepath.Join(b.Root, fmt.Sprintf("cp%d", i))}
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.Dir, "admin-token"), []byte(b.Token+"\n"), 0o600); err != nil {
			b.t.Fatal(err)
		}
		peers, urls = append(peers, m.ID+"@"+m.Raft), append(urls, m.ID+"@"+m.URL())
		b.Members = append(b.Members, m)
	}
	if b.cfg.Members == 1 {
		peers, urls = nil, nil // a group of one bootstraps on its data dir
	}
	for _, m := range b.Members {
		env := []string{"FELIX_CONTROLPLANE_NODE_ID=" + m.ID, "FELIX_CONTROLPLANE_BIND=" + m.REST,
			"FELIX_CONTROLPLANE_RAFT_BIND=" + m.Raft, "FELIX_CONTROLPLANE_METRICS_BIND=" + m.Metrics,
			"FELIX_CONTROLPLANE_DATA_DIR=" + m.Dir, "FELIX_CONTROLPLANE_PEERS=" + strings.Join(peers, ","),
			"FELIX_CONTROLPLANE_PEER_URLS=" + strings.Join(urls, ","),
			"FELIX_CONTROLPLANE_SUSPECT_AFTER_MS=" + strconv.Itoa(b.cfg.SuspectMS),
			"FELIX_CONTROLPLANE_DOWN_AFTER_MS=" + strconv.Itoa(b.cfg.DownMS),
			"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS=" + strconv.Itoa(b.cfg.HeartbeatMS)}
		if b.cfg.AutoFailover {
			env = append(env, "FELIX_CONTROLPLANE_AUTO_FAILOVER=on")
		}
		spec := supervisor.Spec{Name: m.ID, Path: b.cfg.ControlPlaneBin, Dir: b.Root, Env: append(env, b.cfg.MemberEnv...),
			Ready: supervisor.Ready{URL: "http://" + m.Metrics + "/live", Timeout: b.cfg.ReadyTimeout}}
		var err error
		if m.Proc, err = b.Sup.Start(ctx, spec); err != nil {
			b.t.Fatal(err)
		}
	}
}

// ControlPlaneURL is every member's REST URL, comma-separated (FELIX_CONTROLPLANE_URL).
func (b *Bed) ControlPlaneURL() string {
	var urls []string
	for _, m := range b.Members {
		urls = append(urls, m.URL())
	}
	return strings.Join(urls, ",")
}

func (b *Bed) startBroker(ctx context.Context, i int) {
	b.t.Helper()
	br := &Broker{ID: fmt.Sprintf("node-%d.felix", i), Addr: b.freeAddr(), Internal: b.freeAddr(),
		Dir: filepath.Join(b.Root, "broker"+strconv.Itoa(i))}
	readyFile := filepath.Join(br.Dir, "ready.json")
	env := []string{"FELIX_QUIC_BIND=" + br.Addr, "FELIX_BROKER_METRICS_BIND=" + br.Addr, "FELIX_INTERNAL_BIND=" + br.Internal,
		"FELIX_NODE_ID=" + br.ID, "FELIX_CONTROLPLANE_URL=" + b.ControlPlaneURL(),
		"FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE=" + filepath.Join(b.Members[0].Dir, "admin-token"),
		"FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS=" + strconv.Itoa(b.cfg.HeartbeatMS), "FELIX_CONTROLPLANE_SYNC_INTERVAL_MS=200",
		"FELIX_DURABLE_STORAGE_DIR=" + filepath.Join(br.Dir, "data"),
		"FELIX_READY_FILE=" + readyFile, "FELIX_TLS_CERT=" + b.Cert.CertFile, "FELIX_TLS_KEY=" + b.Cert.KeyFile,
		"FELIX_AUTH=off", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000", "FELIX_CLUSTER_PEERS=",
		"FELIX_AUTH_TOKEN=", "FELIX_AUTH_TENANT=", "FELIX_LOG_LEVEL=info"}
	if err := os.MkdirAll(br.Dir, 0o700); err != nil {
		b.t.Fatal(err)
	}
	spec := supervisor.Spec{Name: "broker" + strconv.Itoa(i), Path: b.cfg.BrokerBin, Dir: br.Dir,
		Env: append(env, b.cfg.BrokerEnv...), Ready: supervisor.Ready{File: readyFile, Timeout: b.cfg.ReadyTimeout}}
	var err error
	if br.Proc, err = b.Sup.Start(ctx, spec); err != nil {
		b.t.Fatal(err)
	}
	b.Brokers = append(b.Brokers, br)
}

// Broker is the broker with node id id (nil when none).
func (b *Bed) Broker(id string) *Broker {
	for _, br := range b.Brokers {
		if br.ID == id {
			return br
		}
	}
	return nil
}

// Dial connects an SDK client to broker br with the bed's pinned certificate and the given
// tenant and namespace; opts come after the bed's (they may override them).
func (b *Bed) Dial(ctx context.Context, br *Broker, tenant, namespace string, opts ...client.Option) (*client.Client, error) {
	base := []client.Option{client.WithFingerprint(b.Cert.Fingerprint), client.WithTenant(tenant),
		client.WithNamespace(namespace), client.WithDialTimeout(2 * time.Second)}
	return client.Dial(ctx, br.Addr, append(base, opts...)...)
}

// Command felix-controlplane runs one member of Felix's control plane: the
// state machine of cluster/meta on Raft (cluster/meta/raftnode) behind the
// REST API of cluster/meta/rest (docs/controlplane.md, "REST and the
// command"; issue 17 items 1, 3 and 7; spec/config.md §5, §7, §8).
//
// Configuration is FELIX_CONTROLPLANE_* variables (settings.go;
// --print-config prints each with its source and exits). With no
// FELIX_CONTROLPLANE_PEERS it bootstraps a one-member group on its data dir,
// so `go run ./cmd/felix-controlplane` is a working control plane: REST on
// 127.0.0.1:8443, Raft on 127.0.0.1:8444, /live /ready /metrics on
// 127.0.0.1:8081, data in ./felix-controlplane-data (the admin token in its
// admin-token file, 0600, written on first start).
//
// Exit codes: 0 after a SIGTERM/SIGINT drain, 2 for a bad setting, 1 for a
// startup failure or when the member stopped on a committed entry it cannot
// read (meta.FatalError).
//
// `felix-controlplane admin ...` talks to a running member (admin.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) > 0 && args[0] == "admin" {
		return admin(args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	}
	if printVersion(args, os.Stdout) { // configfile.go
		return 0
	}
	printConfig := false
	for _, a := range args {
		switch a {
		case "--print-config", "-print-config":
			printConfig = true
		case "-h", "--help", "help":
			fmt.Println("usage: felix-controlplane [--print-config] | admin features|brokers|members|placement ...")
			return 0
		default:
			fmt.Fprintf(os.Stderr, "felix-controlplane: unknown argument %q\n", a)
			return 2
		}
	}
	cfg, err := loadConfigFile(os.LookupEnv, os.Environ(), os.Stderr) // configfile.go: FELIX_CONTROLPLANE_CONFIG
	if err != nil {
		fmt.Fprintln(os.Stderr, "felix-controlplane:", err)
		return 2
	}
	if printConfig {
		if cfg.print(os.Stdout) != nil {
			return 1
		}
		return 0
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "felix-controlplane", Output: os.Stderr, Level: hclog.Info})
	m, err := start(cfg, log)
	if err != nil {
		log.Error("startup failed", "err", err)
		return 1
	}
	return m.wait()
}

// member is one running control-plane member.
type member struct {
	cfg      *config
	log      hclog.Logger
	serverID raft.ServerID // NODE_ID/STORAGE_ID
	hasState bool          // the data dir held Raft state at start
	token    string
	keys     *rest.TenantKeys
	node     *raftnode.Node
	running  atomic.Pointer[raftnode.Node] // node, for the listeners started before it
	handler  atomic.Pointer[http.Handler]  // the REST API once Raft runs
	rest     *http.Server
	metrics  *http.Server
	draining atomic.Bool
	done     chan struct{} // closed at drain: ends the member loop
	loopDone chan struct{}
}

// start opens the data dir, its storage identity and admin token, serves
// both listeners (REST answers only GET /v1/identity until Raft runs),
// decides the bootstrap (identity.go) and starts Raft.
func start(cfg *config, log hclog.Logger) (*member, error) {
	m := &member{cfg: cfg, log: log, done: make(chan struct{}), loopDone: make(chan struct{})}
	if err := m.openDataDir(); err != nil {
		return nil, err
	}
	restLn, err := net.Listen("tcp", cfg.bind)
	if err != nil {
		return nil, err
	}
	metricsLn, err := net.Listen("tcp", cfg.metricsBind)
	if err != nil {
		_ = restLn.Close()
		return nil, err
	}
	m.rest = &http.Server{Handler: m.restHandler(), ReadHeaderTimeout: 10 * time.Second}
	m.metrics = &http.Server{Handler: m.opsHandler(), ReadHeaderTimeout: 10 * time.Second}
	go m.serve(m.rest, restLn, "REST")
	go m.serve(m.metrics, metricsLn, "metrics")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	servers, err := m.bootstrapServers(ctx)
	stop()
	if err == nil {
		m.node, err = startNode(cfg, m.serverID, m.level(), servers, log)
	}
	if err != nil {
		_, _ = m.rest.Close(), m.metrics.Close()
		return nil, err
	}
	onHeartbeat, err := m.placementHook()
	if err != nil {
		_, _ = m.rest.Close(), m.metrics.Close()
		return nil, err
	}
	h := http.Handler(rest.New(rest.Config{Node: m.node, Token: m.token, AuthOff: cfg.authOff, MemberURL: m.memberURL,
		Keys: m.keys, ChangesLimit: cfg.changesLimit, Logger: log.Named("rest"),
		OnHeartbeat: onHeartbeat, HeartbeatEntryEvery: rest.DefaultHeartbeatEntryEvery}))
	m.handler.Store(&h)
	m.running.Store(m.node)
	go m.memberLoop(h.(*rest.Handler))
	log.Info("control-plane member started", "node_id", cfg.nodeID, "server_id", string(m.serverID), "rest", restLn.Addr().String(),
		"raft", cfg.raftBind, "metrics", metricsLn.Addr().String(), "data_dir", cfg.dataDir, "bootstrapped", len(servers) > 0)
	return m, nil
}

// openDataDir creates the data dir, reads (or creates) its storage identity
// and admin token, and whether it holds Raft state.
func (m *member) openDataDir() error {
	cfg := m.cfg
	if err := os.MkdirAll(cfg.dataDir, 0o700); err != nil {
		return err
	}
	sid, created, err := raftnode.LoadOrCreateStorageID(cfg.dataDir)
	if err != nil {
		return err
	}
	m.serverID = raftnode.ServerID(cfg.nodeID, sid)
	if m.hasState, err = raftnode.HasState(cfg.dataDir); err != nil {
		return err
	}
	if cfg.level != 0 {
		m.log.Warn("FELIX_TEST_METADATA_LEVEL is set: this member reports a metadata level below its build's (tests only)",
			"level", cfg.level)
	}
	if created {
		m.log.Info("new storage identity: this member is a new Raft server", "server_id", string(m.serverID))
	}
	secret, created, err := rest.LoadOrCreateKeySecret(cfg.dataDir)
	if err != nil {
		return err
	}
	if created {
		m.log.Info("wrote a new tenant-key secret: every member of the group needs the same file", "file",
			cfg.dataDir+"/"+rest.KeySecretFile)
	}
	if m.keys, err = rest.OpenTenantKeys(cfg.dataDir, secret, nil); err != nil {
		return err
	}
	if cfg.authOff {
		m.log.Warn("FELIX_AUTH=off: writes to the control plane need no admin token (never in production)")
		return nil
	}
	t, created, err := rest.LoadOrCreateToken(cfg.dataDir)
	if err != nil {
		return err
	}
	if created {
		m.log.Info("wrote a new admin token", "file", cfg.dataDir+"/"+rest.TokenFile)
	}
	m.token = t
	return nil
}

// restHandler serves the REST API once Raft runs; before, GET /v1/identity
// and 503 for the rest.
func (m *member) restHandler() http.Handler {
	ident := rest.IdentityHandler(m.ownIdentity)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := m.handler.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/v1/identity" {
			ident(w, r)
			return
		}
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"code":"unavailable","message":"the member is starting (learning its peers' identities)"}`, http.StatusServiceUnavailable)
	})
}

// startNode starts Raft as serverID reporting level on a TCP transport,
// bootstrapping servers when not empty (bootstrapServers).
func startNode(cfg *config, serverID raft.ServerID, level meta.Level, servers []raft.Server, log hclog.Logger) (*raftnode.Node, error) {
	tr, err := raft.NewTCPTransportWithLogger(cfg.raftBind, nil, 3, 10*time.Second, log.Named("transport"))
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.raftBind, err)
	}
	if len(cfg.peers) == 0 && len(servers) == 1 {
		servers[0].Address = tr.LocalAddr() // alone: the bound address (a :0 port resolved)
	}
	node, err := raftnode.Start(raftnode.Config{ID: serverID, Dir: cfg.dataDir, Transport: tr, Level: level,
		Bootstrap: servers, Meta: meta.Config{ChangeRetention: cfg.retention}, Logger: log,
		Tune: func(c *raft.Config) {
			c.SnapshotThreshold, c.SnapshotInterval = cfg.snapshotThreshold, cfg.snapshotInterval
		}})
	if err != nil {
		_ = tr.Close()
		return nil, err
	}
	return node, nil
}

// memberURL gives the REST URL of a member by its server id's node id
// (FELIX_CONTROLPLANE_PEER_URLS), or "".
func (m *member) memberURL(id raft.ServerID) string {
	node, _ := raftnode.SplitServerID(id)
	for _, p := range m.cfg.peerURLs {
		if p.id == node {
			return p.addr
		}
	}
	return ""
}

func (m *member) serve(s *http.Server, ln net.Listener, what string) {
	if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		m.log.Error("listener failed", "listener", what, "err", err)
	}
}

// wait runs until SIGTERM/SIGINT (drain, 0) or a fatal entry (1).
func (m *member) wait() int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	select {
	case s := <-sig:
		m.log.Info("draining", "signal", s.String())
		if err := m.drain(); err != nil {
			m.log.Error("drain", "err", err)
			return 1
		}
		return 0
	case <-m.node.Stopped():
		m.log.Error("member stopped on a committed entry it cannot read; exiting", "err", m.node.Err())
		_ = m.drain()
		return 1
	}
}

// drain turns /ready to 503, hands leadership to another voter when there is
// one, stops the REST listener (in-flight requests finish within the drain
// budget) and shuts Raft down.
func (m *member) drain() error {
	m.draining.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.drain)
	defer cancel()
	close(m.done)
	<-m.loopDone
	if voters, err := m.node.Voters(); err == nil && len(voters) > 1 && m.node.Raft.State() == raft.Leader {
		if err := m.node.Raft.LeadershipTransfer().Error(); err != nil {
			m.log.Warn("leadership transfer at drain", "err", err)
		}
	}
	errRest := m.rest.Shutdown(ctx)
	errNode := m.node.Close()
	errMetrics := m.metrics.Shutdown(ctx)
	return errors.Join(errRest, errNode, errMetrics)
}

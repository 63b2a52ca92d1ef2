package broker

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"felix/auth"
	"felix/core"
	"felix/netq"
	"felix/seglog"
)

// Server is one single-node broker: QUIC client role, ops/admin HTTP, catalog, auth and
// the engine. Create with New, run with Run; Run returns after the SIGTERM drain.
type Server struct {
	cfg      *Config
	log      *slog.Logger
	engine   *core.Engine
	svc      shardService // what the session handlers call (service.go): the engine
	catalog  CatalogStore // the file catalog (*Catalog) through its interfaces
	authRes  *auth.BootstrapResult
	listener *netq.Listener
	httpLn   net.Listener
	http     *http.Server
	cert     tls.Certificate
	metrics  *metrics.Set
	m        serverMetrics
	internal *internalTransport // broker-internal transport (internal.go); nil without FELIX_INTERNAL_BIND

	// newStorageID: the start took a new storage id (seglog.BeginRun renewed: an unclean
	// stop under periodic/none), so a damaged tail is cut (core.Config.RepairDamagedTail).
	newStorageID bool

	// cleanIfStartFails: BeginRun marked this run "running" over a clean stop or a fresh
	// dir; a start that fails after it puts the clean stop back (closeAll, issue 23 item 10).
	cleanIfStartFails bool

	storageID seglog.StorageID
	// prevClean: the run-state said the previous run stopped cleanly (core.Config.PreviousRunClean).
	prevClean bool
	dirLock   *os.File // exclusive flock on <data>/LOCK (datalock.go)
	ready     atomic.Bool
	draining  atomic.Bool
	// drainCtx ends when the drain budget is spent; connections then close at once.
	shutdown context.Context
	stop     context.CancelFunc

	global   *netq.ByteBudget // process-wide in-flight publish bytes
	inflight sync.WaitGroup   // publishes handed to the engine, not yet done
	conns    sync.WaitGroup   // connection handlers
	pending  pendingConns     // unauthenticated connections, oldest first (pending.go)
	// clockSkew is added to time.Now by now(): the test seam for token expiry.
	clockSkew atomic.Int64
	// nextConsumer numbers connections as consumer-group consumers.
	nextConsumer atomic.Uint64

	// owners and reconciler keep the engine's open shards at catalog ∩ ownership (seams.go).
	owners         *OwnershipTable
	reconciler     *Reconciler
	stopReconciler func()
	// repl is replication of the shards this node leads or follows (replicate.go).
	repl replication
	// fwd is the cluster's forwarding (forward.go: a static cluster's, or cluster mode's); nil on a single node.
	fwd *forwarding
	// cp is cluster mode (FELIX_CONTROLPLANE_URL, controlplane.go); nil otherwise.
	cp *controlPlane
	// clientAuth verifies client tokens in cluster mode with auth on (controlplane_jwks.go:
	// the control plane's JWKS); nil: authRes.Verifier (clientVerifier).
	clientAuth auth.Verifier
}

// ReadyInfo is the JSON written to FELIX_READY_FILE once the broker is ready (tests, the
// CLI and the SDK read the bound addresses from it).
type ReadyInfo struct {
	QUICAddr       string `json:"quic_addr"`
	HTTPAddr       string `json:"http_addr"`
	Fingerprint    string `json:"fingerprint"`
	AdminTokenFile string `json:"admin_token_file,omitempty"`
	DataDir        string `json:"data_dir"`
	PID            int    `json:"pid"`
	InternalAddr   string `json:"internal_addr,omitempty"` // bound internal listener (FELIX_INTERNAL_BIND set)
	NodeID         string `json:"node_id,omitempty"`       // FELIX_NODE_ID, with InternalAddr
}

// New opens everything the broker needs, in order: data dir and its lock, TLS, the QUIC
// and HTTP listeners (bound before anything is written, so a port in use does not leave the
// run-state "running"), run-state (seglog.BeginRun), auth bootstrap, catalog
// (tenant/namespace "default" on a fresh node), engine with every catalog stream. Nothing is
// served until Run. Errors name the failing step; partial state is closed.
func New(cfg *Config, logger *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, log: logger, metrics: metrics.NewSet()}
	s.m = newServerMetrics(s.metrics)
	s.shutdown, s.stop = context.WithCancel(context.Background())
	if err := s.open(); err != nil {
		s.closeAll()
		return nil, err
	}
	return s, nil
}

func (s *Server) open() error {
	cfg, logger := s.cfg, s.log
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("broker: data dir %s: %w", cfg.DataDir, err)
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	s.dirLock = lock
	// Bind first: a port in use or a bad certificate fails the start before the run-state is
	// marked running, so the next start is not reported unclean.
	if err := s.bindListeners(); err != nil {
		return err
	}
	if err := s.openInternal(); err != nil { // internal.go: only with FELIX_INTERNAL_BIND
		return err
	}
	last, err := seglog.ReadRunState(seglog.OSFS{}, cfg.DataDir)
	if err != nil {
		return fmt.Errorf("broker: run-state: %w", err)
	}
	id, renewed, err := seglog.BeginRun(seglog.OSFS{}, cfg.DataDir, seglogFsync(cfg.FsyncMode), nil)
	if err != nil {
		return fmt.Errorf("broker: run-state: %w", err)
	}
	s.storageID = id
	s.prevClean = last.Found && last.CleanStop
	s.cleanIfStartFails = !last.Found || last.CleanStop
	s.newStorageID = renewed // core.Config.RepairDamagedTail: the seed's torn-tail rule (issue 23)
	if last.Found && !last.CleanStop {
		logger.Warn("previous run did not stop cleanly", "data_dir", cfg.DataDir, "new_storage_id", renewed,
			"fsync", string(cfg.FsyncMode))
	}
	s.authRes, err = auth.Bootstrap(auth.BootstrapOptions{DataDir: cfg.DataDir, Disabled: !cfg.Auth, Logger: logger, Clock: cfg.Clock})
	if err != nil {
		return fmt.Errorf("broker: auth bootstrap: %w", err)
	}
	cat, err := OpenCatalog(cfg.DataDir, nil)
	if err != nil {
		return err
	}
	cat.MaxShards = cfg.MaxShards
	s.catalog = cat
	if err := s.catalog.EnsureNamespace(Namespace{TenantID: auth.DefaultTenant, Namespace: auth.DefaultNamespace, DisplayName: auth.DefaultNamespace}); err != nil {
		return fmt.Errorf("broker: default namespace: %w", err)
	}
	if err := s.openControlPlane(); err != nil { // controlplane.go: its placement before the first pass
		return err
	}
	if err := s.openEngine(); err != nil {
		return err
	}
	s.serveHTTP()
	s.global = netq.NewByteBudget(cfg.PublishInflightBytes)
	s.metrics.NewGauge("felix_broker_connections_active", func() float64 { return float64(s.listener.Active()) })
	s.metrics.NewGauge("felix_broker_connections_refused_total", func() float64 { return float64(s.listener.Refused()) })
	s.metrics.NewGauge("felix_broker_publish_inflight_bytes", func() float64 { return float64(s.global.Used()) })
	s.metrics.NewGauge("felix_broker_ready", func() float64 {
		if s.ready.Load() {
			return 1
		}
		return 0
	})
	return nil
}

func seglogFsync(m FsyncMode) seglog.FsyncMode {
	switch m {
	case FsyncOnCommit:
		return seglog.FsyncOnCommit
	case FsyncNone:
		return seglog.FsyncNone
	}
	return seglog.FsyncPeriodic
}

func (s *Server) openEngine() error {
	fsync := core.FsyncPeriodic
	switch s.cfg.FsyncMode {
	case FsyncOnCommit:
		fsync = core.FsyncOnCommit
	case FsyncNone:
		fsync = core.FsyncNone
	}
	e, err := core.NewEngine(core.Config{
		Clock:                   s.cfg.Clock,
		Cores:                   s.cfg.EngineCores(),
		IOBackend:               s.cfg.IOBackend,
		DataDir:                 s.cfg.DataDir,
		Fsync:                   fsync,
		FsyncInterval:           time.Duration(s.cfg.FsyncIntervalMS) * time.Millisecond,
		SegmentBytes:            s.cfg.SegmentBytes,
		RetentionBytes:          s.cfg.RetentionBytes,
		RetentionAge:            time.Duration(s.cfg.RetentionSeconds) * time.Second,
		RetentionInterval:       time.Duration(s.cfg.RetentionIntervalSeconds) * time.Second,
		SubscriberQueueCapacity: s.cfg.SubscriberQueueCapacity,
		Metrics:                 s.metrics,
		PreviousRunClean:        s.prevClean,
		RepairDamagedTail:       s.newStorageID,
	})
	if err != nil {
		return fmt.Errorf("broker: engine: %w", err)
	}
	s.engine, s.svc = e, e
	return s.openShards() // seams.go: ownership table, reconciler, first pass
}

// bindListeners loads TLS and binds the QUIC and HTTP listeners (nothing is served until Run).
func (s *Server) bindListeners() error {
	// The self-signed certificate is kept in the data dir (netq.SelfSignedFile), so a pinned
	// fingerprint survives restarts; a new one is written once the listeners are bound.
	bc, err := netq.LoadBrokerCertificate(s.cfg.TLSCertFile, s.cfg.TLSKeyFile, s.cfg.DataDir, time.Now())
	if err != nil {
		return err
	}
	cert := bc.Certificate
	s.cert = cert
	fp := netq.Fingerprint(cert.Certificate[0])
	if bc.Origin != netq.CertFromFiles {
		s.log.Warn("TLS: self-signed development certificate (set FELIX_TLS_CERT and FELIX_TLS_KEY in production)",
			"fingerprint_sha256", fp, "kept_in", bc.Path(), "new", bc.Origin == netq.CertMade)
	} else {
		s.log.Info("TLS: certificate loaded", "cert", s.cfg.TLSCertFile, "fingerprint_sha256", fp)
	}
	// The stateless-reset key survives restarts (data dir), so a restarted broker resets the
	// connections of its predecessor instead of leaving clients to their idle timeout.
	resetKey, err := netq.LoadOrCreateResetKey(s.cfg.DataDir)
	if err != nil {
		return fmt.Errorf("broker: QUIC stateless reset key: %w", err)
	}
	streams := int64(s.cfg.MaxStreamsPerConn)
	s.listener, err = netq.Listen(s.cfg.QUICBind, cert, netq.Options{
		StatelessResetKey:     resetKey,
		MaxConnections:        s.cfg.MaxConnections,
		MaxBidiStreamsPerConn: streams,
		MaxUniStreamsPerConn:  streams,
		MaxStreamWindowBytes:  uint64(s.cfg.StreamRecvWindow),
		MaxConnWindowBytes:    uint64(s.cfg.ConnRecvWindow),
		UDPRecvBufferBytes:    s.cfg.UDPRecvBufferBytes,
		UDPSendBufferBytes:    s.cfg.UDPSendBufferBytes,
		InitialPacketSize:     uint16(s.cfg.InitialMTU),
		Evict:                 s.evictOldest,
	})
	if err != nil {
		return fmt.Errorf("broker: FELIX_QUIC_BIND=%s: %w", s.cfg.QUICBind, err)
	}
	s.httpLn, err = net.Listen("tcp", s.cfg.MetricsBind)
	if err != nil {
		return fmt.Errorf("broker: FELIX_BROKER_METRICS_BIND=%s: %w", s.cfg.MetricsBind, err)
	}
	return bc.Keep()
}

// serveHTTP builds the ops and admin handlers (after the catalog and auth are open).
func (s *Server) serveHTTP() {
	mux := http.NewServeMux()
	s.registerOps(mux)
	admin := &Admin{Catalog: s.catalog, Verifier: s.authRes.Verifier, Streams: s, Logger: s.log, Damage: s.streamDamage}
	if s.authRes.Keys != nil {
		admin.Keys = s.authRes.Keys
	}
	if s.cp != nil { // cluster mode: catalog writes go to the control plane (controlplane_admin.go)
		admin.Writes = s.cp.writesMux(admin)
		s.cp.registerOps(mux)
	}
	admin.Register(mux)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
}

// now is the broker's clock for token expiry checks.
func (s *Server) now() time.Time {
	now := time.Now()
	if s.cfg.Clock != nil {
		now = s.cfg.Clock.Now()
	}
	return now.Add(time.Duration(s.clockSkew.Load()))
}

// QUICAddr and HTTPAddr are the bound addresses (useful with port 0).
func (s *Server) QUICAddr() net.Addr { return s.listener.Addr() }

// HTTPAddr is the bound ops/admin HTTP address.
func (s *Server) HTTPAddr() net.Addr { return s.httpLn.Addr() }

// Run serves until ctx ends (SIGTERM/SIGINT in the binary), then drains: readiness goes
// 503, accept stops, event streams end cleanly, publishes in flight are acknowledged, the
// engine closes (logs synced) and the run-state is marked clean — all within
// FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS. A drain that overruns is logged and leaves the run-state
// "running" (an unclean stop, seeds/upgrades-and-compatibility.txt "Clean stops and
// crashes"); Run then returns an error.
func (s *Server) Run(ctx context.Context) error {
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.http.Serve(s.httpLn) }()
	acceptDone := make(chan struct{})
	go func() { defer close(acceptDone); s.acceptLoop() }()
	s.startReplication() // replicate.go: handlers registered before the internal listener serves
	s.serveInternal()
	if err := s.startControlPlane(ctx); err != nil { // controlplane.go: register, first snapshot
		return errors.Join(err, s.drain(acceptDone))
	}

	s.ready.Store(true)
	info := ReadyInfo{QUICAddr: s.QUICAddr().String(), HTTPAddr: s.HTTPAddr().String(),
		Fingerprint: netq.Fingerprint(s.cert.Certificate[0]), AdminTokenFile: s.authRes.AdminTokenPath,
		DataDir: s.cfg.DataDir, PID: os.Getpid()}
	s.internalReadyInfo(&info)
	if err := s.writeReadyFile(info); err != nil {
		// Tools wait for this file: running without it would look like a hung start.
		s.log.Error("ready file cannot be written: stopping", "path", s.cfg.ReadyFile, "err", err)
		return errors.Join(fmt.Errorf("broker: FELIX_READY_FILE=%s: %w", s.cfg.ReadyFile, err), s.drain(acceptDone))
	}
	s.log.Info("broker ready", "quic", info.QUICAddr, "http", info.HTTPAddr, "data_dir", s.cfg.DataDir,
		"fsync", string(s.cfg.FsyncMode), "auth", s.cfg.Auth, "cores", s.engine.Cores())

	select {
	case <-ctx.Done():
	case err := <-httpDone:
		s.log.Error("HTTP server stopped", "err", err)
	case err := <-s.controlPlaneFatal():
		return errors.Join(err, s.drain(acceptDone))
	}
	return s.drain(acceptDone)
}

func (s *Server) drain(acceptDone <-chan struct{}) error {
	budget := time.Duration(s.cfg.ShutdownDrainTimeoutMS) * time.Millisecond
	deadline := time.Now().Add(budget)
	s.log.Info("draining", "budget", budget.String())
	s.ready.Store(false)
	s.draining.Store(true)
	if s.cfg.ReadyFile != "" {
		_ = os.Remove(s.cfg.ReadyFile) // a stale file must not point tools at a stopping broker
	}
	_ = s.listener.StopAccepting()
	s.stopAcceptingInternal()
	s.stopControlPlane()
	<-acceptDone
	// Stop every connection's readers and event pumps; control streams finish the request
	// they hold and the answers already queued.
	s.stop()
	// Connection handlers end after their sessions, which end after their own publishes and
	// operations completed; only then is the process-wide count final.
	clean := waitTimeout(&s.conns, time.Until(deadline))
	clean = clean && waitTimeout(&s.inflight, time.Until(deadline))
	s.stopReplication()                        // replicate.go: shippers end before the pool closes
	clean = s.closeInternal(deadline) && clean // pool (fail waiters), then peer connections
	s.waitReplication()                        // replicate.go: their goroutines, once a dial in progress ended
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	s.stopShards()
	engineErr := s.engine.Close(ctx)
	_ = s.listener.Close()
	hctx, hcancel := context.WithTimeout(context.Background(), time.Second)
	_ = s.http.Shutdown(hctx)
	hcancel()
	if engineErr != nil || !clean {
		s.log.Error("drain did not finish within FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS: unclean stop", "engine", engineErr, "publishes_drained", clean)
		return fmt.Errorf("broker: unclean stop: drain exceeded %v (engine: %v)", budget, engineErr)
	}
	if err := seglog.EndRun(seglog.OSFS{}, s.cfg.DataDir, s.storageID); err != nil {
		return fmt.Errorf("broker: mark run-state clean: %w", err)
	}
	s.unlockDataDir()
	s.log.Info("stopped cleanly")
	return nil
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// closeAll releases whatever New opened when it fails part-way.
func (s *Server) closeAll() {
	s.closeInternal(time.Now())
	if s.listener != nil {
		s.listener.Close()
	}
	if s.httpLn != nil {
		s.httpLn.Close()
	}
	s.stopShards()
	engineErr := error(nil)
	if s.engine != nil {
		engineErr = s.engine.Close(context.Background())
	}
	// A start that failed after BeginRun served nothing: unless the previous run crashed
	// (its recovery must run again), the next start must not be reported unclean.
	if s.cleanIfStartFails && engineErr == nil {
		if err := seglog.EndRun(seglog.OSFS{}, s.cfg.DataDir, s.storageID); err != nil {
			s.log.Error("failed start: run-state left running", "err", err)
		}
	}
	s.unlockDataDir()
}

func (s *Server) writeReadyFile(info ReadyInfo) error {
	if s.cfg.ReadyFile == "" {
		return nil
	}
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.cfg.ReadyFile), 0o755); err != nil {
		return err
	}
	return WriteFileAtomic(s.cfg.ReadyFile, data)
}

func (s *Server) acceptLoop() {
	for {
		c, err := s.listener.Accept(context.Background())
		if err != nil {
			if !errors.Is(err, netq.ErrListenerClosed) {
				s.log.Error("accept", "err", err)
			}
			return
		}
		s.m.connections.Inc()
		s.conns.Add(1)
		h := newConnHandler(s, c) // listed as pending before the next Accept may evict
		go func() {
			defer s.conns.Done()
			defer c.Release()
			h.serve()
		}()
	}
}

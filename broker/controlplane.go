package broker

// The broker side of the control plane (issue 17 item 8; docs/controlplane.md, "The broker
// side"; seeds/upgrades-and-compatibility.txt, "Control-plane REST", "Fleet features",
// "Storage identities during a roll"). With FELIX_CONTROLPLANE_URL set the broker runs in
// cluster mode: before it is ready it registers (node id, storage identity, client and
// internal advertised addresses, the fleet features it implements, the generation of
// every shard open here, its feed cursor); a 409 logs the control plane's reason and Run
// returns it (the process exits non-zero). It then loads GET /v1/snapshot and follows the
// change feed into its catalog, its ownership table (Server.SetPlacement) and the peer
// address list (controlplane_mirror.go), heartbeats every
// FELIX_CONTROLPLANE_HEARTBEAT_INTERVAL_MS, forwards the admin catalog writes it receives
// (controlplane_admin.go), and keeps serving from what it holds while the control plane is
// away; a restart that finds the state it held in the data dir serves it at once and
// registers in the background (controlplane_held.go).

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"felix/clock"
	"felix/cluster/meta"
	"felix/cluster/meta/metaclient"
	"felix/core"
	"felix/seglog"
)

// brokerFleetFeatures are the fleet features this build implements and reports at
// registration (spec/config.md §9): key → shard by jump consistent hash (core/routing.go)
// and the group cursors' dependency rule (core/groups). The others are not built here.
var brokerFleetFeatures = []string{meta.FeatureJumpHashRouting, meta.FeatureGroupCursorDependencies}

// feedWait is the change feed's long-poll wait per request.
const feedWait = 30 * time.Second

// controlPlane is a Server's cluster-mode state (nil on a single node and with a static
// cluster).
type controlPlane struct {
	s      *Server
	client *metaclient.Client
	clk    clock.Clock
	hbInt  time.Duration
	retry  time.Duration // FELIX_CONTROLPLANE_SYNC_INTERVAL_MS

	mu     sync.Mutex
	mirror *cpMirror // the control plane's state as this broker last read it
	moved  chan struct{}
	owners atomic.Pointer[Ownership]
	cursor atomic.Uint64

	keys    *cpKeys         // the tenants' JWKS (controlplane_jwks.go); nil with FELIX_AUTH=off
	held    bool            // started from the state held in the data dir (controlplane_held.go)
	absent  map[string]bool // held names absent from the control plane, logged (follow's goroutine)
	away    atomic.Bool     // the last request found no member (logged once per outage)
	outages *metrics.Counter
	fatal   chan error
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// openControlPlane builds the cluster-mode state when FELIX_CONTROLPLANE_URL is set and
// installs its placement (an empty table until the snapshot) before the engine opens, so
// the first reconcile pass opens nothing the control plane did not assign here. It builds
// the broker's forwarding too (FELIX_INTERNAL_BIND is required in cluster mode), over the
// registered brokers: forwarded publishes and cache operations, not_leader redirects and
// route_lookup then work as in a static cluster (docs/forwarding.md, "Cluster mode").
func (s *Server) openControlPlane() error {
	cfg := s.cfg.ControlPlane
	if len(cfg.URLs) == 0 {
		return nil
	}
	token := ""
	if cfg.TokenFile != "" {
		data, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return fmt.Errorf("%w: FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE: %v", ErrConfig, err)
		}
		token = strings.TrimSpace(string(data))
	}
	clk := s.cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	retry := time.Duration(cfg.SyncIntervalMS) * time.Millisecond
	client, err := metaclient.New(metaclient.Config{URLs: cfg.URLs, Token: token, Clock: clk, MaxBackoff: retry})
	if err != nil {
		return fmt.Errorf("%w: FELIX_CONTROLPLANE_URL: %v", ErrConfig, err)
	}
	cp := &controlPlane{s: s, client: client, clk: clk, hbInt: time.Duration(cfg.HeartbeatIntervalMS) * time.Millisecond,
		retry: retry, mirror: newMirror(), moved: make(chan struct{}), fatal: make(chan error, 1)}
	cp.owners.Store(&Ownership{})
	cp.registerMetrics()
	s.cp = cp
	if s.internal != nil { // Config.Validate requires it; an in-process test's bare Config may not
		s.fwd = newForwarding(s) // forward.go: its nodes are the registered brokers (installNodes)
	}
	cp.openClientAuth() // controlplane_jwks.go: client tokens verify with the control plane's JWKS
	s.SetPlacement(cp.place, nil)
	cp.held = cp.installHeld()
	cp.installNodes()
	return nil
}

// installNodes gives forwarding, route_lookup and the redirects the mirror's registered
// brokers (node id, internal and client addresses).
func (cp *controlPlane) installNodes() {
	cp.mu.Lock()
	nodes := cp.mirror.nodes()
	cp.mu.Unlock()
	if cp.s.fwd != nil {
		cp.s.fwd.setNodes(nodes)
	}
}

// registerMetrics adds felix_broker_fleet_feature_enabled{feature} (1 once the control
// plane finalized it; seed "Fleet features"), felix_broker_controlplane_reachable (0
// while no member answers) and felix_broker_controlplane_outages_total, and
// felix_broker_controlplane_feed_seq (the feed cursor).
func (cp *controlPlane) registerMetrics() {
	set := cp.s.metrics
	for _, f := range meta.FeatureOrder {
		set.NewGauge(fmt.Sprintf(`felix_broker_fleet_feature_enabled{feature=%q}`, f), func() float64 {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			if _, ok := cp.mirror.features[f]; ok {
				return 1
			}
			return 0
		})
	}
	set.NewGauge("felix_broker_controlplane_reachable", func() float64 {
		if cp.away.Load() {
			return 0
		}
		return 1
	})
	cp.outages = set.NewCounter("felix_broker_controlplane_outages_total")
	set.NewGauge("felix_broker_controlplane_feed_seq", func() float64 { return float64(cp.cursor.Load()) })
}

// place is the Server's placement in cluster mode (SetPlacement): the assignments of the
// control plane, whatever the catalog (the reconciler opens catalog ∩ table).
func (cp *controlPlane) place(CatalogView) Ownership { return *cp.owners.Load() }

// startControlPlane registers and loads the first snapshot (Run, before ready), then
// starts the heartbeat and feed loops. Errors: a registration refused (409, the control
// plane's reason), or ctx ending first. Without cluster mode: nil at once.
func (s *Server) startControlPlane(ctx context.Context) error {
	cp := s.cp
	if cp == nil {
		return nil
	}
	if cp.held { // controlplane_held.go: a restart serves what it held
		cp.startFromHeld()
		return nil
	}
	if err := cp.register(ctx); err != nil {
		return err
	}
	for {
		if err := cp.reload(ctx); err == nil {
			break
		} else if ctx.Err() != nil {
			return fmt.Errorf("broker: control plane: first snapshot: %w", err)
		}
		cp.pause(ctx)
	}
	cp.startLoops(nil)
	return nil
}

// startLoops starts the heartbeat and feed loops; first (nil: none) runs before them on
// the feed's goroutine, and when it reports false neither loop runs.
func (cp *controlPlane) startLoops(first func(context.Context) bool) {
	loops, cancel := context.WithCancel(context.Background())
	cp.cancel = cancel
	started := make(chan struct{})
	cp.done.Add(2)
	go func() {
		defer cp.done.Done()
		if first != nil && !first(loops) {
			return
		}
		close(started)
		cp.follow(loops)
	}()
	go func() {
		defer cp.done.Done()
		select {
		case <-started:
			cp.heartbeatLoop(loops)
		case <-loops.Done():
		}
	}()
	cp.startReports(loops) // controlplane_reports.go
}

// controlPlaneFatal is the channel Run watches for a later refusal (a re-registration
// answered 409); nil (blocks forever) without cluster mode.
func (s *Server) controlPlaneFatal() <-chan error {
	if s.cp == nil {
		return nil
	}
	return s.cp.fatal
}

// stopControlPlane ends the loops (the drain, before the engine closes) after one last
// heartbeat saying the broker is draining; idempotent.
func (s *Server) stopControlPlane() {
	cp := s.cp
	if cp == nil || cp.cancel == nil {
		return
	}
	cp.cancel()
	cp.done.Wait()
	cp.cancel = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = cp.client.Heartbeat(ctx, cp.heartbeat(true))
}

// registration is this broker's RegisterBroker with its feed cursor. Its generations are
// the open shards' and, for the shards of the held catalog not open here, their ballot
// files' (ballotGenerations), so that placement never issues a generation at or below
// one this broker accepted, even after a control-plane restore.
func (cp *controlPlane) registration() metaclient.Registration {
	s := cp.s
	id := s.storageID
	client := cp.clientAddr()
	gens := ballotGenerations(s.cfg.DataDir, s.catalog)
	for k, g := range cp.generations() {
		gens[k] = max(gens[k], g)
	}
	return metaclient.Registration{RegisterBroker: meta.RegisterBroker{NodeID: s.cfg.NodeID,
		StorageID: hex.EncodeToString(id[:]), ClientAddr: client, InternalAddr: s.internal.pub.AdvertisedAddr,
		Features: brokerFleetFeatures, Generations: gens, MaxLevel: meta.BuildMaxLevel},
		FeedCursor: cp.cursor.Load()}
}

// ballotGenerations reads, for every stream and cache shard of cat, the ballot files of
// its logs under root (seglog.ShardDir, the main log's and each companion's
// seglog.BallotFileName; spec/storage-format.md §7) and gives the highest generation
// accepted per shard, keyed as the control plane's shard keys. A shard without a readable
// ballot is left out (a missing or damaged ballot decodes as none: it costs a fence, never
// a record). Read once per registration, not per heartbeat.
func ballotGenerations(root string, cat CatalogView) map[string]uint64 {
	out := map[string]uint64{}
	note := func(kind seglog.ShardKind, tenant, ns, name string, shards uint32) {
		for sh := uint32(0); sh < shards; sh++ {
			dir := seglog.ShardDir(root, seglog.ShardKey{Kind: kind, Tenant: tenant, Namespace: ns, Name: name, Shard: sh})
			g, ok := readBallots(dir)
			if !ok {
				continue
			}
			k := "stream"
			if kind == seglog.ShardCache {
				k = "cache"
			}
			out[meta.ShardRef{Kind: k, TenantID: tenant, Namespace: ns, Name: name, Shard: sh}.Key()] = g
		}
	}
	for _, t := range cat.Tenants() {
		for _, ns := range cat.Namespaces(t.TenantID) {
			for _, st := range cat.Streams(t.TenantID, ns.Namespace) {
				note(seglog.ShardStream, st.TenantID, st.Namespace, st.Stream, st.Shards)
			}
			for _, c := range cat.Caches(t.TenantID, ns.Namespace) {
				note(seglog.ShardCache, c.TenantID, c.Namespace, c.Cache, c.Shards)
			}
		}
	}
	return out
}

// readBallots gives the highest generation among the ballot files of the shard directory
// dir and its companion logs' directories, and whether any was readable.
func readBallots(dir string) (uint64, bool) {
	var hi uint64
	found := false
	for _, d := range []string{dir, seglog.CompanionDir(dir, seglog.CompanionGroups), seglog.CompanionDir(dir, seglog.CompanionDeadLetters),
		seglog.CompanionDir(dir, seglog.CompanionCounters), seglog.CompanionDir(dir, "producers")} {
		data, err := os.ReadFile(filepath.Join(d, seglog.BallotFileName))
		if err != nil {
			continue
		}
		if b, ok := seglog.DecodeBallot(data); ok {
			hi, found = max(hi, b.Generation), true
		}
	}
	return hi, found
}

// clientAddr is FELIX_ADVERTISED_ADDR (else FELIX_QUIC_BIND) with a port 0 replaced by the
// bound client port.
func (cp *controlPlane) clientAddr() string {
	return advertisedAddr(cp.s.cfg.AdvertisedAddr, cp.s.cfg.QUICBind, cp.s.listener.Addr().(*net.UDPAddr).Port)
}

// generations is, per shard open here, its generation (the highest this broker holds; the
// ballots of shards not open are not read), keyed as the control plane's shard keys.
func (cp *controlPlane) generations() map[string]uint64 {
	out := map[string]uint64{}
	for _, st := range cp.s.engine.Shards() {
		out[metaShardKey(st.Ref)] = st.Generation
	}
	return out
}

// metaShardKey is ref as a control-plane shard key "kind/tenant/namespace/name/shard".
func metaShardKey(ref core.ShardRef) string {
	kind := "stream"
	if ref.Kind == core.ShardCache {
		kind = "cache"
	}
	return meta.ShardRef{Kind: kind, TenantID: ref.Name.Tenant, Namespace: ref.Name.Namespace, Name: ref.Name.Stream,
		Shard: uint32(ref.Shard)}.Key()
}

// register registers until it is accepted or refused: a 409 is logged with the control
// plane's reason and returned, as is another 4xx (a wrong admin token is 401); while no
// member answers it retries (logged once), and after a 5xx it pauses and retries.
func (cp *controlPlane) register(ctx context.Context) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, cp.retry+metaclient.DefaultRequestTimeout)
		b, err := cp.client.Register(rctx, cp.registration())
		cancel()
		var ref *metaclient.RefusedError
		switch {
		case err == nil:
			cp.reachable()
			cp.s.log.Info("registered with the control plane", "node_id", b.NodeID, "incarnation", b.Incarnation,
				"member", cp.client.Member(), "features", strings.Join(b.Features, ","))
			return nil
		case errors.As(err, &ref):
			cp.s.log.Error("the control plane refused this broker's registration: stopping", "reason", ref.Message, "code", ref.Code)
			return fmt.Errorf("broker: control plane refused the registration (409 %s): %s", ref.Code, ref.Message)
		case ctx.Err() != nil:
			return fmt.Errorf("broker: control plane registration: %w", err)
		case errors.Is(err, metaclient.ErrUnavailable):
			cp.unreachable(err) // the client backed off already
			continue
		}
		var api *metaclient.APIError
		if errors.As(err, &api) && api.Status >= 400 && api.Status < 500 { // 400, 401 (the token file), 403, 404
			cp.s.log.Error("the control plane does not take this broker's registration: stopping", "status", api.Status,
				"reason", api.Message)
			return fmt.Errorf("broker: control plane registration: %w (check FELIX_CONTROLPLANE_ADMIN_TOKEN_FILE and FELIX_CONTROLPLANE_URL)", err)
		}
		cp.s.log.Warn("control-plane registration failed: retrying", "err", err)
		cp.pause(ctx)
	}
}

// reachable and unreachable track outages: one warning when the control plane becomes
// unreachable (the broker keeps serving from what it holds), one info when it is back.
func (cp *controlPlane) reachable() {
	if cp.away.CompareAndSwap(true, false) {
		cp.s.log.Info("control plane reachable again", "member", cp.client.Member())
	}
}

func (cp *controlPlane) unreachable(err error) {
	if cp.away.CompareAndSwap(false, true) {
		cp.outages.Inc()
		cp.s.log.Warn("control plane unreachable: serving from the catalog and placement held", "err", err)
	}
}

// heartbeat is this broker's heartbeat now.
func (cp *controlPlane) heartbeat(draining bool) metaclient.HeartbeatBody {
	return metaclient.HeartbeatBody{Heartbeat: meta.Heartbeat{NodeID: cp.s.cfg.NodeID, Draining: draining,
		Generations: cp.generations()}, FeedCursor: cp.cursor.Load()}
}

// heartbeatLoop heartbeats every interval; a 404 (the control plane lost this broker, a
// restore) registers again, and a refusal then is fatal (Run stops the broker).
func (cp *controlPlane) heartbeatLoop(ctx context.Context) {
	t := cp.clk.NewTimer(cp.hbInt)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		// A heartbeat that cannot land within its interval (at least a second) is an outage.
		hctx, cancel := context.WithTimeout(ctx, max(cp.hbInt, time.Second))
		err := cp.client.Heartbeat(hctx, cp.heartbeat(false))
		cancel()
		var api *metaclient.APIError
		switch {
		case err == nil:
			cp.reachable()
		case errors.As(err, &api) && api.Status == 404:
			cp.s.log.Warn("the control plane does not know this broker: registering again")
			if err := cp.register(ctx); err != nil && ctx.Err() == nil {
				cp.fatal <- err
				return
			}
		case ctx.Err() == nil && errors.Is(err, metaclient.ErrUnavailable):
			cp.unreachable(err)
		case ctx.Err() == nil:
			cp.s.log.Warn("control-plane heartbeat failed", "err", err)
		}
		t.Reset(cp.hbInt)
	}
}

// follow long-polls the change feed after the cursor and applies each page; a 410 or a
// new feed epoch reloads the snapshot. While no member answers it keeps polling (the
// client backs off up to FELIX_CONTROLPLANE_SYNC_INTERVAL_MS).
func (cp *controlPlane) follow(ctx context.Context) {
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, feedWait+cp.retry+metaclient.DefaultRequestTimeout)
		page, err := cp.client.Changes(fctx, cp.cursor.Load(), feedWait)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, metaclient.ErrGone):
			cp.s.log.Info("change feed cursor gone: reloading the snapshot", "cursor", cp.cursor.Load(), "err", err)
			cp.reloadOrPause(ctx)
		case errors.Is(err, metaclient.ErrUnavailable):
			cp.unreachable(err) // the client backed off already
		case err != nil: // an answer the feed should not give (4xx, 5xx)
			cp.s.log.Warn("change feed request failed: retrying", "cursor", cp.cursor.Load(), "err", err)
			cp.pause(ctx)
		case page.Epoch == 0: // the feed's epochs start at 1: not a control plane's page
			cp.s.log.Warn("change feed: a page without an epoch is skipped", "last", page.Last)
			cp.pause(ctx)
		case page.Epoch != cp.epoch():
			cp.reachable()
			cp.s.log.Info("change feed epoch changed: reloading the snapshot", "was", cp.epoch(), "now", page.Epoch)
			cp.reloadOrPause(ctx)
		default:
			cp.reachable()
			cp.applyPage(page)
		}
	}
}

// reloadOrPause reloads the snapshot, and after a failure pauses before the feed is asked
// again (it would answer 410 or the other epoch at once).
func (cp *controlPlane) reloadOrPause(ctx context.Context) {
	if cp.reload(ctx) != nil {
		cp.pause(ctx)
	}
}

// pause waits FELIX_CONTROLPLANE_SYNC_INTERVAL_MS (or until ctx ends).
func (cp *controlPlane) pause(ctx context.Context) {
	t := cp.clk.NewTimer(cp.retry)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

func (cp *controlPlane) epoch() uint64 {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.mirror.epoch
}

// reload loads GET /v1/snapshot into the mirror (a name absent from it keeps its data
// here; only a tombstone removes) and installs what follows from it.
func (cp *controlPlane) reload(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, cp.retry+metaclient.DefaultRequestTimeout)
	snap, err := cp.client.Snapshot(rctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			cp.unreachable(err)
		}
		return err
	}
	if snap.Epoch == 0 { // the feed's epochs start at 1: not a control plane's snapshot
		err := fmt.Errorf("control plane: a snapshot without a feed epoch (seq %d)", snap.Seq)
		cp.s.log.Warn("snapshot refused", "err", err)
		return err
	}
	cp.reachable()
	cp.mu.Lock()
	cp.mirror = mirrorOf(snap)
	cp.mu.Unlock()
	cp.install(snap.Seq, nil)
	return nil
}

// applyPage applies one feed page to the mirror and installs the result.
func (cp *controlPlane) applyPage(p metaclient.Page) {
	cp.mu.Lock()
	var dropped []string
	for _, ch := range p.Changes {
		if err := cp.mirror.apply(ch); err != nil {
			cp.s.log.Warn("change feed: a row this broker cannot read is skipped", "seq", ch.Seq, "entity", ch.Entity, "key", ch.Key, "err", err)
		}
		if ch.Op == meta.OpDelete && (ch.Entity == "tenant" || ch.Entity == "namespace") {
			dropped = append(dropped, ch.Entity+"/"+ch.Key)
		}
	}
	cp.mu.Unlock()
	cp.install(p.Last, dropped)
}

// install brings the catalog, the ownership table, the peer list and forwarding's nodes
// to the mirror, then
// moves the cursor to seq and wakes the waiters (waitCursor).
func (cp *controlPlane) install(seq uint64, dropped []string) {
	cp.mu.Lock()
	m := cp.mirror
	owners, peers := m.ownership(), m.peers()
	cp.mu.Unlock()
	cp.syncCatalog(m, dropped)
	cp.owners.Store(&owners)
	cp.installNodes() // before the table: a shard's new leader is known when it is
	cp.s.SetPlacement(cp.place, peers)
	cp.mu.Lock()
	m.seq = max(m.seq, seq)
	cp.cursor.Store(m.seq)
	close(cp.moved)
	cp.moved = make(chan struct{})
	cp.mu.Unlock()
	cp.saveHeld() // controlplane_held.go
}

// waitCursor waits until the feed cursor reaches seq or ctx ends; reports whether it did.
func (cp *controlPlane) waitCursor(ctx context.Context, seq uint64) bool {
	for {
		cp.mu.Lock()
		moved := cp.moved
		cp.mu.Unlock()
		if cp.cursor.Load() >= seq {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-moved:
		}
	}
}

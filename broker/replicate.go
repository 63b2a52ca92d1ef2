package broker

// Replication of every log of a shard, wired end to end (issue 18 item 4;
// docs/replication.md, "Wiring"; seeds/internal-protocol.txt "Replication",
// "Bootstrapping a follower", "Rebuilding a follower", "Replicating a cache",
// "Replicating group state", "Errors"): the follower's handler of every Replicate*
// records and bootstrap kind, ReplicateRebuild (24) and Fence (25) on the internal
// transport's Dispatcher (replicate_follower.go), and, for every log of every shard this
// node leads with a non-empty replica set (replicate_logs.go), one shipper goroutine per
// follower (replicate_leader.go) feeding cluster/replica's Shipper and Tracker and handing
// the records' and producer keys' quorum marks to core.Engine.ReleaseReplica. This file holds the Server's replication state: the
// placement seam, the start and stop with the reconciler's passes, /replication/halted
// and the per-follower metrics.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"felix/core"
	"felix/proto"
)

// replication is a Server's replication state (Server.repl). The zero value is ready; it
// does nothing until startReplication (only with FELIX_INTERNAL_BIND).
type replication struct {
	srv *Server
	// place is SetPlacement's table (nil: the broker's own placement).
	place atomic.Pointer[placementSeam]
	// seamVersion is the ownership table's version once place filled it (set after the
	// Replace; 0: never): a table of another version is the broker's own, whatever place
	// holds (detachReopened).
	seamVersion atomic.Uint64

	kick atomic.Pointer[chan struct{}] // a reconcile pass ran: re-plan the shippers (nil before the start)
	// holdShip, in tests, holds the record batches to a follower from an offset while it
	// returns true (replicate_identity.go, shipHeld).
	holdShip atomic.Pointer[func(follower string, from uint64) bool]
	alone    atomic.Bool // no internal listener: only detachAlone runs after a pass
	stop     context.CancelFunc
	stopped  chan struct{}
	exited   sync.WaitGroup // waits for halted shippers to end (stopReplication)

	mu       sync.Mutex
	leaders  map[core.LogAddr]*leaderShard // running shippers, by shard log
	followed map[core.LogAddr]*followerMem // the follower's volatile per-log state
	halted   map[haltKey]HaltedReplica     // every halted (shard, log, follower)
	// promotions are the fence rounds of the Quorum stream shards led here (fence_round.go).
	promotions map[core.ShardRef]*promotion
	inherited  map[core.ShardRef]inheritedAt // positions noted before a role change to leader (promote.go)
	ctx        context.Context               // the loop's (nil before the start)
	stats      map[haltKey]*followerStats    // metrics, kept across a shard's generations
}

// placementSeam is what SetPlacement installed.
type placementSeam struct {
	place func(CatalogView) Ownership
	peers map[string]string
}

// SetPlacement makes this broker fill its ownership table with place(catalog) before
// every reconcile pass, instead of its own placement (SingleNode, or the static
// cluster's), and resolves peers' internal addresses (node id → host:port) from peers for
// replication: the stand-in for issue 17's control plane, used by the in-process
// replication tests. It takes effect at once (a pass is asked for). Safe for concurrent
// use; place must be pure and fast (it runs on the reconciler's goroutine).
func (s *Server) SetPlacement(place func(CatalogView) Ownership, peers map[string]string) {
	cp := make(map[string]string, len(peers))
	for k, v := range peers {
		cp[k] = v
	}
	s.repl.place.Store(&placementSeam{place: place, peers: cp})
	if s.reconciler != nil {
		s.reconciler.Changed()
	}
}

// replPlace wraps the broker's own placement fill: SetPlacement's table wins when set.
func (s *Server) replPlace(_ string, fill func(CatalogView)) func(CatalogView) {
	return func(v CatalogView) {
		if p := s.repl.place.Load(); p != nil {
			s.owners.Replace(p.place(v))
			s.repl.seamVersion.Store(s.owners.Version())
			return
		}
		fill(v)
	}
}

// peerAddr is the internal address of node id n: SetPlacement's peers, else the static
// cluster's FELIX_CLUSTER_PEERS.
func (s *Server) peerAddr(n string) (string, bool) {
	if p := s.repl.place.Load(); p != nil {
		a, ok := p.peers[n]
		return a, ok
	}
	if p, ok := findPeer(s.cfg.ClusterPeers, n); ok {
		return p.InternalAddr, true
	}
	return "", false
}

// startReplication registers the follower's handlers and starts the loop that runs the
// leader's shippers after every reconcile pass. Without FELIX_INTERNAL_BIND nothing
// replicates (a single node is its own majority).
func (s *Server) startReplication() {
	in := s.Internal()
	r := &s.repl
	r.srv = s
	if in == nil {
		r.alone.Store(true) // a single node: shards reopened attached are detached (detachAlone)
		r.detachAlone()
		return
	}
	r.mu.Lock()
	r.leaders, r.followed = map[core.LogAddr]*leaderShard{}, map[core.LogAddr]*followerMem{}
	r.halted, r.stats = map[haltKey]HaltedReplica{}, map[haltKey]*followerStats{}
	r.promotions, r.inherited = map[core.ShardRef]*promotion{}, map[core.ShardRef]inheritedAt{}
	r.mu.Unlock()
	for _, k := range replicatedKinds() { // every log's records and bootstrap kinds (replicate_logs.go)
		in.Dispatcher.Register(k, s.handleReplicate)
	}
	ctx, cancel := context.WithCancel(context.Background())
	kick := make(chan struct{}, 1)
	r.stop, r.stopped = cancel, make(chan struct{})
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	r.kick.Store(&kick)
	go func() {
		defer close(r.stopped)
		r.loop(ctx, kick)
	}()
	r.changed()
}

// stopReplication stops every shipper before the pool closes (nothing is released or
// sent from then on); idempotent. waitReplication, after the pool closed (which ends a
// dial in progress), waits for their goroutines.
func (s *Server) stopReplication() {
	r := &s.repl
	if r.stop == nil {
		return
	}
	r.stop()
	<-r.stopped
	r.stop = nil
	r.forgetPromotions(nil, nil)
	r.mu.Lock()
	leaders := r.leaders
	r.leaders = map[core.LogAddr]*leaderShard{}
	r.mu.Unlock()
	for _, l := range leaders {
		l.halt()
		r.exited.Add(1)
		go func() { defer r.exited.Done(); l.wait() }()
	}
}

// waitReplication waits for every stopped shipper's goroutine to end.
func (s *Server) waitReplication() { s.repl.exited.Wait() }

// changed asks for a re-plan of the shippers (the reconciler's Applied hook; never blocks).
func (r *replication) changed() {
	if r.alone.Load() {
		r.detachAlone()
		return
	}
	kick := r.kick.Load()
	if kick == nil {
		return
	}
	select {
	case *kick <- struct{}{}:
	default:
	}
}

func (r *replication) loop(ctx context.Context, kick <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		}
		r.plan(ctx)
	}
}

// detachReopened detaches a Quorum shard led here without a replica set that reopened
// attached (its release-mark file from when it had one): alone, it releases at its
// commit again. Only on a table that decides replica sets (SetPlacement's, the static
// cluster's) or on a broker that is a single node (no internal listener): the
// single-node table a clustered broker runs on before its placement arrives says
// nothing about the replica set, and detaching on it would release the recovered tail.
// SetPlacement's table counts only when the plan's snapshot (version) is the one a pass
// filled from it (seamVersion), not from the SetPlacement call on: a plan that read the
// single-node table just before the pass replaced it detached a restarted leader's shard
// and released its held record now and then (TestReplicationRestartedLeaderHoldsItsTail);
// the pass's own plan, right after it, decides. version 0: no snapshot (detachAlone).
func detachReopened(s *Server, ref core.ShardRef, version uint64) {
	seam := version != 0 && s.repl.seamVersion.Load() == version
	if !seam && len(s.cfg.ClusterPeers) == 0 && s.cfg.InternalBind != "" {
		return
	}
	st, err := s.engine.ReplicaState(core.LogAddr{Kind: ref.Kind, Name: ref.Name, Shard: ref.Shard, Log: proto.LogStream})
	if err == nil && st.Replicated {
		if err := s.engine.SetReplicated(ref, false); err != nil {
			s.log.Warn("replication: detaching a reopened shard failed", "shard", ref.String(), "err", err)
		}
	}
}

// detachAlone, on a broker without an internal listener (a single node), detaches every
// Quorum shard it leads that reopened attached from when it had a replica set: alone, it
// is its own majority and releases at its commit again.
func (r *replication) detachAlone() {
	for _, st := range r.srv.engine.Shards() {
		if st.Ref.Kind == core.ShardStream && st.Role == core.RoleLeader {
			detachReopened(r.srv, st.Ref, 0)
		}
	}
}

// leaderWant is one shard this node leads with a replica set, as the plan wants it shipped.
type leaderWant struct {
	gen        uint64
	replicaSet []string
	quorum     bool
}

// plan starts the shippers of every log of every shard this node leads (open here as
// leader at the table's generation, with a non-empty replica set, durable; a stream
// shard's four logs, a cache shard's two: replicate_logs.go) and stops the others: a
// shard that became a follower, moved, closed or changed generation or replica set stops
// its shippers (a new generation starts new ones).
func (r *replication) plan(ctx context.Context) {
	s := r.srv
	want := map[core.LogAddr]leaderWant{}
	leading := map[core.ShardRef]bool{} // led here with a replica set, durable
	owners, version := s.owners.Snapshot()
	durability := shardDurability{srv: s}
	for _, st := range s.engine.Shards() {
		a, ok := owners[st.Ref]
		if st.Role != core.RoleLeader || !ok || a.Leader != s.nodeID() || a.Generation != st.Generation {
			continue
		}
		if len(a.ReplicaSet) == 0 {
			if st.Ref.Kind == core.ShardStream {
				detachReopened(s, st.Ref, version)
			}
			continue
		}
		durable, quorum, ok := durability.of(st.Ref)
		if !ok || !durable {
			continue
		}
		leading[st.Ref] = true
		if quorum && st.Ref.Kind == core.ShardStream && !r.fenced(ctx, st.Ref, st.Generation, a.ReplicaSet) {
			continue // its fence round is not open (fence_round.go): nothing ships, nothing is acknowledged
		}
		for _, log := range shardLogs(st.Ref.Kind) {
			want[logAddr(st.Ref, log)] = leaderWant{gen: st.Generation, replicaSet: a.ReplicaSet, quorum: quorum && gatesRelease(log)}
		}
	}
	r.forgetPromotions(leading, owners)
	r.mu.Lock()
	var stop []*leaderShard
	for addr, l := range r.leaders {
		if w, ok := want[addr]; !ok || w.gen != l.gen || !sameSet(w.replicaSet, l.replicaSet) {
			stop = append(stop, l)
			delete(r.leaders, addr)
		}
	}
	r.mu.Unlock()
	for _, l := range stop {
		l.halt()
		if l.quorum && attachesReplicaSet(l.addr.Log) && !leading[l.ref] {
			// Still leading, without a replica set now: release at commit. A shard still led
			// with one (a new generation, a round not open yet) stays attached.
			_ = s.engine.SetReplicated(l.ref, false)
		}
		r.exited.Add(1)
		go func() { defer r.exited.Done(); l.wait() }() // not holding up the shippers started next
	}
	for addr, w := range want {
		r.mu.Lock()
		_, running := r.leaders[addr]
		r.mu.Unlock()
		if running {
			continue
		}
		l, err := r.startLeader(ctx, addr, w)
		if err != nil {
			s.log.Warn("replication: shippers not started (retried on the next reconcile pass)", "log", addr.String(), "err", err)
			continue
		}
		r.mu.Lock()
		r.leaders[addr] = l
		r.mu.Unlock()
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// haltKey names one (shard, log, follower).
type haltKey struct {
	shard    core.ShardRef
	log      proto.ReplicaLog
	follower string
}

// HaltedReplica is one entry of GET /replication/halted: a follower this leader stopped
// shipping a log to (cluster/replica's Halt* reasons: diverged, needs_bootstrap,
// unauthorized, storage_failed, unsupported_kind), since when (RFC 3339, UTC).
type HaltedReplica struct {
	Shard    string `json:"shard"`
	Log      string `json:"log"`
	Follower string `json:"follower"`
	Reason   string `json:"reason"`
	Since    string `json:"since"`
}

// setHalted records (reason != "") or clears a halt; changed reports whether the halt
// state of k changed (the caller logs transitions, once each).
func (r *replication) setHalted(k haltKey, reason string, now time.Time) (changed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if reason == "" {
		_, was := r.halted[k]
		delete(r.halted, k)
		return was
	}
	if h, ok := r.halted[k]; ok && h.Reason == reason {
		return false
	}
	r.halted[k] = HaltedReplica{Shard: k.shard.String(), Log: k.log.String(), Follower: k.follower, Reason: reason,
		Since: now.UTC().Format(time.RFC3339)}
	return true
}

// haltedList is the /replication/halted body, sorted by shard, log and follower; [] when
// nothing is halted (or nothing replicates).
func (r *replication) haltedList() []HaltedReplica {
	r.mu.Lock()
	out := make([]HaltedReplica, 0, len(r.halted))
	for _, h := range r.halted {
		out = append(out, h)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Shard != b.Shard {
			return a.Shard < b.Shard
		}
		if a.Log != b.Log {
			return a.Log < b.Log
		}
		return a.Follower < b.Follower
	})
	return out
}

// followerStats are one (shard, log, follower)'s series on the leader: lag in records
// (the leader's committed offset minus what the follower acknowledged), and the counts of
// acks, resends, gaps, conflicts and halts its shippers saw.
type followerStats struct {
	lag                                    atomic.Int64
	acks, resends, gaps, conflicts, halts  atomic.Uint64
	lastAcks, lastResends, lastGaps, lastC uint64 // the running shipper's counts already added
	lastHalts                              uint64
}

// statsFor returns k's series, registering them on first use.
func (r *replication) statsFor(k haltKey) *followerStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st := r.stats[k]; st != nil {
		return st
	}
	st := &followerStats{}
	r.stats[k] = st
	set := r.srv.metrics
	labels := fmt.Sprintf(`{shard=%q,log=%q,follower=%q}`, k.shard.String(), k.log.String(), k.follower)
	set.NewGauge("felix_replication_lag_records"+labels, func() float64 { return float64(st.lag.Load()) })
	for name, c := range map[string]*atomic.Uint64{"acks": &st.acks, "resends": &st.resends, "gaps": &st.gaps,
		"conflicts": &st.conflicts, "halts": &st.halts} {
		set.NewGauge("felix_replication_"+name+"_total"+labels, func() float64 { return float64(c.Load()) })
	}
	return st
}

// clampLag is a lag in records as a gauge value.
func clampLag(committed, acked uint64) int64 {
	if acked >= committed {
		return 0
	}
	return int64(min(committed-acked, math.MaxInt64))
}

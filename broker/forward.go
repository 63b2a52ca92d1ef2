package broker

// Forwarding wired into the broker (issue 19 items 1–3; seeds/internal-protocol.txt,
// "Forwarded publish" through "Chains are refused, not relayed"; docs/forwarding.md,
// "Wiring" and "Cluster mode"). With FELIX_CLUSTER_PEERS (static_cluster.go), or in
// cluster mode (controlplane.go: its nodes are the registered brokers), the Server holds a
// forwarding:
// the ingress side (forward_ingress.go) looks every routed request up in the ownership
// table and serves it locally, forwards it to the leader with cluster/forward's Machine
// over Server.Internal().Pool, or redirects a subscriber; the owner side
// (forward_owner.go) answers the forwards peers send, on the internal Dispatcher.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	cforward "felix/cluster/forward"
	"felix/cluster/transport"
	"felix/core"
	"felix/core/cache"
	"felix/proto"
)

// AuthOffCredential is the credential a broker with FELIX_AUTH=off sends in a forward for
// a client that authenticated without a token: kinds 22, 23 and 28 need a non-empty one,
// and an owner with FELIX_AUTH=off (auth.DisabledVerifier) accepts any. An owner with
// auth on refuses it Unauthorized like any token that does not verify: a cluster runs
// with auth on everywhere or off everywhere (docs/forwarding.md, "Auth off").
const AuthOffCredential = "felix-auth-off"

// defaultForwardTimeout bounds one client request's whole forward (every attempt and
// backoff); past it the outcome is reported indeterminate.
const defaultForwardTimeout = 20 * time.Second

// ForwardError is the client-visible end of a forward that was not acknowledged: the
// client code of the Machine's terminal action (cforward.Action.ClientCode: indeterminate,
// unauthorized, malformed, storage_failed, overloaded, shard_unavailable) and a text
// naming the owner and the reason. errorCode answers it with Code.
type ForwardError struct {
	Code   proto.ErrorCode
	Reason cforward.Reason
	To     string // the last broker tried
	Last   cforward.Outcome
}

// Error is "forward to <node>: <step> (<reason>, last <outcome>)".
func (e *ForwardError) Error() string {
	step := "failed"
	if e.Code == proto.CodeIndeterminate {
		step = "outcome unknown"
	}
	return fmt.Sprintf("forward to %s: %s (%v, last %v)", e.To, step, e.Reason, e.Last)
}

// forwarding is a cluster's forwarding state (a static cluster's, or cluster mode's),
// shared by every session of the Server.
type forwarding struct {
	s    *Server
	self string
	// nodes is the cluster's brokers (node id, internal and client addresses): a static
	// cluster's FELIX_CLUSTER_PEERS, or in cluster mode the brokers registered with the
	// control plane, replaced as its feed changes (setNodes).
	nodes   atomic.Pointer[[]StaticPeer]
	pool    *transport.Pool
	opts    cforward.Options
	timeout time.Duration
	// hold stops the placement from refilling the ownership table (holdTable: tests install
	// a stale table and keep it); placeMu orders it with a placement in progress.
	placeMu sync.Mutex
	hold    bool
	rr      atomic.Uint64 // round-robin of unkeyed publishes routed from the catalog
	m       forwardMetrics
	slots   forwardSlots // forwards in flight per owner (forward_slots.go)
}

// forwardMetrics are the forwarding series on /metrics (docs/operations.md, "Static
// cluster").
type forwardMetrics struct {
	set       *metrics.Set
	attempts  *metrics.Histogram // felix_broker_forward_attempts: sends per forwarded request
	latency   *metrics.Histogram // felix_broker_forward_duration_seconds: ingress to terminal action
	loops     *metrics.Counter   // felix_broker_forward_loops_refused_total
	redirects *metrics.Counter   // felix_broker_redirects_sent_total: subscribes answered not_leader
}

func newForwardMetrics(set *metrics.Set) forwardMetrics {
	return forwardMetrics{set: set,
		attempts:  set.NewHistogram("felix_broker_forward_attempts"),
		latency:   set.NewHistogram("felix_broker_forward_duration_seconds"),
		loops:     set.NewCounter("felix_broker_forward_loops_refused_total"),
		redirects: set.NewCounter("felix_broker_redirects_sent_total"),
	}
}

// outcome counts one forwarded request's terminal action:
// felix_broker_forwards_total{op="publish"|"cache",outcome="ack"|"fail"|"indeterminate",reason}.
func (m forwardMetrics) outcome(op string, a cforward.Action) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`felix_broker_forwards_total{op=%q,outcome=%q,reason=%q}`, op, a.Step, a.Reason)).Inc()
}

// served counts one forward this broker answered as the owner:
// felix_broker_forwards_served_total{verdict="proceed"|"NotLeader"|"StaleRoute"|...}.
func (m forwardMetrics) served(v cforward.Verdict) {
	m.set.GetOrCreateCounter(fmt.Sprintf(`felix_broker_forwards_served_total{verdict=%q}`, v)).Inc()
}

// newForwarding builds the cluster's forwarding over FELIX_CLUSTER_PEERS (none in cluster
// mode: the control plane's brokers arrive through setNodes) and registers the owner's
// handlers on the internal Dispatcher (config validation guarantees the transport).
func newForwarding(s *Server) *forwarding {
	f := &forwarding{s: s, self: s.cfg.NodeID, pool: s.internal.pub.Pool,
		timeout: defaultForwardTimeout, m: newForwardMetrics(s.metrics)}
	f.setNodes(s.cfg.ClusterPeers)
	f.register(s.internal.pub.Dispatcher)
	return f
}

// setNodes replaces the cluster's brokers with nodes (copied; this node's entry takes its
// own spelling of FELIX_NODE_ID: the reconciler compares exactly). Safe for concurrent use
// with every lookup.
func (f *forwarding) setNodes(nodes []StaticPeer) {
	peers := append([]StaticPeer(nil), nodes...)
	for i := range peers {
		if strings.EqualFold(peers[i].NodeID, f.self) {
			peers[i].NodeID = f.self
		}
	}
	f.nodes.Store(&peers)
}

// peers is the cluster's brokers now (setNodes).
func (f *forwarding) peers() []StaticPeer { return *f.nodes.Load() }

// place fills the ownership table with StaticPlacement (the Reconciler's Place), unless a
// test holds the table.
func (f *forwarding) place(v CatalogView) {
	f.placeMu.Lock()
	defer f.placeMu.Unlock()
	if !f.hold {
		f.s.owners.Replace(StaticPlacement(f.peers(), v))
	}
}

// holdTable installs owners as the whole ownership table and keeps it: the placement no
// longer refills it (the in-process seam of Go tests that make a broker's routes stale).
func (f *forwarding) holdTable(owners Ownership) {
	f.placeMu.Lock()
	defer f.placeMu.Unlock()
	f.hold = true
	f.s.owners.Replace(owners)
}

// peer returns the broker of node id (compared without case).
func (f *forwarding) peer(id string) (StaticPeer, bool) { return findPeer(f.peers(), id) }

// node is the cforward.Node of id: its id and client address ("" when not a known broker).
func (f *forwarding) node(id string) cforward.Node {
	p, _ := f.peer(id)
	return cforward.Node{ID: id, Addr: p.ClientAddr}
}

// leadsHere reports whether a names this broker as the leader.
func (f *forwarding) leadsHere(a Assignment) bool { return strings.EqualFold(a.Leader, f.self) }

// route resolves a publish's shard from the catalog when the engine does not know the
// stream (a broker leading none of its shards has none open): the rules of
// core.Engine.Route, on the catalog's shard count and routing: a key → core.RouteKey; a
// producer id → idempotentShard; else round-robin. Errors: core.ErrNotFound.
func (f *forwarding) route(name core.StreamName, key []byte, producerID string, seq uint64) (int, error) {
	st, err := f.s.catalog.Stream(name.Tenant, name.Namespace, name.Stream)
	if err != nil || st.Shards == 0 {
		return 0, fmt.Errorf("%w: stream %s", core.ErrNotFound, name)
	}
	n := int(st.Shards)
	switch {
	case key != nil:
		return core.RouteKey(streamSpec(st).Routing, key, n), nil
	case producerID != "":
		return idempotentShard(producerID, seq, n), nil
	}
	return int((f.rr.Add(1) - 1) % uint64(n)), nil
}

// routeCache resolves a cache key's shard from the catalog (cache.ShardOf), as route does
// for a stream. Errors: core.ErrNotFound.
func (f *forwarding) routeCache(name core.CacheName, key []byte) (int, error) {
	c, err := f.s.catalog.Cache(name.Tenant, name.Namespace, name.Cache)
	if err != nil || c.Shards == 0 {
		return 0, fmt.Errorf("%w: cache %s", core.ErrNotFound, name)
	}
	return int(cache.ShardOf(key, c.Shards)), nil
}

// idempotentShard is core's mapping of an unkeyed idempotent publish (FNV-1a 64 of the
// producer id, then the big-endian sequence, mod shards; core/publish.go), so every broker
// routes a re-send to the shard holding its window. TestCatalogRouteMatchesTheEngine
// checks it against core.Engine.Route.
func idempotentShard(producerID string, seq uint64, shards int) int {
	if shards <= 1 {
		return 0
	}
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(producerID); i++ {
		h ^= uint64(producerID[i])
		h *= prime64
	}
	for i := 0; i < 8; i++ {
		h ^= (seq >> (56 - 8*i)) & 0xff
		h *= prime64
	}
	return int(h % uint64(shards))
}

// drive runs one forward to its terminal action: the Machine's Sends over the pool (each
// encoded with cforward.AsKind, after its backoff), their outcomes through cforward.Classify.
// Bounded by f.timeout: a context that ends is a timed-out attempt. op labels the metrics.
func (f *forwarding) drive(op string, msg proto.InternalMessage, req cforward.Request, to string, gen uint64) cforward.Action {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	m, act, err := cforward.NewMachine(req, to, gen, f.opts)
	if err != nil {
		act = cforward.Action{Step: cforward.Fail, Reason: cforward.ReasonNotSent, Last: cforward.OutNotSent}
	}
	for act.Step == cforward.Send {
		to = act.To
		act, _ = m.Step(f.attempt(ctx, msg, act))
	}
	if err == nil {
		f.m.attempts.Update(float64(m.Attempts()))
	}
	if act.Reason == cforward.ReasonLoop {
		f.m.loops.Inc()
	}
	f.m.latency.UpdateDuration(start)
	f.m.outcome(op, act)
	if act.Step != cforward.Ack {
		f.s.log.Debug("forward not acknowledged", "op", op, "to", to, "step", act.Step.String(), "reason", act.Reason.String(),
			"last", act.Last.String(), "code", act.Code)
	}
	return act
}

// attempt waits the Send's backoff and a slot toward the owner (forward_slots.go), then
// sends it and classifies the outcome. Once the
// broker drains, a retry is not sent (OutNotSent: the Machine fails it, or reports it
// indeterminate when an earlier attempt's outcome was unknown), so the drain does not
// wait out a backoff schedule.
func (f *forwarding) attempt(ctx context.Context, msg proto.InternalMessage, act cforward.Action) cforward.Event {
	if act.Backoff > 0 {
		t := time.NewTimer(act.Backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return cforward.Event{Outcome: cforward.OutTimedOut, Err: ctx.Err()}
		case <-f.s.shutdown.Done():
			t.Stop()
		}
	}
	if act.Attempt > 1 && f.s.shutdown.Err() != nil {
		return cforward.Event{Outcome: cforward.OutNotSent, Err: fmt.Errorf("%w: broker draining", transport.ErrClosed)}
	}
	peer, ok := f.peer(act.To)
	if !ok {
		return cforward.Event{Outcome: cforward.OutNotSent,
			Err: fmt.Errorf("%w: %q is not a known broker (FELIX_CLUSTER_PEERS, or the control plane's brokers)", transport.ErrInvalidNodeID, act.To)}
	}
	sent, err := cforward.AsKind(msg, act.Kind, act.Generation)
	if err != nil {
		return cforward.Event{Outcome: cforward.OutNotSent, Err: err}
	}
	release, err := f.slots.acquire(ctx, f.s.shutdown.Done(), peer.NodeID)
	if err != nil { // nothing was sent: the Machine fails it (or reports it unknown after an unknown attempt)
		return cforward.Event{Outcome: cforward.OutNotSent, Err: err}
	}
	defer release()
	return cforward.Classify(f.pool.Request(ctx, transport.Peer{NodeID: peer.NodeID, Addr: peer.InternalAddr}, sent))
}

// forwardErr is the error a session answers for a terminal action that is no Ack.
func forwardErr(a cforward.Action, to string) error {
	return &ForwardError{Code: proto.ErrorCode(a.ClientCode()), Reason: a.Reason, To: to, Last: a.Last}
}

// credential is the session's credential for a forward: the client's bearer token, or
// AuthOffCredential when it authenticated without one (FELIX_AUTH=off).
func (s *session) credential() []byte {
	if len(s.fwd.token) == 0 {
		return []byte(AuthOffCredential)
	}
	return s.fwd.token
}

// sessionForward is what a session keeps for forwarding: the token its auth carried and
// whether the client listed the redirects feature (a subscribe redirect is then the
// not_leader message, else an error with code not_leader).
type sessionForward struct {
	token     []byte
	redirects bool
}

// isForwardError reports whether err is a *ForwardError and returns it.
func isForwardError(err error) (*ForwardError, bool) {
	var fe *ForwardError
	ok := errors.As(err, &fe)
	return fe, ok
}

// aheadAssignment is how a create opens its shards ahead of the catalog
// (Reconciler.OpenAhead): a single node leads them all; a cluster (static, or cluster
// mode) opens none ahead (Assignment{} names no node) and leaves them to the pass the
// catalog change triggers, which opens exactly the shards its table gives this node.
func (s *Server) aheadAssignment() Assignment {
	if s.fwd != nil {
		return Assignment{}
	}
	return Assignment{Leader: s.nodeID()}
}

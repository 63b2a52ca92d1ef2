package transport

// The dialler: one pool entry per node id, one pooled connection per peer carrying several
// multiplexed streams, correlation of answers to waiters, the three bounds of the seed.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/quic-go/quic-go"
)

// Peer names the broker a request goes to: its node id (the identity checked in TLS and in
// HelloOk) and its internal address (host:port, FELIX_INTERNAL_ADVERTISED_ADDR of that broker).
type Peer struct {
	NodeID string // valid DNS name (ValidNodeID); compared without case
	Addr   string // UDP host:port of the peer's internal listener
}

// PoolOptions configure a Pool. Zero values take the defaults in brackets.
type PoolOptions struct {
	LocalAddr          string           // UDP address the dialler binds [":0"]
	MaxFrameBytes      uint32           // body bound of a frame, both directions [16 MiB]
	MaxPeers           int              // node ids the pool holds at once [1024]
	StreamsPerConn     int              // multiplexed streams per peer connection [4]
	MaxOrderedStreams  int              // ordered streams (Pipeline keys) per connection [32]
	MaxInflightPerPeer int              // requests in flight per peer; more are shed [256]
	RequestTimeout     time.Duration    // a request with no answer by then fails ErrTimeout [10 s]
	HandshakeTimeout   time.Duration    // QUIC handshake plus Hello/HelloOk [5 s]
	IdleTimeout        time.Duration    // a connection with no traffic closes (no keep-alives) [60 s]
	Backoff            Backoff          // reconnect schedule [100 ms .. 10 s]
	Now                func() time.Time // clock of the backoff window [time.Now]
	Jitter             func() float64   // [0,1) source of the backoff jitter [math/rand/v2]
	Logger             *slog.Logger     // [slog.Default()]
	Metrics            *metrics.Set     // per-peer series felix_internal_peer_*{peer="<node id>"} (metrics.go) [a private set]
}

func (o PoolOptions) withDefaults() PoolOptions {
	if o.LocalAddr == "" {
		o.LocalAddr = ":0"
	}
	o.MaxFrameBytes = Options{MaxFrameBytes: o.MaxFrameBytes}.withDefaults().MaxFrameBytes
	if o.MaxPeers <= 0 {
		o.MaxPeers = 1024
	}
	if o.StreamsPerConn <= 0 {
		o.StreamsPerConn = 4
	}
	if o.MaxOrderedStreams <= 0 {
		o.MaxOrderedStreams = 32
	}
	if o.MaxInflightPerPeer <= 0 {
		o.MaxInflightPerPeer = 256
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 10 * time.Second
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	return o
}

// Pool dials peers and carries requests to them. Safe for concurrent use.
type Pool struct {
	creds *Credentials
	opts  PoolOptions
	udp   *net.UDPConn
	tr    *quic.Transport

	// after, when set, starts a request's timeout instead of a pooled timer (timers.go):
	// tests replace it with a fake clock.
	after func(time.Duration) (<-chan time.Time, func() bool)
	dials atomic.Int64 // dial attempts, for tests

	mu     sync.Mutex
	peers  map[string]*peerState
	closed bool
}

// NewPool binds PoolOptions.LocalAddr for dialling as the node creds names.
func NewPool(creds *Credentials, opts PoolOptions) (*Pool, error) {
	opts = opts.withDefaults()
	ua, err := net.ResolveUDPAddr("udp", opts.LocalAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: resolve %q: %w", opts.LocalAddr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("transport: bind %q: %w", opts.LocalAddr, err)
	}
	return &Pool{creds: creds, opts: opts, udp: udp, tr: &quic.Transport{Conn: udp},
		peers: map[string]*peerState{}}, nil
}

// Close closes every pooled connection (their waiters fail with ErrConnectionLost) and the
// socket; later requests fail with ErrClosed. Idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	peers := p.peers
	p.peers = map[string]*peerState{}
	p.mu.Unlock()
	for _, ps := range peers {
		ps.drop()
	}
	err := p.tr.Close()
	if uerr := p.udp.Close(); err == nil && !errors.Is(uerr, net.ErrClosed) {
		err = uerr
	}
	return err
}

// Conns is the number of live pooled connections (for tests and metrics).
func (p *Pool) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, ps := range p.peers {
		ps.mu.Lock()
		if ps.conn != nil && ps.conn.alive() {
			n++
		}
		ps.mu.Unlock()
	}
	return n
}

// peer returns the state of to.NodeID (case-insensitive), creating it within MaxPeers.
func (p *Pool) peer(to Peer) (*peerState, error) {
	p.mu.Lock()
	if ps := p.peers[to.NodeID]; ps != nil && !p.closed {
		p.mu.Unlock() // a key present was validated and lowered when it was added
		return ps, nil
	}
	p.mu.Unlock()
	if err := ValidNodeID(to.NodeID); err != nil {
		return nil, err
	}
	key := strings.ToLower(to.NodeID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	ps := p.peers[key]
	if ps == nil {
		if len(p.peers) >= p.opts.MaxPeers {
			return nil, ErrTooManyPeers
		}
		ps = &peerState{pool: p, nodeID: key, m: newPeerMetrics(p.opts.Metrics, key)}
		p.peers[key] = ps
	}
	return ps, nil
}

// Forget drops the pool entry of nodeID and closes its connection (a broker that left the cluster).
func (p *Pool) Forget(nodeID string) {
	p.mu.Lock()
	ps := p.peers[strings.ToLower(nodeID)]
	delete(p.peers, strings.ToLower(nodeID))
	p.mu.Unlock()
	if ps != nil {
		ps.drop()
	}
}

// peerState is one node id's pool: its connection, in-flight count and backoff.
type peerState struct {
	pool   *Pool
	nodeID string
	m      *peerMetrics

	mu       sync.Mutex
	inflight int
	addr     string
	conn     *clientConn
	dialing  chan struct{} // closed when the running dial ends
	failures int
	retryAt  time.Time
	dialled  bool // a dial was attempted before (the next one counts as a reconnect)
}

func (ps *peerState) acquire() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.inflight >= ps.pool.opts.MaxInflightPerPeer {
		ps.m.shed.Inc()
		return false
	}
	ps.inflight++
	ps.m.inflight.Inc()
	return true
}

func (ps *peerState) release() {
	ps.mu.Lock()
	ps.inflight--
	ps.m.inflight.Dec()
	ps.mu.Unlock()
}

func (ps *peerState) drop() {
	ps.mu.Lock()
	c := ps.conn
	ps.conn = nil
	ps.mu.Unlock()
	if c != nil {
		c.close(CodeNoError, "closed")
	}
}

// connection returns a live connection to addr, dialling when there is none: one dial at a
// time per peer (others wait for it within ctx); inside the backoff window it fails ErrBackoff.
func (ps *peerState) connection(ctx context.Context, addr string) (*clientConn, error) {
	for {
		ps.mu.Lock()
		if ps.conn != nil && (!ps.conn.alive() || ps.addr != addr) {
			old := ps.conn
			ps.conn = nil
			defer old.close(CodeNoError, "replaced")
		}
		if ps.conn != nil {
			c := ps.conn
			ps.mu.Unlock()
			return c, nil
		}
		if wait := ps.dialing; wait != nil {
			ps.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if now := ps.pool.opts.Now(); now.Before(ps.retryAt) {
			ps.mu.Unlock()
			return nil, fmt.Errorf("%w: %s for another %v", ErrBackoff, ps.nodeID, ps.retryAt.Sub(now))
		}
		done := make(chan struct{})
		ps.dialing = done
		if ps.dialled {
			ps.m.reconnects.Inc()
		}
		ps.dialled = true
		ps.mu.Unlock()
		c, err := ps.pool.dial(ps.nodeID, addr, ps.m)
		ps.dialed(c, addr, err, done)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

func (ps *peerState) dialed(c *clientConn, addr string, err error, done chan struct{}) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.dialing = nil
	close(done)
	if err != nil {
		ps.failures++
		ps.retryAt = ps.pool.opts.Now().Add(ps.pool.opts.Backoff.Delay(ps.failures, ps.pool.opts.Jitter()))
		return
	}
	ps.m.connections.Inc()
	ps.failures, ps.retryAt = 0, time.Time{}
	ps.conn, ps.addr = c, addr
}

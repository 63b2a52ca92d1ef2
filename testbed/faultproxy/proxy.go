package faultproxy

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Errors of New and the control listener. Test with errors.Is.
var (
	// ErrNotLoopback: an address (listen, upstream, control or a client) is not on 127.0.0.0/8 or ::1.
	// Listen and Upstream may leave loopback only with Config.AllowNonLoopback; control never.
	ErrNotLoopback = errors.New("faultproxy: address is not loopback")
	// ErrConfig: a Config field is missing or unusable (its message names the field).
	ErrConfig = errors.New("faultproxy: bad config")
	// ErrClosed: the Proxy has been closed.
	ErrClosed = errors.New("faultproxy: proxy closed")
)

// Defaults of Config.
const (
	// DefaultListen is the listen address when Config.Listen is empty: a free loopback port.
	DefaultListen = "127.0.0.1:0"
	// DefaultMaxSessions bounds the upstream sockets (one per client address): 1024.
	DefaultMaxSessions = 1024
	// DefaultSocketBuffer is the SO_RCVBUF/SO_SNDBUF requested on every socket: 4 MiB (the kernel
	// may grant less).
	DefaultSocketBuffer = 4 << 20
)

// Config configures New. Only Upstream is required.
type Config struct {
	// Listen is the UDP address clients send to ("host:port"); default DefaultListen.
	Listen string
	// Upstream is the UDP address every datagram is forwarded to ("host:port", port non-zero).
	Upstream string
	// Seed seeds the links' PRNGs: link d draws from PCG(Seed, d+1), so one seed replays a run.
	// 0 picks a random seed; Proxy.Seed returns (and New logs) the one in use.
	Seed uint64
	// ToServer and ToClient are the links' initial faults (zero: clean forwarding).
	ToServer, ToClient Faults
	// AllowNonLoopback lets Listen and Upstream leave 127.0.0.0/8 and ::1. Tests never set it.
	AllowNonLoopback bool
	// MaxSessions bounds the client addresses served at once (0 = DefaultMaxSessions); datagrams of
	// further clients are dropped (DroppedSession).
	MaxSessions int
	// SocketBuffer is the socket buffer size in bytes requested on every socket (0 = DefaultSocketBuffer).
	SocketBuffer int
	// Logger receives the start line (with the seed) and every fault change; nil = slog.Default().
	Logger *slog.Logger
	// Clock is the time source of the fault decisions and the delay timers; nil = SystemClock{}.
	Clock Clock
}

// Proxy is a UDP fault proxy for one upstream address: it listens on one socket, opens one upstream
// socket per client address (so the upstream sees one distinct address per client and its replies
// go back to the right client), and applies two links' faults: ToServer to datagrams from clients,
// ToClient to replies. Every method is safe for concurrent use.
type Proxy struct {
	seed      uint64
	ln        *net.UDPConn
	listen    netip.AddrPort
	listenUDP *net.UDPAddr // the resolved Config.Listen
	upstream  *net.UDPAddr
	upAddr    netip.AddrPort // upstream, unmapped
	links     [numLinks]*link
	log       *slog.Logger
	clock     Clock
	pool      *bufPool
	maxSess   int
	sockBuf   int
	allowAny  bool
	done      chan struct{}
	wg        sync.WaitGroup

	changeMu sync.Mutex // orders fault changes so the change list matches the order they applied
	mu       sync.Mutex
	sessions map[netip.AddrPort]*session
	servers  []*http.Server
	changes  []Change
	closed   bool
}

// session is one client address and its dedicated upstream socket.
type session struct {
	client netip.AddrPort
	up     *net.UDPConn
}

// New checks cfg, binds the listening socket, starts forwarding and logs the start line with the
// seed. Errors wrap ErrConfig, ErrNotLoopback or ErrInvalidFaults, or are the socket's error.
func New(cfg Config) (*Proxy, error) {
	p, err := newProxy(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.ListenUDP("udp", p.listenUDP)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen %s: %w", p.listenUDP, err)
	}
	p.ln = ln
	p.listen = unmap(ln.LocalAddr().(*net.UDPAddr).AddrPort())
	_ = ln.SetReadBuffer(p.sockBuf)
	_ = ln.SetWriteBuffer(p.sockBuf)
	now := p.clock.Now()
	for d, f := range []Faults{cfg.ToServer, cfg.ToClient} {
		p.record(Direction(d), "config", p.links[d].get(), f, now)
		p.links[d].set(f, now, false)
	}
	p.log.Info("faultproxy: started", "listen", p.listen.String(), "upstream", p.upAddr.String(),
		"seed", p.seed, "prng", "link d uses PCG(seed, d+1); to-server d=0, to-client d=1")
	for d, l := range p.links {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			l.run(p.done, func(q packet) { p.deliver(Direction(d), q) })
		}()
	}
	p.wg.Add(1)
	go p.readClients()
	return p, nil
}

// newProxy validates cfg and builds the Proxy without opening a socket.
func newProxy(cfg Config) (*Proxy, error) {
	for d, f := range []Faults{cfg.ToServer, cfg.ToClient} {
		if err := f.Validate(); err != nil {
			return nil, fmt.Errorf("%v: %w", Direction(d), err)
		}
	}
	if cfg.MaxSessions < 0 || cfg.SocketBuffer < 0 {
		return nil, fmt.Errorf("%w: MaxSessions and SocketBuffer must not be negative", ErrConfig)
	}
	up, err := resolveUDP("upstream", cfg.Upstream, cfg.AllowNonLoopback)
	if err != nil {
		return nil, err
	}
	if up.Port == 0 {
		return nil, fmt.Errorf("%w: upstream %q needs a port", ErrConfig, cfg.Upstream)
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	listen, err := resolveUDP("listen", cfg.Listen, cfg.AllowNonLoopback)
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		seed: cfg.Seed, listenUDP: listen, upstream: up, upAddr: unmap(up.AddrPort()), log: cfg.Logger, clock: cfg.Clock, pool: newBufPool(),
		maxSess: cfg.MaxSessions, sockBuf: cfg.SocketBuffer, allowAny: cfg.AllowNonLoopback,
		done: make(chan struct{}), sessions: map[netip.AddrPort]*session{},
	}
	if p.seed == 0 {
		p.seed = randomSeed()
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.clock == nil {
		p.clock = SystemClock{}
	}
	if p.maxSess == 0 {
		p.maxSess = DefaultMaxSessions
	}
	if p.sockBuf == 0 {
		p.sockBuf = DefaultSocketBuffer
	}
	for d := range p.links {
		p.links[d] = newLink(Direction(d), p.seed, p.clock, p.pool)
	}
	return p, nil
}

// resolveUDP resolves a "host:port" UDP address; unless allowAny it must be loopback (an empty or
// unspecified host, which binds every interface, is refused too).
func resolveUDP(what, addr string, allowAny bool) (*net.UDPAddr, error) {
	if addr == "" {
		return nil, fmt.Errorf("%w: %s address is required", ErrConfig, what)
	}
	a, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %v", ErrConfig, what, addr, err)
	}
	if !allowAny && (a.IP == nil || !a.IP.IsLoopback()) {
		return nil, fmt.Errorf("%w: %s %q (want 127.0.0.0/8 or ::1)", ErrNotLoopback, what, addr)
	}
	return a, nil
}

// unmap turns an IPv4-mapped IPv6 address into plain IPv4.
func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }

func randomSeed() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails on Linux (crypto/rand panics rather than return short)
		if s := binary.LittleEndian.Uint64(b[:]); s != 0 {
			return s
		}
	}
}

// Addr returns the address clients send to (the bound listen address, with its real port).
func (p *Proxy) Addr() netip.AddrPort { return p.listen }

// Upstream returns the resolved upstream address.
func (p *Proxy) Upstream() netip.AddrPort { return p.upAddr }

// Seed returns the PRNG seed in use (Config.Seed, or the random one chosen when it was 0).
func (p *Proxy) Seed() uint64 { return p.seed }

// readClients reads the listening socket: every datagram goes through the ToServer link to its
// client's upstream socket.
func (p *Proxy) readClients() {
	defer p.wg.Done()
	scratch := make([]byte, MaxDatagramSize)
	var out []packet
	l := p.links[ToServer]
	for {
		n, from, err := p.ln.ReadFromUDPAddrPort(scratch)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		from = unmap(from)
		s := p.session(from)
		if s == nil {
			l.c.in.Add(1)
			l.c.bytesIn.Add(uint64(n))
			l.c.dropSession.Add(1)
			continue
		}
		out = l.handle(p.packetOf(scratch[:n], s), p.clock.Now(), out[:0])
		for _, q := range out {
			p.deliver(ToServer, q)
		}
	}
}

// readUpstream reads one session's upstream socket: every reply goes through the ToClient link.
func (p *Proxy) readUpstream(s *session) {
	defer p.wg.Done()
	scratch := make([]byte, MaxDatagramSize)
	var out []packet
	l := p.links[ToClient]
	for {
		n, err := s.up.Read(scratch)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // e.g. ECONNREFUSED from an ICMP port unreachable: the upstream is not up yet
		}
		out = l.handle(p.packetOf(scratch[:n], s), p.clock.Now(), out[:0])
		for _, q := range out {
			p.deliver(ToClient, q)
		}
	}
}

// packetOf copies b into a pooled buffer.
func (p *Proxy) packetOf(b []byte, s *session) packet {
	buf := p.pool.get(len(b))
	copy(*buf, b)
	return packet{buf: buf, n: len(b), s: s}
}

// session returns the client's session, opening its upstream socket on first use; nil when the
// client is refused (not loopback, MaxSessions reached, the socket failed, or the proxy closed).
func (p *Proxy) session(client netip.AddrPort) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sessions[client]; ok {
		return s
	}
	if p.closed || len(p.sessions) >= p.maxSess || (!p.allowAny && !client.Addr().IsLoopback()) {
		return nil
	}
	up, err := net.DialUDP("udp", nil, p.upstream)
	if err != nil {
		p.log.Warn("faultproxy: upstream socket", "client", client.String(), "err", err)
		return nil
	}
	_ = up.SetReadBuffer(p.sockBuf)
	_ = up.SetWriteBuffer(p.sockBuf)
	s := &session{client: client, up: up}
	p.sessions[client] = s
	p.wg.Add(1)
	go p.readUpstream(s)
	return s
}

// deliver writes q onward in direction d and frees its buffer.
func (p *Proxy) deliver(d Direction, q packet) {
	l := p.links[d]
	b := (*q.buf)[:q.n]
	var err error
	if d == ToServer {
		_, err = q.s.up.Write(b)
	} else {
		_, err = p.ln.WriteToUDPAddrPort(b, q.s.client)
	}
	if err != nil {
		l.c.dropWrite.Add(1)
	} else {
		l.c.forwarded.Add(1)
		l.c.bytesForwarded.Add(uint64(q.n))
	}
	p.pool.put(q.buf)
}

// Sessions returns the number of client addresses with an upstream socket.
func (p *Proxy) Sessions() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sessions)
}

// Close stops forwarding: it closes every socket and control listener, waits for the proxy's
// goroutines and frees the datagrams still queued (DroppedClosed). Further calls return nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	sessions, servers := p.sessions, p.servers
	p.mu.Unlock()
	close(p.done)
	err := p.ln.Close()
	for _, s := range sessions {
		s.up.Close()
	}
	for _, srv := range servers {
		srv.Close()
	}
	p.wg.Wait()
	for _, l := range p.links {
		l.drain()
	}
	return err
}

func (p *Proxy) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// bufPool pools datagram buffers in two size classes, so a queued small datagram does not pin 64 KiB.
type bufPool struct{ small, large sync.Pool }

const smallBuf = 2048

func newBufPool() *bufPool {
	bp := &bufPool{}
	bp.small.New = func() any { b := make([]byte, smallBuf); return &b }
	bp.large.New = func() any { b := make([]byte, MaxDatagramSize); return &b }
	return bp
}

// get returns a buffer of length at least n (n <= MaxDatagramSize).
func (bp *bufPool) get(n int) *[]byte {
	if n <= smallBuf {
		return bp.small.Get().(*[]byte)
	}
	return bp.large.Get().(*[]byte)
}

func (bp *bufPool) put(b *[]byte) {
	if b == nil {
		return
	}
	if cap(*b) == smallBuf {
		bp.small.Put(b)
	} else {
		bp.large.Put(b)
	}
}

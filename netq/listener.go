package netq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Application error codes carried in QUIC CONNECTION_CLOSE / RESET_STREAM / STOP_SENDING on
// the client role. PROPOSED here (the v1 sources leave them unspecified); documented in
// docs/operations.md.
const (
	// CodeNoError closes a connection or stream normally.
	CodeNoError quic.ApplicationErrorCode = 0x0
	// CodeConnectionLimit: the listener is at Options.MaxConnections.
	CodeConnectionLimit quic.ApplicationErrorCode = 0x101
	// CodeShutdown: the broker is stopping (SIGTERM drain finished or expired).
	CodeShutdown quic.ApplicationErrorCode = 0x102
	// CodeAuthTimeout: no stream of the connection completed a successful auth within the
	// broker's auth deadline (FELIX_AUTH_TIMEOUT_MS); the connection's slot is freed.
	CodeAuthTimeout quic.ApplicationErrorCode = 0x103
	// CodeProtocol: a stream carried a frame that violates the protocol; the stream is
	// reset with this code after the typed `error` answer was written.
	CodeProtocol quic.StreamErrorCode = 0x201
	// CodeSlowConsumer: an event stream was ended because its subscriber stopped reading.
	CodeSlowConsumer quic.StreamErrorCode = 0x202
)

// ErrListenerClosed is returned by Accept after Close. It wraps net.ErrClosed.
var ErrListenerClosed = fmt.Errorf("netq: listener closed: %w", net.ErrClosed)

// Options configure a client-role listener. Zero values take the defaults in brackets.
// Every bound fails cleanly: a connection past MaxConnections is closed with
// CodeConnectionLimit; a stream past the per-connection limits is never granted by QUIC
// flow control (the peer's open blocks or fails), so memory stays bounded.
type Options struct {
	MaxConnections           int    // concurrent connections [1024]
	MaxBidiStreamsPerConn    int64  // concurrent client-opened bi streams per connection [256]
	MaxUniStreamsPerConn     int64  // concurrent client-opened uni streams per connection [256]
	InitialStreamWindowBytes uint64 // stream receive window at start [1 MiB]
	MaxStreamWindowBytes     uint64 // stream receive window ceiling [16 MiB]
	InitialConnWindowBytes   uint64 // connection receive window at start [4 MiB]
	MaxConnWindowBytes       uint64 // connection receive window ceiling [64 MiB]
	UDPRecvBufferBytes       int    // SO_RCVBUF request [8 MiB]; quic-go raises it further when allowed
	UDPSendBufferBytes       int    // SO_SNDBUF request [8 MiB]
	InitialPacketSize        uint16 // starting QUIC packet size in bytes [1280; 0 keeps quic-go's]
	DisablePathMTUDiscovery  bool   // stop probing above InitialPacketSize
	HandshakeTimeout         time.Duration
	IdleTimeout              time.Duration // [30 s]
	KeepAlive                time.Duration // [10 s]
	// StatelessResetKey lets the transport answer packets of unknown connections (those of
	// a previous process on the same port) with a stateless reset, RFC 9000 §10.3. It must
	// be the same across restarts: LoadOrCreateResetKey keeps it in the data dir. nil
	// disables resets (clients of a crashed process then wait out their idle timeout).
	StatelessResetKey *quic.StatelessResetKey
	// Evict is asked, when a new connection finds MaxConnections reached, to close one
	// connection the caller values less (the broker: its oldest unauthenticated one) and
	// Release it; it reports whether it did. The new connection is then accepted instead of
	// refused. nil = refuse. Called on the Accept goroutine; it must not call Accept.
	Evict func() bool
}

func (o Options) withDefaults() Options {
	def := func(v *uint64, d uint64) {
		if *v == 0 {
			*v = d
		}
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 1024
	}
	if o.MaxBidiStreamsPerConn == 0 {
		o.MaxBidiStreamsPerConn = 256
	}
	if o.MaxUniStreamsPerConn == 0 {
		o.MaxUniStreamsPerConn = 256
	}
	def(&o.InitialStreamWindowBytes, 1<<20)
	def(&o.MaxStreamWindowBytes, 16<<20)
	def(&o.InitialConnWindowBytes, 4<<20)
	def(&o.MaxConnWindowBytes, 64<<20)
	if o.UDPRecvBufferBytes == 0 {
		o.UDPRecvBufferBytes = 8 << 20
	}
	if o.UDPSendBufferBytes == 0 {
		o.UDPSendBufferBytes = 8 << 20
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = 30 * time.Second
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = 10 * time.Second
	}
	return o
}

// QUICConfig returns the quic-go configuration these options describe (also used by the
// test client and the SDK to mirror the windows on the dialling side).
func (o Options) QUICConfig() *quic.Config {
	o = o.withDefaults()
	return &quic.Config{
		HandshakeIdleTimeout:           o.HandshakeTimeout,
		MaxIdleTimeout:                 o.IdleTimeout,
		KeepAlivePeriod:                o.KeepAlive,
		InitialStreamReceiveWindow:     o.InitialStreamWindowBytes,
		MaxStreamReceiveWindow:         o.MaxStreamWindowBytes,
		InitialConnectionReceiveWindow: o.InitialConnWindowBytes,
		MaxConnectionReceiveWindow:     o.MaxConnWindowBytes,
		MaxIncomingStreams:             o.MaxBidiStreamsPerConn,
		MaxIncomingUniStreams:          o.MaxUniStreamsPerConn,
		InitialPacketSize:              o.InitialPacketSize,
		DisablePathMTUDiscovery:        o.DisablePathMTUDiscovery,
	}
}

// Listener is the client-role QUIC endpoint. Accept is safe for one goroutine; Close and
// Active are safe from any.
type Listener struct {
	opts      Options
	udp       *net.UDPConn
	transport *quic.Transport
	ql        *quic.Listener
	active    atomic.Int64
	refused   atomic.Int64
	closeOnce sync.Once
}

// Listen binds addr (UDP, "host:port"; port 0 picks one) and starts the client role with
// cert. Errors: address in use / unresolvable (net errors, wrapped with the address).
func Listen(addr string, cert tls.Certificate, opts Options) (*Listener, error) {
	opts = opts.withDefaults()
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("netq: resolve %q: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return nil, fmt.Errorf("netq: listen %q: %w", addr, err)
	}
	// Requests are best effort: the kernel clamps to net.core.{r,w}mem_max; quic-go then
	// tries its own 7 MiB target (with SO_RCVBUFFORCE when privileged). See docs/bench/netq.md.
	_ = udp.SetReadBuffer(opts.UDPRecvBufferBytes)
	_ = udp.SetWriteBuffer(opts.UDPSendBufferBytes)
	tr := &quic.Transport{Conn: udp, StatelessResetKey: opts.StatelessResetKey}
	ql, err := tr.Listen(ClientRoleTLS(cert), opts.QUICConfig())
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("netq: quic listen %q: %w", addr, err)
	}
	return &Listener{opts: opts, udp: udp, transport: tr, ql: ql}, nil
}

// Addr is the bound UDP address.
func (l *Listener) Addr() net.Addr { return l.ql.Addr() }

// Active is the number of accepted connections not yet released.
func (l *Listener) Active() int64 { return l.active.Load() }

// Refused counts connections closed with CodeConnectionLimit.
func (l *Listener) Refused() int64 { return l.refused.Load() }

// Accept waits for the next connection within the MaxConnections bound. A connection over
// the bound takes the slot Options.Evict frees, else it is closed with CodeConnectionLimit
// ("connection limit") and never returned.
// The caller must call Conn.Release when done with it. Errors: ctx's error, or
// ErrListenerClosed after Close.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	for {
		qc, err := l.ql.Accept(ctx)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, quic.ErrServerClosed) {
				return nil, ErrListenerClosed
			}
			return nil, err
		}
		if l.active.Add(1) > int64(l.opts.MaxConnections) && (l.opts.Evict == nil || !l.opts.Evict()) {
			l.active.Add(-1)
			l.refused.Add(1)
			_ = qc.CloseWithError(CodeConnectionLimit, "connection limit")
			continue
		}
		return &Conn{Conn: qc, listener: l}, nil
	}
}

// Close stops accepting and closes the socket. Live connections end abruptly (no
// CONNECTION_CLOSE): close them with CodeShutdown first. Idempotent.
func (l *Listener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		err = l.ql.Close()
		if terr := l.transport.Close(); err == nil {
			err = terr
		}
		if uerr := l.udp.Close(); err == nil {
			err = uerr
		}
	})
	return err
}

// StopAccepting closes the listening side only: Accept returns ErrListenerClosed, and
// established connections keep running (used at the start of a SIGTERM drain).
func (l *Listener) StopAccepting() error { return l.ql.Close() }

// Conn is one accepted client connection counted against MaxConnections.
type Conn struct {
	*quic.Conn
	listener *Listener
	released atomic.Bool
}

// Release returns the connection's slot in MaxConnections. Idempotent; call once the
// connection has closed (after its Context is done).
func (c *Conn) Release() {
	if c.released.CompareAndSwap(false, true) {
		c.listener.active.Add(-1)
	}
}

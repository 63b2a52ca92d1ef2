package transport

// The internal listener: accept, Hello or StorageHello, then one serving goroutine per stream.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"felix/proto"

	"github.com/VictoriaMetrics/metrics"
	"github.com/quic-go/quic-go"
)

// Handler answers one request from the peer with node id peer. It returns exactly one
// terminal answer (nil is answered Error(Unavailable)); the transport writes it with the
// request's correlation id whatever the answer carries. req's []byte fields alias the read
// buffer: copy what must outlive the call. Requests of one stream are handled in order;
// streams run concurrently.
type Handler func(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage

// Options configure a Listener. Zero values take the defaults in brackets.
type Options struct {
	MaxFrameBytes     uint32        // body bound of a frame, both directions [16 MiB]
	MaxConnections    int           // concurrent peer connections [256]
	MaxStreamsPerConn int64         // concurrent peer-opened streams per connection [64]
	HandshakeTimeout  time.Duration // QUIC handshake and the wait for Hello [5 s]
	IdleTimeout       time.Duration // a connection with no traffic closes [60 s]
	Logger            *slog.Logger  // [slog.Default()]
	Metrics           *metrics.Set  // the felix_internal_listener_* series (metrics.go) [a private set]
	// StatelessResetKey, when set, lets a restarted listener answer packets of its
	// predecessor's connections with a stateless reset (RFC 9000 §10.3), so a peer whose
	// connection outlived this process (SIGKILL sends no CONNECTION_CLOSE) learns at its
	// next packet that it is gone and redials, instead of waiting out IdleTimeout with
	// every request timing out. It must survive restarts and stay secret [nil: no resets].
	StatelessResetKey *quic.StatelessResetKey
}

func (o Options) withDefaults() Options {
	if o.MaxFrameBytes == 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.MaxFrameBytes < MinMaxFrameBytes {
		o.MaxFrameBytes = MinMaxFrameBytes
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 256
	}
	if o.MaxStreamsPerConn <= 0 {
		o.MaxStreamsPerConn = 64
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewSet()
	}
	return o
}

func (o Options) quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:  o.HandshakeTimeout,
		MaxIdleTimeout:        o.IdleTimeout,
		MaxIncomingStreams:    o.MaxStreamsPerConn,
		MaxIncomingUniStreams: -1, // FLXI uses bidirectional streams only
	}
}

// Listener is the broker-internal QUIC endpoint (ALPN felix-internal/1 only).
type Listener struct {
	creds  *Credentials
	opts   Options
	udp    *net.UDPConn
	tr     *quic.Transport
	ql     *quic.Listener
	m      *listenerMetrics
	active atomic.Int64
	wg     sync.WaitGroup
	once   sync.Once
	stop   sync.Once // StopAccepting

	mu     sync.Mutex
	conns  map[*quic.Conn]struct{}
	closed bool

	// olderHello and olderClose are test seams: a listener from before StorageHello, which
	// answers it UnsupportedKind (olderHello), or only closes with CodeMalformed (both).
	olderHello, olderClose bool
}

// Listen binds addr (UDP host:port; port 0 picks one) for the node creds names. Without
// mTLS it logs Credentials.Warning at warn level (the startup warning of the seed). Errors:
// resolve/bind failures wrapped with the address.
func Listen(addr string, creds *Credentials, opts Options) (*Listener, error) {
	opts = opts.withDefaults()
	if w := creds.Warning(); w != "" {
		opts.Logger.Warn(w, "node_id", creds.NodeID(), "bind", addr)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: resolve %q: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %q: %w", addr, err)
	}
	m := newListenerMetrics(opts.Metrics)
	tlsConf := creds.ServerTLS()
	forClient := tlsConf.GetConfigForClient
	tlsConf.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		conf, err := forClient(hello)
		if err != nil {
			m.refused[refusedALPN].Inc()
		}
		return conf, err
	}
	tr := &quic.Transport{Conn: udp, StatelessResetKey: opts.StatelessResetKey}
	ql, err := tr.Listen(tlsConf, opts.quicConfig())
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("transport: quic listen %q: %w", addr, err)
	}
	return &Listener{creds: creds, opts: opts, udp: udp, tr: tr, ql: ql, m: m, conns: map[*quic.Conn]struct{}{}}, nil
}

// Addr is the bound UDP address.
func (l *Listener) Addr() net.Addr { return l.ql.Addr() }

// Active is the number of connections being served.
func (l *Listener) Active() int64 { return l.active.Load() }

// Serve accepts connections and serves them with h until ctx ends or Close; it returns
// ErrClosed after Close, else ctx's error. Each connection must open with Hello.
func (l *Listener) Serve(ctx context.Context, h Handler) error {
	defer l.wg.Wait()
	for {
		qc, err := l.ql.Accept(ctx)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, quic.ErrServerClosed) {
				return ErrClosed
			}
			return err
		}
		if l.active.Add(1) > int64(l.opts.MaxConnections) {
			l.active.Add(-1)
			l.m.refused[refusedLimit].Inc()
			_ = qc.CloseWithError(CodeOverload, "connection limit")
			continue
		}
		if !l.track(qc) {
			l.active.Add(-1)
			_ = qc.CloseWithError(CodeNoError, "shutdown")
			return ErrClosed
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.active.Add(-1)
			defer l.untrack(qc)
			l.serveConn(ctx, qc, h)
		}()
	}
}

func (l *Listener) track(qc *quic.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[qc] = struct{}{}
	return true
}

func (l *Listener) untrack(qc *quic.Conn) {
	l.mu.Lock()
	delete(l.conns, qc)
	l.mu.Unlock()
}

// StopAccepting closes the QUIC listener only: new connections are refused while the
// connections being served carry on (and Serve keeps waiting for them) until Close. The
// first step of a drain. Idempotent.
func (l *Listener) StopAccepting() error {
	var err error
	l.stop.Do(func() { err = l.ql.Close() })
	return err
}

// Close stops accepting, closes every connection with CONNECTION_CLOSE (CodeNoError,
// "shutdown": the peers' waiters fail at once) and the socket. Idempotent.
func (l *Listener) Close() error {
	var err error
	l.once.Do(func() {
		l.mu.Lock()
		l.closed = true
		for qc := range l.conns {
			_ = qc.CloseWithError(CodeNoError, "shutdown")
		}
		l.mu.Unlock()
		err = l.StopAccepting()
		if terr := l.tr.Close(); err == nil {
			err = terr
		}
		if uerr := l.udp.Close(); err == nil && !errors.Is(uerr, net.ErrClosed) {
			err = uerr
		}
	})
	return err
}

func (l *Listener) serveConn(ctx context.Context, qc *quic.Conn, h Handler) {
	// The handlers' ctx ends with the connection (cancel runs before wg.Wait), so a handler
	// waiting on it does not hold up Close.
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	first, peer, err := l.hello(ctx, qc)
	if err != nil {
		l.opts.Logger.Debug("internal: handshake refused", "remote", qc.RemoteAddr().String(), "err", err)
		return
	}
	l.m.accepted.Inc()
	l.m.active.Inc()
	defer l.m.active.Dec()
	serve := func(s *quic.Stream) {
		defer wg.Done()
		l.serveStream(ctx, qc, s, peer, h)
	}
	wg.Add(1)
	go serve(first)
	for {
		s, err := qc.AcceptStream(ctx)
		if err != nil {
			_ = qc.CloseWithError(CodeNoError, "")
			return
		}
		wg.Add(1)
		go serve(s)
	}
}

// hello reads the connection's first frame, which must be Hello, checks the claimed node id
// (under mTLS against the certificate) and answers HelloOk. Any failure closes the
// connection with its code; an Unauthorized claim is answered Error(Unauthorized) first.
func (l *Listener) hello(ctx context.Context, qc *quic.Conn) (*quic.Stream, string, error) {
	hctx, cancel := context.WithTimeout(ctx, l.opts.HandshakeTimeout)
	defer cancel()
	s, err := qc.AcceptStream(hctx)
	if err != nil {
		l.refuse(qc, refusedHello, CodeMalformed, "no Hello")
		return nil, "", err
	}
	_ = s.SetReadDeadline(time.Now().Add(l.opts.HandshakeTimeout))
	m, body, _, _, err := readMessage(s, nil, l.opts.MaxFrameBytes, "")
	l.m.received.Add(proto.InternalHeaderSize + len(body))
	if err != nil {
		reason := refusedHello
		if CloseCode(err) == CodeProtocolVersion {
			reason = refusedVersion
		}
		l.refuse(qc, reason, CloseCode(err), "bad Hello frame")
		return nil, "", err
	}
	_ = s.SetReadDeadline(time.Time{})
	claimed, answer, err := l.helloAnswer(ctx, qc, s, m)
	if err != nil {
		return nil, "", err
	}
	if err := l.checkPeer(qc, claimed); err != nil {
		l.m.refused[refusedUnauthorized].Inc()
		l.refuseHello(ctx, qc, s, m.Correlation())
		return nil, "", err
	}
	frame, err := encode(nil, answer, l.opts.MaxFrameBytes)
	if err == nil {
		_, err = s.Write(frame)
	}
	if err != nil {
		_ = qc.CloseWithError(CodeMalformed, "HelloOk not written")
		return nil, "", err
	}
	l.m.sent.Add(len(frame))
	return s, strings.ToLower(claimed), nil
}

// helloAnswer is the node id a first frame claims and its answer: HelloOk to Hello (0),
// StorageHelloOk with this broker's storage identity to StorageHello (32). Any other kind
// closes the connection with CodeMalformed, an unknown one (a newer Hello) after answering
// UnsupportedKind so its dialler can fall back (docs/internal-protocol.md, kinds 32/33).
func (l *Listener) helloAnswer(ctx context.Context, qc *quic.Conn, s *quic.Stream, m proto.InternalMessage) (string, proto.InternalMessage, error) {
	node := []byte(l.creds.NodeID())
	switch h := m.(type) {
	case *proto.Hello:
		return string(h.NodeID), &proto.HelloOk{CorrelationID: h.CorrelationID, NodeID: node}, nil
	case *proto.StorageHello:
		if !l.olderHello {
			return string(h.NodeID), &proto.StorageHelloOk{CorrelationID: h.CorrelationID, NodeID: node,
				StorageID: l.creds.StorageID()}, nil
		}
		m = &proto.Unknown{RawKind: h.Kind(), CorrelationID: h.CorrelationID}
	}
	if u, unknown := m.(*proto.Unknown); unknown && !l.olderClose {
		if frame, err := encode(nil, &proto.UnsupportedKind{CorrelationID: u.CorrelationID, RefusedKind: u.RawKind}, l.opts.MaxFrameBytes); err == nil {
			_, _ = s.Write(frame)
		}
		_ = s.Close()
		l.m.refused[refusedHello].Inc()
		l.lingerClose(ctx, qc, CodeMalformed, "first frame is not Hello")
	} else {
		l.refuse(qc, refusedHello, CodeMalformed, "first frame is not Hello")
	}
	return "", nil, fmt.Errorf("transport: first frame is %v, not Hello", m.Kind())
}

// refuse counts a connection refused during Hello under reason and closes it with code.
func (l *Listener) refuse(qc *quic.Conn, reason string, code quic.ApplicationErrorCode, why string) {
	l.m.refused[reason].Inc()
	_ = qc.CloseWithError(code, why)
}

func (l *Listener) checkPeer(qc *quic.Conn, claimed string) error {
	if !l.creds.Mutual() {
		return ValidNodeID(claimed)
	}
	state := qc.ConnectionState().TLS
	if len(state.PeerCertificates) == 0 {
		return CheckClaim(nil, claimed)
	}
	return CheckClaim(state.PeerCertificates[0], claimed)
}

// refuseHello answers Error(Unauthorized), ends the stream, and closes the connection with
// CodeUnauthorized once the peer closed it or HandshakeTimeout passed (so the answer is not
// cut off by the CONNECTION_CLOSE).
func (l *Listener) refuseHello(ctx context.Context, qc *quic.Conn, s *quic.Stream, corr uint64) {
	if frame, err := encode(nil, &proto.InternalError{CorrelationID: corr, Code: proto.InternalUnauthorized}, l.opts.MaxFrameBytes); err == nil {
		_, _ = s.Write(frame)
	}
	_ = s.Close()
	l.lingerClose(ctx, qc, CodeUnauthorized, "node id does not match the certificate")
}

// lingerClose closes qc with code once the peer closed it or HandshakeTimeout passed, so an
// answer just written is not cut off by the CONNECTION_CLOSE.
func (l *Listener) lingerClose(ctx context.Context, qc *quic.Conn, code quic.ApplicationErrorCode, why string) {
	t := time.NewTimer(l.opts.HandshakeTimeout)
	defer t.Stop()
	select {
	case <-qc.Context().Done():
	case <-ctx.Done():
	case <-t.C:
	}
	_ = qc.CloseWithError(code, why)
}

// serveStream reads requests until the stream ends. An unknown kind is answered
// UnsupportedKind and the stream goes on; a body that does not decode is refused Malformed
// (in the request's shape) and the stream is closed; a fatal header closes the connection.
func (l *Listener) serveStream(ctx context.Context, qc *quic.Conn, s *quic.Stream, peer string, h Handler) {
	var buf, out []byte
	for {
		m, body, corr, ok, err := readMessage(s, buf, l.opts.MaxFrameBytes, peer)
		if body != nil {
			l.m.received.Add(proto.InternalHeaderSize + len(body))
		}
		if body != nil && cap(body) <= int(l.opts.MaxFrameBytes) && cap(body) <= 1<<20 {
			buf = body[:0] // keep buffers up to 1 MiB for the next frame
		}
		if err != nil {
			l.streamError(qc, s, peer, err, corr, ok)
			return
		}
		answer := l.answer(ctx, peer, m, h)
		if out, err = encode(out, answer, l.opts.MaxFrameBytes); err != nil {
			l.opts.Logger.Warn("internal: answer not encodable", "peer", peer, "kind", answer.Kind().String(), "err", err)
			out, _ = encode(out, Refusal(m.Kind(), corr, proto.InternalUnavailable), l.opts.MaxFrameBytes)
		}
		setCorrelation(out, corr)
		if _, err := s.Write(out); err != nil {
			s.CancelRead(StreamMalformed)
			return
		}
		l.m.sent.Add(len(out))
	}
}

func (l *Listener) answer(ctx context.Context, peer string, m proto.InternalMessage, h Handler) proto.InternalMessage {
	switch m := m.(type) {
	case *proto.Unknown:
		l.m.unknown.Inc()
		l.m.unsupported.Inc()
		return &proto.UnsupportedKind{CorrelationID: m.CorrelationID, RefusedKind: m.RawKind}
	case *proto.Hello:
		l.m.request(proto.KindHello)
		return &proto.InternalError{CorrelationID: m.CorrelationID, Code: proto.InternalMalformed}
	}
	l.m.request(m.Kind())
	a := h(ctx, peer, m)
	if a == nil {
		return Refusal(m.Kind(), m.Correlation(), proto.InternalUnavailable)
	}
	if a.Kind() == proto.KindUnsupportedKind {
		l.m.unsupported.Inc()
	}
	return a
}

func (l *Listener) streamError(qc *quic.Conn, s *quic.Stream, peer string, err error, corr uint64, ok bool) {
	var fe *FrameError
	switch {
	case errors.As(err, &fe) && fe.Fatal:
		l.m.malformedC.Inc()
		l.opts.Logger.Warn("internal: fatal frame; closing the connection", "peer", peer, "err", err)
		_ = qc.CloseWithError(CloseCode(err), "fatal frame")
	case errors.As(err, &fe) && ok:
		l.m.malformedS.Inc()
		l.opts.Logger.Warn("internal: malformed frame; closing the stream", "peer", peer, "err", err)
		if frame, eerr := encode(nil, Refusal(fe.Kind, corr, proto.InternalMalformed), l.opts.MaxFrameBytes); eerr == nil {
			_, _ = s.Write(frame)
		}
		s.CancelRead(StreamMalformed)
		_ = s.Close()
	case errors.Is(err, io.EOF):
		_ = s.Close()
	case errors.As(err, &fe): // a body too short to carry a correlation id: nothing to answer on
		l.m.malformedS.Inc()
		s.CancelRead(StreamMalformed)
		s.CancelWrite(StreamMalformed)
	default:
		s.CancelRead(StreamMalformed)
		s.CancelWrite(StreamMalformed)
	}
}

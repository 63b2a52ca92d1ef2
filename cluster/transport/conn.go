package transport

// One pooled connection: StorageHello (or Hello) at dial, streams with a reader each, waiters by correlation id.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// clientConn is one dialled connection. Correlation ids are per connection (seed,
// "Correlation"): answers are matched here and nowhere else, whichever stream they arrive on.
type clientConn struct {
	pool    *Pool
	peer    string
	qc      *quic.Conn
	m       *peerMetrics
	streams []*clientStream
	// peerStorage is the storage identity the peer named in StorageHelloOk (zero: unknown),
	// fixed for the connection's life.
	peerStorage StorageID
	next        atomic.Uint32
	corr        atomic.Uint64

	mu      sync.Mutex
	waiters map[uint64]chan proto.InternalMessage
	pending map[uint64]*Pending // Pipeline's requests, completed in place (ordered.go)
	dead    bool

	omu     sync.Mutex
	ordered map[OrderKey]*clientStream // reserved streams of Pool.Pipeline (ordered.go)
}

type clientStream struct {
	s   *quic.Stream
	wmu sync.Mutex
}

// dial connects to nodeID at addr and opens the connection with StorageHello; a peer that
// predates it (errOlderPeer) is dialled once more, on a new connection, with Hello, and its
// identity stays unknown. Errors: ErrUnreachable (nothing sent), ErrWrongPeer,
// ErrUnauthorized, ErrProtocolVersion.
func (p *Pool) dial(nodeID, addr string, m *peerMetrics) (*clientConn, error) {
	c, err := p.dialHello(nodeID, addr, m, false)
	if errors.Is(err, errOlderPeer) {
		p.opts.Logger.Debug("internal: peer predates StorageHello; dialling with Hello", "peer", nodeID, "addr", addr)
		c, err = p.dialHello(nodeID, addr, m, true)
	}
	return c, err
}

// dialHello is one dial: QUIC, then StorageHello (Hello when legacy) on the first stream,
// then the other streams and their readers.
func (p *Pool) dialHello(nodeID, addr string, m *peerMetrics, legacy bool) (*clientConn, error) {
	p.dials.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.HandshakeTimeout)
	defer cancel()
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %q: %v", ErrUnreachable, nodeID, addr, err)
	}
	qc, err := p.tr.Dial(ctx, ua, p.creds.ClientTLS(nodeID), &quic.Config{
		HandshakeIdleTimeout:  p.opts.HandshakeTimeout,
		MaxIdleTimeout:        p.opts.IdleTimeout,
		MaxIncomingStreams:    -1, // the listener never opens streams
		MaxIncomingUniStreams: -1,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %s: %w", ErrUnreachable, nodeID, addr, err)
	}
	c := &clientConn{pool: p, peer: nodeID, qc: qc, m: m, waiters: map[uint64]chan proto.InternalMessage{}}
	first, err := c.hello(ctx, legacy)
	if err != nil {
		_ = qc.CloseWithError(CodeNoError, "handshake failed")
		return nil, err
	}
	c.streams = append(c.streams, &clientStream{s: first})
	for len(c.streams) < p.opts.StreamsPerConn {
		s, err := qc.OpenStream()
		if err != nil {
			break // the listener grants fewer streams; use those we have
		}
		c.streams = append(c.streams, &clientStream{s: s})
	}
	for _, s := range c.streams {
		go c.read(s.s)
	}
	go c.watch()
	return c, nil
}

// helloFrame is the first frame of a connection: StorageHello with the local identity, or
// Hello when legacy.
func (c *clientConn) helloFrame(corr uint64, legacy bool) ([]byte, error) {
	node := []byte(c.pool.creds.NodeID())
	var m proto.InternalMessage = &proto.StorageHello{CorrelationID: corr, NodeID: node, StorageID: c.pool.creds.StorageID()}
	if legacy {
		m = &proto.Hello{CorrelationID: corr, NodeID: node}
	}
	return encode(nil, m, c.pool.opts.MaxFrameBytes)
}

// hello sends StorageHello (Hello when legacy) on a new stream and checks the answer:
// StorageHelloOk (HelloOk) naming the dialled node id, whose storage identity the
// connection keeps; UnsupportedKind, or a close with CodeMalformed, to StorageHello is
// errOlderPeer; else the matching error.
func (c *clientConn) hello(ctx context.Context, legacy bool) (*quic.Stream, error) {
	s, err := c.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: open stream to %s: %v", ErrUnreachable, c.peer, err)
	}
	corr := c.corr.Add(1)
	frame, err := c.helloFrame(corr, legacy)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	_ = s.SetDeadline(deadline)
	if _, err := s.Write(frame); err != nil {
		return nil, c.lost(fmt.Errorf("write Hello: %w", err), legacy)
	}
	m, _, _, _, err := readMessage(s, nil, c.pool.opts.MaxFrameBytes, c.peer)
	if err != nil {
		return nil, c.lost(fmt.Errorf("read HelloOk: %w", err), legacy)
	}
	_ = s.SetDeadline(time.Time{})
	switch m := m.(type) {
	case *proto.HelloOk: // to StorageHello too: a peer naming no identity, which stays unknown
		if m.CorrelationID == corr && strings.EqualFold(string(m.NodeID), c.peer) {
			return s, nil
		}
		return nil, fmt.Errorf("%w: dialled %s, HelloOk names %q", ErrWrongPeer, c.peer, m.NodeID)
	case *proto.StorageHelloOk:
		if !legacy && m.CorrelationID == corr && strings.EqualFold(string(m.NodeID), c.peer) {
			c.peerStorage = StorageID(m.StorageID)
			return s, nil
		}
		return nil, fmt.Errorf("%w: dialled %s, StorageHelloOk names %q", ErrWrongPeer, c.peer, m.NodeID)
	case *proto.UnsupportedKind:
		if !legacy && m.RefusedKind == proto.KindStorageHello {
			return nil, fmt.Errorf("%w: %s refused StorageHello", errOlderPeer, c.peer)
		}
	case *proto.InternalError:
		if m.Code == proto.InternalUnauthorized {
			return nil, fmt.Errorf("%w: by %s", ErrUnauthorized, c.peer)
		}
	}
	return nil, fmt.Errorf("%w: %s answered Hello with %v", ErrUnreachable, c.peer, m.Kind())
}

// lost maps an I/O error of the handshake to the reason the peer gave in its close code; a
// close with CodeMalformed in answer to StorageHello (not legacy) is how a listener from
// before StorageHello refuses a first frame that is not Hello: errOlderPeer.
func (c *clientConn) lost(err error, legacy bool) error {
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote {
		switch ae.ErrorCode {
		case CodeMalformed:
			if !legacy {
				return fmt.Errorf("%w: %s closed the connection: %w", errOlderPeer, c.peer, err)
			}
		case CodeProtocolVersion:
			return fmt.Errorf("%w: %s: %w", ErrProtocolVersion, c.peer, err)
		case CodeUnauthorized:
			return fmt.Errorf("%w: by %s: %w", ErrUnauthorized, c.peer, err)
		}
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, c.peer, err)
}

func (c *clientConn) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.dead && c.qc.Context().Err() == nil
}

func (c *clientConn) close(code quic.ApplicationErrorCode, why string) {
	_ = c.qc.CloseWithError(code, why)
}

// watch fails every waiter when the connection ends (seed: every request terminates).
func (c *clientConn) watch() {
	<-c.qc.Context().Done()
	c.mu.Lock()
	c.dead = true
	waiters, pending := c.waiters, c.pending
	c.waiters, c.pending = nil, nil
	c.mu.Unlock()
	for _, w := range waiters {
		close(w)
	}
	for _, pd := range pending {
		pd.complete(nil, fmt.Errorf("%w: %s", ErrConnectionLost, c.peer))
	}
}

// read delivers the answers arriving on s. A frame the peer should not have sent closes the
// connection (CodeMalformed / CodeProtocolVersion): only this peer's connection is affected.
func (c *clientConn) read(s *quic.Stream) {
	var buf []byte // reused while the answers decoded from it hold no bytes of it (scalarAnswer)
	for {
		m, body, _, _, err := readMessage(s, buf, c.pool.opts.MaxFrameBytes, c.peer)
		buf = nil
		if err == nil && scalarAnswer(m.Kind()) && cap(body) <= 64<<10 {
			buf = body[:0]
		}
		if err != nil {
			var fe *FrameError
			if errors.As(err, &fe) {
				c.pool.opts.Logger.Warn("internal: bad frame from peer; closing the connection", "peer", c.peer, "err", err)
				c.close(CloseCode(err), "bad frame")
			} else if c.qc.Context().Err() == nil {
				c.close(CodeMalformed, "stream ended")
			}
			return
		}
		c.m.received.Add(proto.InternalHeaderSize + len(body))
		corr := m.Correlation()
		c.mu.Lock()
		w := c.waiters[corr]
		delete(c.waiters, corr)
		pd := c.pending[corr]
		delete(c.pending, corr)
		c.mu.Unlock()
		if w != nil {
			w <- m // capacity 1, one answer per correlation id
		} else if pd != nil {
			c.m.observe(pd.start)
			pd.complete(m, nil)
		}
	}
}

// roundTrip sends frame (its correlation id overwritten) on the next stream and waits for the
// answer, the connection's end, RequestTimeout, or ctx.
func (c *clientConn) roundTrip(ctx context.Context, frame []byte) (proto.InternalMessage, error) {
	st := c.streams[int(c.next.Add(1))%len(c.streams)]
	corr, w, err := c.send(st, frame)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, corr, w)
}

// send registers a waiter under a fresh correlation id, writes frame carrying it on st and
// returns the waiter; on a failed write the waiter is forgotten.
func (c *clientConn) send(st *clientStream, frame []byte) (uint64, chan proto.InternalMessage, error) {
	corr := c.corr.Add(1)
	setCorrelation(frame, corr)
	w := getWaiter()
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		putWaiter(w)
		return 0, nil, fmt.Errorf("%w: %s", ErrConnectionLost, c.peer)
	}
	c.waiters[corr] = w
	c.mu.Unlock()
	if err := c.write(st, frame); err != nil {
		c.forget(corr)
		return 0, nil, err
	}
	return corr, w, nil
}

// write writes one whole frame on st. A failed write closes the connection: a partial frame
// would corrupt the stream's framing. Errors wrap ErrConnectionLost.
func (c *clientConn) write(st *clientStream, frame []byte) error {
	st.wmu.Lock()
	_ = st.s.SetWriteDeadline(time.Now().Add(c.pool.opts.RequestTimeout))
	_, err := st.s.Write(frame)
	st.wmu.Unlock()
	if err != nil {
		c.close(CodeNoError, "write failed")
		return fmt.Errorf("%w: %s: write: %v", ErrConnectionLost, c.peer, err)
	}
	c.m.sent.Add(len(frame))
	return nil
}

// await waits for the answer to corr, the connection's end, RequestTimeout, or ctx, and
// forgets the waiter.
func (c *clientConn) await(ctx context.Context, corr uint64, w chan proto.InternalMessage) (proto.InternalMessage, error) {
	defer c.forget(corr)
	var timeout <-chan time.Time
	if c.pool.after != nil {
		ch, stop := c.pool.after(c.pool.opts.RequestTimeout)
		defer stop()
		timeout = ch
	} else {
		t := getTimer(c.pool.opts.RequestTimeout)
		defer putTimer(t)
		timeout = t.C
	}
	start := time.Now()
	select {
	case m, ok := <-w:
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrConnectionLost, c.peer)
		}
		putWaiter(w) // its one send was received: nobody else holds it (timers.go)
		c.m.observe(start)
		return m, nil
	case <-timeout:
		c.m.timeouts.Inc()
		return nil, fmt.Errorf("%w: %s after %v", ErrTimeout, c.peer, c.pool.opts.RequestTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *clientConn) forget(corr uint64) {
	c.mu.Lock()
	if c.waiters != nil {
		delete(c.waiters, corr)
	}
	c.mu.Unlock()
}

// Request sends req to the peer and returns its one terminal answer (any FLXI message; the
// caller matches on its kind). The pool chooses the correlation id: whatever req carries is
// replaced on the wire, and the answer carries the pool's. Errors: ErrShed, ErrBackoff,
// ErrUnreachable (nothing was sent; Retryable), ErrConnectionLost, ErrTimeout (outcome
// unknown), ErrWrongPeer, ErrUnauthorized, ErrProtocolVersion, ErrClosed, ErrTooManyPeers,
// ErrInvalidNodeID, an encoding error (wrapping proto.ErrFrameTooLarge over the bound), or
// ctx's error.
func (p *Pool) Request(ctx context.Context, to Peer, req proto.InternalMessage) (proto.InternalMessage, error) {
	m, _, err := p.RequestWithStorageID(ctx, to, req)
	return m, err
}

// RequestWithStorageID is Request, also returning the storage identity the peer named at the
// handshake of the connection that carried the request and its answer (zero: unknown, the
// peer predates StorageHello), never one learned later (Pending.PeerStorageID for Pipeline).
// Errors are Request's; the identity is zero with an error.
func (p *Pool) RequestWithStorageID(ctx context.Context, to Peer, req proto.InternalMessage) (proto.InternalMessage, StorageID, error) {
	buf, frame, ps, err := p.admit(to, req)
	if err != nil {
		return nil, StorageID{}, err
	}
	defer ps.release()
	c, err := ps.connection(ctx, to.Addr)
	if err != nil {
		return nil, StorageID{}, err
	}
	m, err := c.roundTrip(ctx, frame)
	if err != nil {
		return nil, StorageID{}, err
	}
	putFrame(buf, frame) // after an error quic-go may still hold an unsent frame
	return m, c.peerStorage, nil
}

// admit is the start of every request, before anything is sent: encode req into a pooled
// frame (bounded by MaxFrameBytes), find or add the peer, and take one of its in-flight
// slots (ErrShed when none is free). The caller releases the slot.
func (p *Pool) admit(to Peer, req proto.InternalMessage) (*[]byte, []byte, *peerState, error) {
	buf := getFrame()
	frame, err := encode(*buf, req, p.opts.MaxFrameBytes)
	if err != nil {
		return nil, nil, nil, err
	}
	ps, err := p.peer(to)
	if err != nil {
		return nil, nil, nil, err
	}
	if !ps.acquire() {
		return nil, nil, nil, fmt.Errorf("%w: %s", ErrShed, ps.nodeID)
	}
	return buf, frame, ps, nil
}

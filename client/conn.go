package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"felix/proto"
)

// errNotSent marks a request that never left the client: re-sending it is always safe.
var errNotSent = errors.New("felix: request not sent")

// conn is one QUIC connection: its request streams and the router of broker-opened event
// streams (spec/client-protocol.md §1.3: an event stream is bound to its subscription by
// the id in event_stream_hello, which may arrive before "subscribed").
type conn struct {
	c  *Client
	qc *quic.Conn

	mu       sync.Mutex
	sessions []*session
	rr       int
	waiting  map[uint64]chan *eventStream // subscription id -> claimer
	early    map[uint64]*eventStream      // hello arrived before the claim
}

// eventStream is a broker-opened uni stream after its hello.
type eventStream struct {
	st *quic.ReceiveStream
	fr frameReader
}

func newConn(c *Client, qc *quic.Conn) *conn {
	cn := &conn{c: c, qc: qc, waiting: map[uint64]chan *eventStream{}, early: map[uint64]*eventStream{}}
	c.wg.Add(1)
	go cn.acceptEvents()
	return cn
}

func (cn *conn) alive() bool { return cn.qc.Context().Err() == nil }

func (cn *conn) close() { _ = cn.qc.CloseWithError(0, "client closed") }

// session returns a request stream, opening one while fewer than WithStreamsPerConn are
// open; otherwise round-robin over the open ones.
func (cn *conn) session(ctx context.Context) (*session, error) {
	cn.mu.Lock()
	live := cn.sessions[:0]
	for _, s := range cn.sessions {
		if !s.isDead() {
			live = append(live, s)
		}
	}
	cn.sessions = live
	if len(live) >= cn.c.cfg.streamsPerConn {
		cn.rr++
		s := live[cn.rr%len(live)]
		cn.mu.Unlock()
		return s, nil
	}
	cn.mu.Unlock()
	s, err := openSession(ctx, cn)
	if err != nil {
		return nil, err
	}
	cn.mu.Lock()
	cn.sessions = append(cn.sessions, s)
	cn.mu.Unlock()
	return s, nil
}

// authenticate sends auth on st and reads the answer (spec §4, §8.0): auth_ok gives the
// intersection of flags and features, plain ok means a legacy broker (OriginalV1Flags).
func (cn *conn) authenticate(ctx context.Context, st *quic.Stream, fr *frameReader) (Capabilities, error) {
	cfg := cn.c.cfg
	flags := ClientFlags
	frame := proto.AppendMessage(nil, &proto.Auth{TenantID: cfg.tenant, Token: cfg.token, ClientFlags: &flags, Features: Features})
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetReadDeadline(dl)
		defer st.SetReadDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetReadDeadline(time.Now()) })
	defer stop()
	if _, err := st.Write(frame); err != nil {
		return Capabilities{}, fmt.Errorf("felix: auth: %w", err)
	}
	hdr, body, err := fr.next()
	if err != nil {
		if ctx.Err() != nil {
			return Capabilities{}, ctx.Err()
		}
		return Capabilities{}, fmt.Errorf("felix: auth: %w", err)
	}
	if hdr.Flags != 0 {
		return Capabilities{}, fmt.Errorf("%w: binary frame %#x in answer to auth", ErrProtocol, hdr.Flags)
	}
	m, err := proto.DecodeMessage(body)
	if err != nil {
		return Capabilities{}, fmt.Errorf("%w: auth answer: %v", ErrProtocol, err)
	}
	switch m := m.(type) {
	case *proto.AuthOK:
		caps := Capabilities{Flags: m.ServerFlags & ClientFlags}
		for _, f := range m.Features {
			for _, mine := range Features {
				if f == mine {
					caps.Features = append(caps.Features, f)
				}
			}
		}
		return caps, nil
	case *proto.OK:
		return Capabilities{Flags: proto.OriginalV1Flags}, nil
	case *proto.Error:
		return Capabilities{}, serverError(m.Code, m.Message)
	}
	return Capabilities{}, fmt.Errorf("%w: %s in answer to auth", ErrProtocol, m.Type())
}

// openStream opens and authenticates a bi stream.
func (cn *conn) openStream(ctx context.Context) (*quic.Stream, *frameReader, Capabilities, error) {
	st, err := cn.qc.OpenStreamSync(ctx)
	if err != nil {
		return nil, nil, Capabilities{}, fmt.Errorf("felix: open stream: %w", err)
	}
	fr := &frameReader{r: st, max: cn.c.cfg.maxFrame}
	caps, err := cn.authenticate(ctx, st, fr)
	if err != nil {
		st.CancelRead(0)
		st.CancelWrite(0)
		return nil, nil, caps, err
	}
	cn.c.caps.Store(&caps)
	return st, fr, caps, nil
}

// acceptEvents accepts the broker's uni streams, reads each one's event_stream_hello and
// hands it to the subscription or watch that claims its id. Streams whose hello is not
// claimed within a bounded backlog are cancelled.
func (cn *conn) acceptEvents() {
	defer cn.c.wg.Done()
	for {
		st, err := cn.qc.AcceptUniStream(cn.c.ctx)
		if err != nil {
			cn.mu.Lock()
			for id, es := range cn.early {
				es.st.CancelRead(0)
				delete(cn.early, id)
			}
			cn.mu.Unlock()
			return
		}
		cn.c.wg.Add(1)
		go func() {
			defer cn.c.wg.Done()
			cn.routeEvents(st)
		}()
	}
}

// routeEvents reads the hello (bounded in time) and delivers the stream to its claimer.
func (cn *conn) routeEvents(st *quic.ReceiveStream) {
	es := &eventStream{st: st, fr: frameReader{r: st, max: cn.c.cfg.maxFrame}}
	_ = st.SetReadDeadline(time.Now().Add(30 * time.Second))
	hdr, body, err := es.fr.next()
	_ = st.SetReadDeadline(time.Time{})
	var hello *proto.EventStreamHello
	if err == nil && hdr.Flags == 0 {
		if m, derr := proto.DecodeMessage(body); derr == nil {
			hello, _ = m.(*proto.EventStreamHello)
		}
	}
	if hello == nil {
		cn.c.cfg.logger.Warn("felix: event stream without event_stream_hello", "err", err)
		st.CancelRead(0)
		return
	}
	cn.mu.Lock()
	if ch, ok := cn.waiting[hello.SubscriptionID]; ok {
		delete(cn.waiting, hello.SubscriptionID)
		cn.mu.Unlock()
		ch <- es
		return
	}
	if len(cn.early) >= cn.c.cfg.eventPending {
		cn.mu.Unlock()
		st.CancelRead(0)
		return
	}
	cn.early[hello.SubscriptionID] = es
	cn.mu.Unlock()
}

// claimEvents waits for the event stream whose hello carries id.
func (cn *conn) claimEvents(ctx context.Context, id uint64) (*eventStream, error) {
	cn.mu.Lock()
	if es, ok := cn.early[id]; ok {
		delete(cn.early, id)
		cn.mu.Unlock()
		return es, nil
	}
	ch := make(chan *eventStream, 1)
	cn.waiting[id] = ch
	cn.mu.Unlock()
	select {
	case es := <-ch:
		return es, nil
	case <-ctx.Done():
	case <-cn.qc.Context().Done():
	}
	cn.mu.Lock()
	delete(cn.waiting, id)
	cn.mu.Unlock()
	select {
	case es := <-ch: // delivered while we gave up
		es.st.CancelRead(0)
	default:
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("felix: connection lost before the event stream arrived: %w", context.Cause(cn.qc.Context()))
}

// frameReader reads FLX1 frames with a reused buffer (proto.ReadFrame).
type frameReader struct {
	r   io.Reader
	buf []byte
	max uint32
	hdr [proto.HeaderSize]byte // nextInto's header scratch
}

// next reads one frame; the body is valid until the next call.
func (f *frameReader) next() (proto.Header, []byte, error) {
	h, body, err := proto.ReadFrame(f.r, f.buf, f.max)
	if err == nil && cap(body) <= 1<<20 {
		f.buf = body[:0]
	}
	return h, body, err
}

// nextInto reads one frame into buf and returns the body, which the caller owns. A nil
// buf gets a fresh buffer of the body's size; a recycled buf too short for the body is
// replaced by one with headroom (the next power of two, at least 4 KiB, at most
// maxPooledFrame), so a pool of frame buffers settles at the sizes in use instead of
// reallocating whenever a frame is a little longer than the buffer it drew. Errors are
// proto.ReadFrame's.
func (f *frameReader) nextInto(buf []byte) (proto.Header, []byte, error) {
	if buf == nil {
		return proto.ReadFrame(f.r, nil, f.max)
	}
	if n, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
		if errors.Is(err, io.EOF) && n == 0 {
			return proto.Header{}, nil, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return proto.Header{}, nil, &proto.DecodeError{Field: "header", Offset: n, Err: proto.ErrIncomplete}
		}
		return proto.Header{}, nil, err
	}
	h, err := proto.DecodeHeader(f.hdr[:], f.max)
	if err != nil {
		return proto.Header{}, nil, err
	}
	n := int(h.Length)
	if cap(buf) < n {
		buf = make([]byte, 0, max(n, min(maxPooledFrame, max(4096, 1<<bits.Len(uint(n-1))))))
	}
	body := buf[:n]
	if got, err := io.ReadFull(f.r, body); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return proto.Header{}, nil, &proto.DecodeError{Field: "body", Offset: proto.HeaderSize + got, Err: proto.ErrIncomplete}
		}
		return proto.Header{}, nil, err
	}
	return h, body, nil
}

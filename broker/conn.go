package broker

import (
	"container/list"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"felix/auth"
	"felix/netq"
	"felix/proto"
)

// ServerFlags are the FLX1 capability bits this broker advertises in auth_ok
// (spec/client-protocol.md §3, §4): the v1 KNOWN_FLAGS 0x003F plus 0x2000 (idempotent binary
// publish, §8.10) and 0x4000 (routing key, docs/client-protocol.md D15) = 0x603F. Each side
// uses the intersection with what the client offered.
// 0x0800 (skipped offsets) and 0x1000 (publishers) are not advertised: a single node writes
// no generation-start records and does not record publishers.
const ServerFlags = proto.KnownFlagsV1 | proto.FlagPublishIdempotent | proto.FlagPublishKeyed

// serverFeatures are the JSON-only features of spec §8.0 this broker implements; auth_ok
// lists the intersection with the client's list (redirects: the not_leader message, §8.9).
var serverFeatures = []string{proto.FeatureErrorCodes, proto.FeatureIdempotentPublish, proto.FeatureCacheDelete, proto.FeatureCounters, proto.FeatureGroups, proto.FeatureCacheWatch, proto.FeatureRoutingKeys, proto.FeatureRedirects}

// connHandler serves one client connection: it accepts the client's bi streams (control,
// cache) and uni streams (publish-only) and runs one session per stream. Bounds: the
// connection's in-flight publish bytes (FELIX_BROKER_PUBLISH_CONN_INFLIGHT_BYTES, pacing the
// readers) and its subscriptions (FELIX_MAX_SUBSCRIPTIONS_PER_CONN).
type connHandler struct {
	s        *Server
	conn     *netq.Conn
	ctx      context.Context // ends with the connection or at shutdown
	cancel   context.CancelFunc
	budget   *netq.ByteBudget
	consumer uint64 // consumer id of this connection in consumer groups
	// authed is set by the first successful auth on any stream; until then the auth
	// deadline (FELIX_AUTH_TIMEOUT_MS) may close the connection.
	authed atomic.Bool
	// pendingElem is h's entry in Server.pending while unauthenticated (guarded by its mutex).
	pendingElem *list.Element
	subs        atomic.Int64
	watches     watchSet
	sessions    sync.WaitGroup // stream readers
	pumps       sync.WaitGroup // event stream writers
}

func newConnHandler(s *Server, c *netq.Conn) *connHandler {
	ctx, cancel := context.WithCancel(c.Context())
	stop := context.AfterFunc(s.shutdown, cancel)
	go func() { <-ctx.Done(); stop() }()
	h := &connHandler{s: s, conn: c, ctx: ctx, cancel: cancel, budget: netq.NewByteBudget(s.cfg.PublishConnInflightByte),
		consumer: s.nextConsumer.Add(1)}
	s.pending.add(h)
	return h
}

// markAuthed records the connection's first successful auth: the auth deadline and the
// eviction at the connection limit no longer apply to it.
func (h *connHandler) markAuthed() {
	if !h.authed.Swap(true) {
		h.s.pending.remove(h)
	}
}

// serve runs until the connection ends or the broker drains; on a drain it lets every
// session finish its in-flight publishes and queued answers, ends event streams with FIN,
// and closes the connection with netq.CodeShutdown.
func (h *connHandler) serve() {
	defer h.cancel()
	defer h.s.pending.remove(h)
	if d := time.Duration(h.s.cfg.AuthTimeoutMS) * time.Millisecond; d > 0 {
		deadline := time.AfterFunc(d, h.authExpired)
		defer deadline.Stop()
	}
	uniDone := make(chan struct{})
	go func() { defer close(uniDone); h.acceptUni() }()
	for {
		st, err := h.conn.AcceptStream(h.ctx)
		if err != nil {
			break
		}
		h.s.m.streams.Inc()
		h.sessions.Add(1)
		go func() {
			defer h.sessions.Done()
			newSession(h, st, st, false).run()
		}()
	}
	<-uniDone // no sessions.Add after this point
	h.sessions.Wait()
	h.pumps.Wait()
	if h.conn.Context().Err() == nil {
		// Give the client a moment to read the last answers and close on its own.
		select {
		case <-h.conn.Context().Done():
		case <-time.After(200 * time.Millisecond):
		}
		_ = h.conn.CloseWithError(netq.CodeShutdown, "broker shutting down")
	}
}

// authExpired closes a connection that held its slot without authenticating
// (docs/operations.md, "Bounds"): QUIC application error netq.CodeAuthTimeout.
func (h *connHandler) authExpired() {
	if h.authed.Load() {
		return
	}
	h.s.m.authTimeouts.Inc()
	_ = h.conn.CloseWithError(netq.CodeAuthTimeout, "auth timeout")
}

func (h *connHandler) acceptUni() {
	for {
		st, err := h.conn.AcceptUniStream(h.ctx)
		if err != nil {
			return
		}
		h.s.m.streams.Inc()
		h.sessions.Add(1)
		go func() {
			defer h.sessions.Done()
			newSession(h, st, nil, true).run()
		}()
	}
}

// readStream is what a session reads from: a bi stream or a client uni stream.
type readStream interface {
	io.Reader
	CancelRead(quic.StreamErrorCode)
}

// session is one client stream: auth state, negotiated flags and features, the answer
// writer (nil on a publish-only uni stream) and a small pool of read buffers. A buffer
// whose payloads were handed to the engine is returned by the publish's completion.
type session struct {
	h           *connHandler
	svc         shardService // the engine as the handlers see it (service.go)
	in          readStream
	out         *quic.Stream // nil on a uni stream
	uni         bool
	w           *netq.Writer
	principal   *auth.Principal
	closeStream bool   // a uni stream got something it may not carry
	flags       uint16 // negotiated FLX1 flags
	codes       bool   // client listed "error_codes"
	routing     bool   // client listed "routing_keys": publish_ok carries shard
	buffers     chan []byte
	// pooled is the bytes held by buffers (release runs on core goroutines, so atomic);
	// bufferSize is the size new read buffers get: the largest frame read so far (up to
	// pooledBufferMaxBytes) rounded up to 4 KiB, so one pool serves every frame in use.
	pooled     atomic.Int64
	bufferSize int
	ops        chan *pubOp
	inflight   sync.WaitGroup
	// frameCharge is the budget charged for the frame being handled; a publish handed to
	// the engine takes it over (released by the completion), the rest is released after
	// the frame.
	frameCharge int64
	batch       proto.PublishBatch
	names       nameCache
	fwd         sessionForward // the client's token for forwards, redirects listed (forward.go)
}

// A session keeps up to sessionBuffers read buffers of at most pooledBufferMaxBytes each
// for reuse, holding at most sessionPoolBytes in all (2 MiB per stream: 16 buffers of a
// 64 × 1 KiB publish frame, 66 KiB, fit); larger frames get a buffer of their own. Read
// buffers are sized for the largest frame the stream carried (a 64 KiB limit made every
// 64 × 1 KiB frame allocate: issue 22, docs/bench/perf.md).
const (
	sessionOps           = 64
	sessionBuffers       = 16
	pooledBufferMaxBytes = 1 << 20
	sessionPoolBytes     = 2 << 20
	bufferRound          = 4 << 10
)

func newSession(h *connHandler, in readStream, out *quic.Stream, uni bool) *session {
	s := &session{h: h, svc: h.s.svc, in: in, out: out, uni: uni, flags: proto.OriginalV1Flags, buffers: make(chan []byte, sessionBuffers), ops: make(chan *pubOp, sessionOps)}
	if out != nil {
		s.w = netq.NewWriter(out, h.s.cfg.StreamWriterMaxBytes)
	}
	return s
}

// run is the stream's reader loop (docs/architecture.md, "Connection goroutines").
func (s *session) run() {
	stopRead := context.AfterFunc(s.h.ctx, func() { s.in.CancelRead(quic.StreamErrorCode(netq.CodeShutdown)) })
	defer stopRead()
	fr := netq.NewFrameReader(s.in, s.h.s.cfg.MaxFrameBytes)
	protocolErr := false
	for {
		hdr, err := fr.ReadHeader()
		if err != nil {
			protocolErr = s.readFailed(err)
			break
		}
		n := int64(hdr.Length)
		if !s.acquire(n) {
			break
		}
		body, err := fr.ReadBody(hdr, s.getBuffer(hdr.Length))
		if err != nil {
			s.release(n, nil)
			protocolErr = s.readFailed(err)
			break
		}
		s.frameCharge = n
		if s.handleFrame(hdr, body) {
			body = nil // held by a publish until its completion
		}
		s.release(s.frameCharge, body) // what no publish took over
		s.frameCharge = 0
		if s.closeRequested() {
			protocolErr = true
			break
		}
	}
	s.finish(protocolErr)
}

// readFailed answers a header or body that broke the framing (unknown flag bit, bad magic,
// oversize length, truncated frame) with a typed error and reports whether the stream
// must be reset. A clean EOF or a transport error needs no answer.
func (s *session) readFailed(err error) bool {
	var de *proto.DecodeError
	if !errors.As(err, &de) {
		return false
	}
	s.h.s.m.protocolErrors.Inc()
	s.sendError(proto.CodeMalformed, err.Error(), nil)
	return true
}

// finish waits for the stream's publishes, flushes the answers and ends the stream: FIN
// after a clean end, reset (netq.CodeProtocol) after a protocol violation.
func (s *session) finish(protocolErr bool) {
	s.inflight.Wait()
	if s.w != nil {
		_ = s.w.Close()
	}
	if protocolErr {
		s.in.CancelRead(netq.CodeProtocol)
	}
	if s.out != nil {
		_ = s.out.Close()
	}
}

// acquire charges n bytes to the connection's and the process's in-flight budgets,
// waiting (which paces the sender through QUIC flow control) until they fit.
func (s *session) acquire(n int64) bool {
	if err := s.h.budget.Acquire(s.h.ctx, n); err != nil {
		return false
	}
	if err := s.h.s.global.Acquire(s.h.ctx, n); err != nil {
		s.h.budget.Release(n)
		return false
	}
	return true
}

// release returns n budget bytes and recycles buf. Safe from any goroutine (publish
// completions run on a core goroutine and must not block: both steps never wait).
func (s *session) release(n int64, buf []byte) {
	s.h.s.global.Release(n)
	s.h.budget.Release(n)
	c := int64(cap(buf))
	if buf == nil || c > pooledBufferMaxBytes || s.pooled.Add(c) > sessionPoolBytes {
		if buf != nil {
			s.pooled.Add(-c)
		}
		return
	}
	select {
	case s.buffers <- buf[:0]:
	default:
		s.pooled.Add(-c)
	}
}

// getBuffer returns a read buffer for a body of n bytes: a pooled one when it fits, else a
// new one of the size the stream's largest frame needs (reader goroutine only). A pooled
// buffer too small for n is dropped: the pool converges on buffers of the largest size.
func (s *session) getBuffer(n uint32) []byte {
	if n > pooledBufferMaxBytes {
		return nil // ReadBody allocates exactly n; release does not pool it
	}
	if size := (int(n) + bufferRound - 1) &^ (bufferRound - 1); size > s.bufferSize {
		s.bufferSize = size
	}
	select {
	case b := <-s.buffers:
		s.pooled.Add(-int64(cap(b)))
		if uint32(cap(b)) >= n {
			return b
		}
	default:
	}
	return make([]byte, 0, s.bufferSize)
}

// closeRequested reports that a uni stream received something it may not carry.
func (s *session) closeRequested() bool { return s.closeStream }

// handleFrame dispatches one frame and reports whether body was handed to the engine
// (then the publish completion releases it).
func (s *session) handleFrame(hdr proto.Header, body []byte) bool {
	layout, err := proto.ClassifyFlags(hdr.Flags)
	if err != nil {
		s.h.s.m.protocolErrors.Inc()
		s.sendError(proto.CodeMalformed, err.Error(), nil)
		return false
	}
	switch layout {
	case proto.LayoutJSON:
		s.handleJSON(body)
		return false
	case proto.LayoutPublishBatch, proto.LayoutAckedPublishBatch:
		return s.handleBinaryPublish(hdr.Flags, body)
	}
	s.h.s.m.protocolErrors.Inc()
	s.sendError(proto.CodeMalformed, "frame layout not accepted from a client", nil)
	if s.uni {
		s.closeStream = true
	}
	return false
}

// handleJSON decodes a JSON message and dispatches it through the handler table
// (handlers.go; spec/client-protocol.md §6, §1.2).
func (s *session) handleJSON(body []byte) {
	m, err := proto.DecodeMessage(body)
	if err != nil {
		s.h.s.m.protocolErrors.Inc()
		s.answerUndecodable(body, err)
		if s.uni {
			s.closeStream = true
		}
		return
	}
	s.dispatch(m)
}

// authorized reports whether the stream may carry a data message now, answering when not:
// "auth required" before a successful auth, "token expired" once the token's exp (plus
// leeway) has passed on a long-lived stream (spec/auth.md §4, PROPOSED re-check adopted in
// docs/auth.md). An expired stream may authenticate again with a fresh token.
func (s *session) authorized() bool {
	if s.principal == nil {
		s.sendError(proto.CodeUnauthorized, "auth required", nil)
		s.closeStream = s.uni
		return false
	}
	if err := s.principal.CheckExpiry(s.h.s.now()); err != nil {
		s.principal = nil
		s.h.s.m.authFailures.Inc()
		s.sendError(proto.CodeUnauthorized, "token expired", nil)
		s.closeStream = s.uni
		return false
	}
	return true
}

// sendError writes error {message, code[, request_id]} (spec §6, §8.7, §8.8). On a uni
// stream there is no answer path; the caller closes the stream instead.
func (s *session) sendError(code proto.ErrorCode, message string, requestID *uint64) {
	if s.w == nil {
		return
	}
	s.h.s.m.errorsSent.Inc()
	s.send(&proto.Error{Message: message, Code: code, RequestID: requestID})
}

// send queues one JSON message. A peer that does not read its answers past
// FELIX_STREAM_WRITER_MAX_BYTES gets its stream reset.
func (s *session) send(m proto.Message) {
	if s.w == nil {
		return
	}
	err := s.w.Append(func(dst []byte) []byte { return proto.AppendMessage(dst, m) })
	if errors.Is(err, netq.ErrWriterFull) {
		s.h.s.m.protocolErrors.Inc()
		s.in.CancelRead(netq.CodeSlowConsumer)
		if s.out != nil {
			s.out.CancelWrite(netq.CodeSlowConsumer)
		}
	}
}

// tokenLapsed ends an event stream whose subscribing token has expired (exp plus the
// leeway of auth.Principal.CheckExpiry), before it carries anything more: it writes an
// `error {code: unauthorized, message: "token expired"}` frame on the event stream and
// closes it (docs/auth.md, "Expiry on long streams": a live subscription or cache watch
// outlives its token by at most the leeway). The client authenticates again with a fresh
// token and subscribes again. p is the principal that opened the stream.
func (h *connHandler) tokenLapsed(p *auth.Principal, events *quic.SendStream) bool {
	if p == nil || p.CheckExpiry(h.s.now()) == nil {
		return false
	}
	h.s.m.authFailures.Inc()
	_, _ = events.Write(proto.AppendMessage(nil, &proto.Error{Code: proto.CodeUnauthorized, Message: "token expired"}))
	_ = events.Close()
	return true
}

package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/quic-go/quic-go"

	"felix/proto"
)

// reply is one correlated answer: a JSON message, or a binary publish ack (spec §5.3).
type reply struct {
	msg     proto.Message
	binary  bool
	ack     proto.PublishAck // Message is not kept (the buffer is reused); see ackText
	ackText string
}

// call is one request waiting for its answer: exactly one of ch and fn is set. fn runs on
// the session's reader goroutine and must not block.
type call struct {
	ch chan result
	fn func(reply, error)
}

type result struct {
	r   reply
	err error
}

// session is one authenticated bi stream carrying pipelined requests (publishes, cache
// and group operations). Answers are correlated by request_id and may arrive out of order
// (spec §1.1); a reader goroutine dispatches them.
type session struct {
	cn   *conn
	st   *quic.Stream
	caps Capabilities

	w *sessionWriter // coalesces the requests' frames into stream writes

	mu      sync.Mutex
	pending map[uint64]*call
	dead    bool
	deadErr error
	done    chan struct{}
}

func openSession(ctx context.Context, cn *conn) (*session, error) {
	st, fr, caps, err := cn.openStream(ctx)
	if err != nil {
		return nil, err
	}
	s := &session{cn: cn, st: st, w: newSessionWriter(st), caps: caps, pending: map[uint64]*call{}, done: make(chan struct{})}
	cn.c.wg.Add(1)
	go s.readLoop(fr)
	stop := context.AfterFunc(cn.c.ctx, func() { s.fail(ErrClosed) })
	go func() { <-s.done; stop() }()
	return s, nil
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// fail ends the session: every pending request fails with ErrIndeterminate (it was sent;
// its outcome is unknown) wrapping cause.
func (s *session) fail(cause error) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	s.dead, s.deadErr = true, cause
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	close(s.done)
	s.st.CancelRead(0)
	s.st.CancelWrite(0)
	err := indeterminate(cause)
	for _, c := range pending {
		c.deliver(reply{}, err)
	}
}

func (c *call) deliver(r reply, err error) {
	if c.fn != nil {
		c.fn(r, err)
		return
	}
	c.ch <- result{r, err}
}

// send registers c under id (c nil: no answer expected) and writes the frame appendFrame
// appends, coalesced with the frames of concurrent requests (sessionWriter). A write that
// failed before any byte of this frame left returns an error wrapping errNotSent; a partial
// write ends the session and c receives ErrIndeterminate.
func (s *session) send(id uint64, c *call, appendFrame func([]byte) []byte) error {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return fmt.Errorf("%w: %w", errNotSent, s.deadErr)
	}
	if c != nil {
		s.pending[id] = c
	}
	s.mu.Unlock()
	started, err := s.w.write(appendFrame)
	if err == nil {
		return nil
	}
	if !started {
		s.mu.Lock()
		_, mine := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if mine || c == nil {
			s.fail(err)
			return fmt.Errorf("%w: %w", errNotSent, err)
		}
	}
	s.fail(err)
	if c == nil {
		return indeterminate(err)
	}
	return nil // c was (or will be) told ErrIndeterminate by fail
}

// calls recycles the call records of synchronous requests (with their channels).
var calls = sync.Pool{New: func() any { return &call{ch: make(chan result, 1)} }}

// call sends m with request id id and waits for its answer. The context ending while
// waiting is ErrIndeterminate (the request was sent).
func (s *session) call(ctx context.Context, id uint64, m proto.Message) (reply, error) {
	c := calls.Get().(*call)
	if err := s.send(id, c, func(dst []byte) []byte { return proto.AppendMessage(dst, m) }); err != nil {
		calls.Put(c) // not registered: nothing can deliver to it
		return reply{}, err
	}
	select {
	case res := <-c.ch:
		calls.Put(c)
		return res.r, res.err
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		// c is not recycled: a delivery may already be on its way.
		return reply{}, indeterminate(ctx.Err())
	}
}

// readLoop dispatches answers until the stream ends.
func (s *session) readLoop(fr *frameReader) {
	defer s.cn.c.wg.Done()
	var ack proto.PublishAck
	for {
		hdr, body, err := fr.next()
		if err != nil {
			s.fail(fmt.Errorf("felix: request stream ended: %w", err))
			return
		}
		r, id, ok, err := decodeAnswer(hdr, body, &ack)
		if err != nil {
			s.fail(err)
			return
		}
		if _, plain := r.msg.(*proto.OK); plain && !ok {
			continue // cache_unwatch's answer (and v1 un-correlated puts): nothing waits for it
		}
		if !ok {
			// v1 errors carry no request_id (spec §6): nothing to correlate them with.
			s.cn.c.cfg.logger.Warn("felix: uncorrelated answer from the broker", "type", string(r.msg.Type()), "msg", fmt.Sprint(r.msg))
			continue
		}
		s.mu.Lock()
		c := s.pending[id]
		delete(s.pending, id)
		s.mu.Unlock()
		if c != nil {
			c.deliver(r, nil)
		}
	}
}

// decodeAnswer decodes one frame of a request stream: a JSON answer, a binary publish
// ack (spec §5.3) or a binary group_records (docs/client-protocol.md D19). ok=false: the
// answer carries no request id. Errors wrap ErrProtocol.
// ack is scratch space reused across frames.
func decodeAnswer(hdr proto.Header, body []byte, ack *proto.PublishAck) (r reply, id uint64, ok bool, err error) {
	switch hdr.Flags {
	case proto.FlagBinaryPublishAck:
		if err := proto.DecodePublishAck(body, ack); err != nil {
			return reply{}, 0, false, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		r = reply{binary: true, ack: *ack}
		if len(ack.Message) > 0 {
			r.ackText = string(ack.Message)
		}
		r.ack.Message = nil
		return r, ack.RequestID, true, nil
	case proto.FlagBinaryGroupRecords: // the answer to a group_poll with binary_records (D19)
		gr := new(proto.GroupRecords)
		if err := proto.DecodeGroupRecords(body, gr); err != nil {
			return reply{}, 0, false, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		return reply{msg: gr}, gr.RequestID, true, nil
	case 0:
		m, err := proto.DecodeMessage(body)
		if err != nil {
			return reply{}, 0, false, fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		id, ok := requestIDOf(m)
		return reply{msg: m}, id, ok, nil
	}
	return reply{}, 0, false, fmt.Errorf("%w: unexpected frame flags %#x on a request stream", ErrProtocol, hdr.Flags)
}

// requestIDOf returns the request id an answer correlates with.
func requestIDOf(m proto.Message) (uint64, bool) {
	switch m := m.(type) {
	case *proto.PublishOK:
		return m.RequestID, true
	case *proto.PublishError:
		return m.RequestID, true
	case *proto.CacheOK:
		return m.RequestID, true
	case *proto.CacheValue:
		return ptrID(m.RequestID)
	case *proto.CacheDeleted:
		return ptrID(m.RequestID)
	case *proto.CounterValue:
		return ptrID(m.RequestID)
	case *proto.Error:
		return ptrID(m.RequestID)
	case *proto.GroupRecords:
		return m.RequestID, true
	case *proto.GroupOK:
		return m.RequestID, true
	case *proto.DeadLetters:
		return m.RequestID, true
	case *proto.CacheWatching:
		return m.RequestID, true
	case *proto.NotLeader:
		return ptrID(m.RequestID)
	case *proto.Route:
		return m.RequestID, true
	}
	return 0, false
}

func ptrID(p *uint64) (uint64, bool) {
	if p == nil {
		return 0, false
	}
	return *p, true
}

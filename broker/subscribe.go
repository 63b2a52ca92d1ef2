package broker

import (
	"errors"
	"fmt"

	"github.com/quic-go/quic-go"

	"felix/auth"
	"felix/core"
	"felix/netq"
	"felix/proto"
)

// handleSubscribe registers a subscription (spec/client-protocol.md §1.3, §7): permission
// first (then a kind Queue stream is refused: it is read through groups), then the engine
// registers the live subscription, the broker opens the event uni stream and writes
// event_stream_hello, and only then answers subscribed. The id is always assigned by the
// broker (a client-supplied subscription_id is ignored, §1.3).
func (s *session) handleSubscribe(m *proto.Subscribe) {
	srv := s.h.s
	if err := s.principal.Allow(auth.ActionStreamSubscribe, m.TenantID, m.Namespace, m.Stream); err != nil {
		s.sendError(proto.CodeUnauthorized, auth.WireText(err), nil)
		return
	}
	if st, err := srv.catalog.Stream(m.TenantID, m.Namespace, m.Stream); err == nil && st.Kind == KindQueue {
		s.sendError(proto.CodeMalformed, queueSubscribeText(st), nil)
		return
	}
	if srv.fwd != nil && srv.fwd.redirectSubscribe(s, m) { // led by another broker: not_leader
		return
	}
	if s.h.subs.Add(1) > int64(srv.cfg.MaxSubscriptionsPerConn) {
		s.h.subs.Add(-1)
		s.sendError(proto.CodeOverloaded, "too many subscriptions on this connection (FELIX_MAX_SUBSCRIPTIONS_PER_CONN)", nil)
		return
	}
	req := s.subscribeRequest(m)
	sub, err := s.svc.Subscribe(req)
	if errors.Is(err, core.ErrNotFound) && srv.cfg.AutoCreate {
		if srv.autoCreateStream(m.TenantID, m.Namespace, m.Stream) == nil {
			sub, err = s.svc.Subscribe(req)
		}
	}
	if err != nil {
		s.h.subs.Add(-1)
		var ce *core.CursorError
		if errors.As(err, &ce) {
			s.send(&proto.SubscribeCursorError{Reason: proto.CursorReason(ce.Reason), Requested: ce.Requested, Available: ce.Available})
			return
		}
		code, text := s.h.s.errorCode(err)
		s.sendError(code, text, nil)
		return
	}
	id := sub.ID() // process-unique, shared with cache watch ids (spec §1.3)
	events, err := s.h.conn.OpenUniStream()
	if err != nil {
		sub.Close()
		s.h.subs.Add(-1)
		s.sendError(proto.CodeOverloaded, "cannot open an event stream: "+err.Error(), nil)
		return
	}
	hello := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: id})
	if _, err := events.Write(hello); err != nil {
		sub.Close()
		s.h.subs.Add(-1)
		events.CancelWrite(netq.CodeProtocol)
		s.sendError(proto.CodeShardUnavailable, "event stream failed: "+err.Error(), nil)
		return
	}
	srv.m.subscriptions.Inc()
	s.send(&proto.Subscribed{SubscriptionID: id})
	s.h.pumps.Add(1)
	go s.h.pump(sub, events, s.principal, movedEnd{ref: core.ShardRef{Kind: core.ShardStream, Name: req.Stream, Shard: req.Shard}, redirects: s.fwd.redirects})
}

// subscribeRequest is the engine's request for m: its shard and start, drop_new, the
// configured queue capacity, offsets when the session negotiated them.
func (s *session) subscribeRequest(m *proto.Subscribe) core.SubscribeRequest {
	req := core.SubscribeRequest{
		Stream:        core.StreamName{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream},
		WithOffsets:   s.flags&proto.FlagEventBatchOffsets != 0,
		Policy:        core.DropNew,
		QueueCapacity: s.h.s.cfg.SubscriberQueueCapacity,
	}
	if m.Shard != nil {
		req.Shard = int(*m.Shard)
	}
	if m.Start != nil {
		switch m.Start.Kind {
		case proto.StartEarliest:
			req.Start = core.StartEarliest
		case proto.StartOffset:
			req.Start, req.Offset = core.StartOffset, m.Start.Offset
		}
	}
	return req
}

// queueSubscribeText is the refusal of a subscribe to a kind Queue stream: a queue's
// records are consumed through consumer groups (KindQueue; docs/operations.md, "Stream
// options").
func queueSubscribeText(st Stream) string {
	return "stream " + st.TenantID + "/" + st.Namespace + "/" + st.Stream +
		" is kind Queue: consume it through a consumer group (group_poll), not subscribe"
}

// pump writes a subscription's frames to its event stream until the subscription or the
// connection ends (one goroutine per subscription; frames are shared and written as-is).
// At shutdown the stream ends with FIN; a subscriber ended for slowness (Block policy) or
// a failed write resets it with netq.CodeSlowConsumer. A subscription whose shard moved
// (core.ErrMoved) ends with not_leader naming the new owner when the table knows one
// (route_moved.go).
func (h *connHandler) pump(sub *core.Subscription, events *quic.SendStream, p *auth.Principal, mv movedEnd) {
	defer h.pumps.Done()
	defer h.subs.Add(-1)
	defer sub.Close()
	for {
		d, err := sub.Next(h.ctx)
		if err != nil {
			if errors.Is(err, core.ErrSlowSubscriber) {
				h.s.m.slowSubscribers.Inc()
				events.CancelWrite(netq.CodeSlowConsumer)
				return
			}
			if errors.Is(err, core.ErrMoved) {
				h.endMoved(events, mv)
			}
			if errors.Is(err, core.ErrStorageFailed) { // a damaged or failed log: a typed end, never a clean one
				_, _ = events.Write(proto.AppendMessage(nil, &proto.Error{Code: proto.CodeStorageFailed, Message: readFailedText(mv.ref, err)}))
			}
			_ = events.Close() // context ended or engine closing: a clean end of stream
			return
		}
		if h.tokenLapsed(p, events) {
			return
		}
		if _, err := events.Write(d.Frame); err != nil {
			events.CancelWrite(netq.CodeSlowConsumer)
			return
		}
		h.s.m.eventFrames.Inc()
	}
}

// readFailedText is the storage_failed text ending a subscription whose history read
// failed: a *core.DamageError's own text (stream, shard, segment, byte, offset), else the
// stream and shard only: never the server's file path (issue 23).
func readFailedText(ref core.ShardRef, err error) string {
	var de *core.DamageError
	if errors.As(err, &de) {
		return de.Error()
	}
	return fmt.Sprintf("stream %s shard %d: storage failed reading the log", ref.Name, ref.Shard)
}

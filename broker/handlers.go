package broker

import "felix/proto"

// messageHandler serves one decoded client message type (spec/client-protocol.md §6).
type messageHandler struct {
	serve func(s *session, m proto.Message)
	// beforeAuth: served before a successful auth (auth itself only).
	beforeAuth bool
	// uni: may arrive on a publish-only uni stream, which carries auth and publishes only
	// (spec §1.1); anything else there closes the stream.
	uni bool
}

// clientHandlers is the session's handler table: one entry per message type a client may
// send. A decoded type without an entry (a server-to-client message, or one this broker
// does not serve) answers error {code: malformed, "unexpected message type ... from a
// client"} on a bi stream and closes a uni stream. The binary publish layouts are
// dispatched by frame flags before JSON decoding (session.handleFrame).
var clientHandlers = map[proto.MessageType]messageHandler{
	proto.TypeAuth:               {serve: on((*session).handleAuth), beforeAuth: true, uni: true},
	proto.TypePublish:            {serve: on((*session).handlePublishMessage), uni: true},
	proto.TypePublishBatch:       {serve: on((*session).handlePublishBatchMessage), uni: true},
	proto.TypeSubscribe:          {serve: on((*session).handleSubscribe)},
	proto.TypeCachePut:           {serve: on((*session).handleCachePut)},
	proto.TypeCacheGet:           {serve: on((*session).handleCacheGet)},
	proto.TypeCacheDelete:        {serve: on((*session).handleCacheDelete)},
	proto.TypeCounterAdd:         {serve: on((*session).handleCounterAdd)},
	proto.TypeCounterGet:         {serve: on((*session).handleCounterGet)},
	proto.TypeGroupPoll:          {serve: on((*session).handleGroupPoll)},
	proto.TypeGroupAck:           {serve: on((*session).handleGroupAck)},
	proto.TypeGroupNack:          {serve: on((*session).handleGroupNack)},
	proto.TypeDeadLettersList:    {serve: on((*session).handleDeadLettersList)},
	proto.TypeDeadLettersRedrive: {serve: on((*session).handleDeadLettersRedrive)},
	proto.TypeCacheWatch:         {serve: on((*session).handleCacheWatch)},
	proto.TypeCacheUnwatch:       {serve: on((*session).handleCacheUnwatch)},
	proto.TypeRouteLookup:        {serve: on((*session).handleRouteLookup)}, // route.go
}

// on adapts a handler of one message type to the table. A message whose Go type does not
// match its type tag (never from proto.DecodeMessage) is answered as unexpected.
func on[M proto.Message](f func(*session, M)) func(*session, proto.Message) {
	return func(s *session, m proto.Message) {
		if mm, ok := m.(M); ok {
			f(s, mm)
			return
		}
		s.unexpected(m)
	}
}

// dispatch serves one decoded message from the table: auth at any time; anything else
// only once authorized (session.authorized answers when not); on a uni stream only
// publishes.
func (s *session) dispatch(m proto.Message) {
	h, known := clientHandlers[m.Type()]
	if known && h.beforeAuth {
		h.serve(s, m)
		return
	}
	if !s.authorized() {
		return
	}
	if s.uni && (!known || !h.uni) {
		// A publish-only stream carries publishes only (spec §1.1): anything else closes it.
		s.closeStream = true
		return
	}
	if !known {
		s.unexpected(m)
		return
	}
	h.serve(s, m)
}

// unexpected answers a message type no handler serves (a typed malformed error).
func (s *session) unexpected(m proto.Message) {
	s.h.s.m.protocolErrors.Inc()
	s.sendError(proto.CodeMalformed, "unexpected message type "+string(m.Type())+" from a client", nil)
}

// handlePublishMessage serves a JSON publish (spec §6: one payload).
func (s *session) handlePublishMessage(m *proto.Publish) {
	s.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, [][]byte{m.Payload}, m.RequestID, m.Ack, m.ProducerID, m.Idempotent)
}

// handlePublishBatchMessage serves a JSON publish_batch (spec §6: several payloads).
func (s *session) handlePublishBatchMessage(m *proto.JSONPublishBatch) {
	s.handleJSONPublish(m.TenantID, m.Namespace, m.Stream, m.Key, m.Payloads, m.RequestID, m.Ack, m.ProducerID, m.Idempotent)
}

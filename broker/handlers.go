package broker

import (
	"errors"
	"fmt"

	"felix/auth"
	"felix/proto"
)

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
	if names, id := wireNames(m); !s.namesValid(names, id) {
		return
	}
	h.serve(s, m)
}

// ErrInvalidName is a tenant, namespace, stream or cache name on the wire that breaks the
// one name rule, auth.ValidName (1..255 bytes of UTF-8, no control bytes or spaces, none of
// '/', ':', '*', not "." or ".."): the rule the catalog creates names by, so a name that
// breaks it names nothing that exists and nothing a permission can scope. It is answered
// code malformed with the text "invalid name ..." before the permission check and the
// lookup — never forbidden or not_found (issue 23 item 9). Test with errors.Is.
var ErrInvalidName = errors.New("invalid name")

// checkWireName returns an error wrapping ErrInvalidName (its text is the answer's) when
// name breaks auth.ValidName; field is the wire field (tenant_id, namespace, stream, cache).
func checkWireName(field, name string) error {
	if auth.ValidName(name) {
		return nil
	}
	return fmt.Errorf("%w %q in %s (1..255 bytes of UTF-8, no spaces or control bytes, none of '/', ':', '*', not . or ..)", ErrInvalidName, name, field)
}

// namesValid answers malformed "invalid name ..." (correlated by id when non-nil) for the
// first of names (field, value pairs) that breaks the rule, and reports whether all keep it.
func (s *session) namesValid(names []string, id *uint64) bool {
	for i := 0; i+1 < len(names); i += 2 {
		if err := checkWireName(names[i], names[i+1]); err != nil {
			s.h.s.m.protocolErrors.Inc()
			s.sendError(proto.CodeMalformed, err.Error(), id)
			return false
		}
	}
	return true
}

// wireNames are the (field, name) pairs of a client request the name rule applies to, and
// its request id. Publishes are checked where their names are resolved (session.resolve:
// the binary layouts never come through dispatch); messages without names return nil.
func wireNames(m proto.Message) ([]string, *uint64) {
	switch m := m.(type) {
	case *proto.Subscribe:
		return []string{"tenant_id", m.TenantID, "namespace", m.Namespace, "stream", m.Stream}, nil
	case *proto.CachePut:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), m.RequestID
	case *proto.CacheGet:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), m.RequestID
	case *proto.CacheDelete:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), m.RequestID
	case *proto.CounterAdd:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), m.RequestID
	case *proto.CounterGet:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), m.RequestID
	case *proto.CacheWatch:
		return cacheNames(m.TenantID, m.Namespace, m.Cache), &m.RequestID
	case *proto.GroupPoll:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	case *proto.GroupAck:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	case *proto.GroupNack:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	case *proto.DeadLettersList:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	case *proto.DeadLettersRedrive:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	case *proto.RouteLookup:
		return streamNames(m.TenantID, m.Namespace, m.Stream), &m.RequestID
	}
	return nil, nil
}

func streamNames(t, ns, stream string) []string {
	return []string{"tenant_id", t, "namespace", ns, "stream", stream}
}

func cacheNames(t, ns, cache string) []string {
	return []string{"tenant_id", t, "namespace", ns, "cache", cache}
}

// publishRefusal is the code and text of a publish refused by session.resolve: malformed
// for a name that breaks the rule, unauthorized otherwise.
func publishRefusal(err error) (proto.ErrorCode, string) {
	if errors.Is(err, ErrInvalidName) {
		return proto.CodeMalformed, err.Error()
	}
	return proto.CodeUnauthorized, auth.WireText(err)
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

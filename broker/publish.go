package broker

import (
	"errors"
	"slices"

	"felix/auth"
	"felix/core"
	"felix/proto"
)

// handleAuth runs the auth frame (spec/client-protocol.md §1.2, §4; spec/auth.md §4):
// verify, require tid = tenant_id, then answer auth_ok {server_flags, features} when the
// client offered client_flags, else plain ok. The negotiated flags are the intersection.
func (s *session) handleAuth(a *proto.Auth) {
	if s.principal != nil {
		s.sendError(proto.CodeUnauthorized, "auth already established", nil)
		return
	}
	p, err := auth.Authenticate(s.h.s.clientVerifier(), a.TenantID, a.Token)
	if err != nil {
		s.h.s.m.authFailures.Inc()
		if s.uni {
			s.closeStream = true
			return
		}
		s.sendError(proto.CodeUnauthorized, authFailureText(err, a.Features), nil)
		return
	}
	s.principal = p
	s.fwd = sessionForward{token: []byte(a.Token), redirects: slices.Contains(a.Features, proto.FeatureRedirects)}
	s.h.markAuthed()
	s.names.valid = false // permissions cached for the previous principal no longer apply
	if a.ClientFlags == nil {
		s.flags = proto.OriginalV1Flags
		s.send(&proto.OK{})
		return
	}
	s.flags = *a.ClientFlags & ServerFlags
	var features []string
	for _, f := range a.Features {
		for _, mine := range serverFeatures {
			if f == mine {
				features = append(features, f)
			}
		}
		switch f {
		case proto.FeatureErrorCodes:
			s.codes = true
		case proto.FeatureRoutingKeys:
			s.routing = true
		}
	}
	s.send(&proto.AuthOK{ServerFlags: ServerFlags, Features: features})
}

// nameCache remembers the last stream a session published to, so a stream of binary
// batches to one stream converts its names to strings and checks permission once.
type nameCache struct {
	tenant, namespace, stream string
	durable                   bool
	atLeastOnce               bool   // delivery AtLeastOnce: un-acked publishes are refused
	gen                       uint64 // CatalogView.Generation when durable/atLeastOnce were read
	allowed                   error
	valid                     bool
}

// fresh reports whether c still holds the settings of tenant/namespace/stream as the
// catalog has them now.
func (c *nameCache) fresh(cat CatalogView, tenant, namespace, stream string) bool {
	return c.valid && c.tenant == tenant && c.namespace == namespace && c.stream == stream && c.gen == cat.Generation()
}

// streamFor resolves the names of a binary batch without allocating when they repeat.
func (s *session) streamFor(tenant, namespace, stream []byte) *nameCache {
	c := &s.names
	if c.fresh(s.h.s.catalog, string(tenant), string(namespace), string(stream)) {
		return c
	}
	s.resolve(string(tenant), string(namespace), string(stream))
	return c
}

func (s *session) resolve(tenant, namespace, stream string) *nameCache {
	c := &s.names
	cat := s.h.s.catalog
	if c.fresh(cat, tenant, namespace, stream) {
		return c
	}
	*c = nameCache{tenant: tenant, namespace: namespace, stream: stream, valid: true, gen: cat.Generation()}
	c.allowed = errors.Join(checkWireName("tenant_id", tenant), checkWireName("namespace", namespace), checkWireName("stream", stream)) // handlers.go
	if c.allowed == nil {
		c.allowed = s.principal.Allow(auth.ActionStreamPublish, tenant, namespace, stream)
	}
	if c.allowed == nil {
		if st, err := cat.Stream(tenant, namespace, stream); err == nil {
			c.durable, c.atLeastOnce = st.Durable, st.Delivery == DeliveryAtLeastOnce
		}
	}
	return c
}

// pubOp is one publish handed to the engine; pooled, so a steady stream of batches
// allocates no request structs. Fields are owned by the engine between Publish and done.
type pubOp struct {
	req       core.PublishRequest
	key       []byte // routing key (nil = none): resolved to req.Shard by core.Engine.Route
	payloads  [1][]byte
	sess      *session
	body      []byte // read buffer holding the payloads (binary), returned on completion
	charge    int64  // budget bytes to release
	requestID uint64
	answer    answerKind
	durable   bool
	done      func(core.PublishResult, error)
}

type answerKind uint8

const (
	answerNone       answerKind = iota // ack none, or a uni stream
	answerJSON                         // publish_ok / publish_error
	answerBinaryAck                    // 0x0010 ack
	answerErrorFrame                   // refused un-acked publish: error frame
)

// newPubOp takes a request struct from the session's free list (filled by completions,
// which run on a core goroutine, so a sync.Pool's per-P caches would mostly miss) or makes
// one. The list holds at most sessionOps entries per stream.
func (s *session) newPubOp() *pubOp {
	select {
	case op := <-s.ops:
		return op
	default:
		op := &pubOp{}
		op.done = op.complete
		return op
	}
}

// complete runs on a core goroutine: it must not block. Writer.Append and release never wait.
func (op *pubOp) complete(res core.PublishResult, err error) {
	s := op.sess
	if err != nil {
		s.h.s.m.publishErrors.Inc()
		code, text := s.h.s.errorCode(err)
		s.answerPublishError(op.answer, op.requestID, code, text)
	} else {
		switch op.answer {
		case answerJSON:
			s.sendPublishOK(op.requestID, res, op.durable)
		case answerBinaryAck:
			if buf, err := s.w.Begin(); err == nil {
				s.w.Commit(proto.AppendPublishAckOK(buf, op.requestID))
			}
		}
	}
	s.release(op.charge, op.body)
	s.h.s.inflight.Done()
	s.inflight.Done()
	op.recycle()
}

// recycle clears op (dropping every reference into read buffers) and pools it, keeping the
// capacity of its payload list so the next batch allocates nothing.
func (op *pubOp) recycle() {
	payloads := op.req.Payloads
	if cap(payloads) > 0 && &payloads[:1][0] == &op.payloads[0] {
		payloads = nil // the inline array of a single JSON publish
	}
	clear(payloads[:cap(payloads)])
	sess := op.sess
	*op = pubOp{done: op.done}
	op.req.Payloads = payloads[:0]
	if sess != nil {
		select {
		case sess.ops <- op:
		default:
		}
	}
}

// sendPublishOK answers an acked JSON publish. Separate from complete so that taking the
// offsets' addresses does not move complete's result parameter to the heap on every call.
// The shard that stored the batch is included for clients that negotiated routing_keys
// (docs/client-protocol.md D15).
func (s *session) sendPublishOK(requestID uint64, res core.PublishResult, durable bool) {
	ok := &proto.PublishOK{RequestID: requestID, Duplicate: res.Duplicate}
	if durable {
		first, last := res.FirstOffset, res.LastOffset
		ok.FirstOffset, ok.LastOffset = &first, &last
	}
	if s.routing {
		shard := uint32(res.Shard)
		ok.Shard = &shard
	}
	s.send(ok)
}

// answerPublishError refuses a publish in the form the client expects (spec §1.2, §5.3, §8.7).
func (s *session) answerPublishError(kind answerKind, requestID uint64, code proto.ErrorCode, text string) {
	switch kind {
	case answerJSON:
		s.send(&proto.PublishError{RequestID: requestID, Message: text, Code: code})
	case answerBinaryAck:
		msg := text
		if s.codes {
			msg = proto.ErrorText(code, text)
		}
		_ = s.w.Append(func(dst []byte) []byte { return proto.AppendPublishAckError(dst, requestID, msg) })
	case answerErrorFrame:
		s.sendError(code, text, nil)
	}
}

// handleJSONPublish serves publish / publish_batch (spec §6): ack absent = per_message;
// an acked publish needs request_id; permission before existence. A non-nil key routes the
// batch to the key's shard (core.RouteKey; docs/client-protocol.md D15).
func (s *session) handleJSONPublish(tenant, ns, stream string, key []byte, payloads [][]byte, requestID *uint64, ack proto.JSONAck, producer string, idempotent bool) {
	answer := answerJSON
	if ack == proto.JSONAckNone || s.uni {
		answer = answerNone
	}
	if answer == answerJSON && requestID == nil {
		s.sendError(proto.CodeMalformed, "missing request_id for acked publish", nil)
		return
	}
	var id uint64
	if requestID != nil {
		id = *requestID
	}
	names := s.resolve(tenant, ns, stream)
	if names.allowed != nil {
		kind := answer
		if kind == answerNone {
			kind = answerErrorFrame
		}
		code, text := publishRefusal(names.allowed) // handlers.go: malformed for an invalid name
		s.answerPublishError(kind, id, code, text)
		return
	}
	op := s.newPubOp()
	op.payloads[0] = nil
	if len(payloads) == 1 {
		op.payloads[0] = payloads[0]
		op.req.Payloads = op.payloads[:]
	} else {
		op.req.Payloads = payloads
	}
	op.key = key
	if idempotent && requestID != nil {
		op.req.ProducerID, op.req.Sequence = producer, id
	}
	s.submit(op, names, id, answer, nil)
}

// handleBinaryPublish serves 0x0001 and 0x0009, with the 0x2000 and 0x4000 modifiers (spec
// §5.1, §5.2, §8.10; routing key: docs/client-protocol.md D15). The payloads and the key stay
// in body until the engine's completion; it reports whether body was handed over.
func (s *session) handleBinaryPublish(flags uint16, body []byte) bool {
	acked := flags&proto.FlagBinaryPublishAcked != 0
	if acked && s.uni {
		s.closeStream = true // publish-only streams carry 0x0001 only (spec §1.1)
		return false
	}
	if !s.authorized() {
		return false
	}
	answer := answerNone
	var err error
	if acked {
		prefix, perr := proto.DecodeAckedPrefix(body)
		if perr != nil && len(body) >= 8 {
			// request_id readable, ack_mode not: an error ack for it; the framing is intact.
			s.h.s.m.protocolErrors.Inc()
			s.answerPublishError(answerBinaryAck, prefix.RequestID, proto.CodeMalformed, perr.Error())
			return false
		}
		if perr != nil { // unreadable prefix: protocol violation (spec §5.2)
			s.h.s.m.protocolErrors.Inc()
			s.sendError(proto.CodeMalformed, perr.Error(), nil)
			s.closeStream = true
			return false
		}
		answer = answerBinaryAck
		err = proto.DecodePublish(flags, body, &s.batch)
		if err != nil {
			s.h.s.m.protocolErrors.Inc()
			s.answerPublishError(answerBinaryAck, prefix.RequestID, proto.CodeMalformed, err.Error())
			return false
		}
	} else if err = proto.DecodePublish(flags, body, &s.batch); err != nil {
		s.h.s.m.protocolErrors.Inc()
		s.sendError(proto.CodeMalformed, err.Error(), nil)
		s.closeStream = s.uni
		return false
	}
	b := &s.batch
	names := s.streamFor(b.TenantID, b.Namespace, b.Stream)
	if names.allowed != nil {
		kind := answer
		if kind == answerNone {
			kind = answerErrorFrame
		}
		code, text := publishRefusal(names.allowed)
		s.answerPublishError(kind, b.RequestID, code, text)
		return false
	}
	op := s.newPubOp()
	op.req.Payloads = append(op.req.Payloads[:0], b.Payloads...)
	op.key = b.Key
	if b.ProducerID != nil {
		op.req.ProducerID, op.req.Sequence = string(b.ProducerID), b.RequestID
	}
	return s.submit(op, names, b.RequestID, answer, body)
}

// submit hands op to the engine, which then holds the frame's budget charge until the
// completion (JSON publishes too: their decoded payloads are in memory until then) and,
// for a binary batch, body. It reports whether body was taken. On a refusal it answers at
// once and takes nothing. With FELIX_AUTO_CREATE an unknown stream is created and retried once.
func (s *session) submit(op *pubOp, names *nameCache, requestID uint64, answer answerKind, body []byte) bool {
	srv := s.h.s
	op.sess, op.requestID, op.answer, op.durable = s, requestID, answer, names.durable
	op.req.Stream = core.StreamName{Tenant: names.tenant, Namespace: names.namespace, Stream: names.stream}
	if answer == answerNone && names.atLeastOnce {
		s.refuseUnacked(op, names)
		return false
	}
	op.req.Ack = core.AckDefault
	if answer == answerNone {
		op.req.Ack = core.AckNone
	} else if srv.cfg.AckOnCommit || names.atLeastOnce {
		op.req.Ack = core.AckOnCommit
	}
	op.charge, op.body = s.frameCharge, body
	srv.inflight.Add(1)
	s.inflight.Add(1)
	srv.m.publishes.Inc()
	err := s.routeAndPublish(op)
	if errors.Is(err, core.ErrNotFound) && srv.cfg.AutoCreate {
		if cerr := srv.autoCreateStream(names.tenant, names.namespace, names.stream); cerr == nil {
			names.durable = true
			op.durable = true
			err = s.routeAndPublish(op)
		}
	}
	if err == nil {
		s.frameCharge = 0 // the completion releases it
		return body != nil
	}
	srv.inflight.Done()
	s.inflight.Done()
	srv.m.publishErrors.Inc()
	if errors.Is(err, core.ErrNotFound) {
		s.names.valid = false // look the stream up again next time
	}
	code, text := s.h.s.errorCode(err)
	kind := answer
	if kind == answerNone {
		kind = answerErrorFrame
	}
	s.answerPublishError(kind, requestID, code, text)
	op.recycle()
	return false
}

// routeAndPublish resolves op's shard with shardService.Route (routing key, else the
// idempotent key, else round-robin) and hands op to shardService.Publish on that shard.
func (s *session) routeAndPublish(op *pubOp) error {
	shard, err := s.svc.Route(op.req.Stream, op.key, op.req.ProducerID, op.req.Sequence)
	f := s.h.s.fwd
	if f != nil && errors.Is(err, core.ErrNotFound) { // a stream none of whose shards is open here
		shard, err = f.route(op.req.Stream, op.key, op.req.ProducerID, op.req.Sequence)
	}
	if err != nil {
		return err
	}
	op.req.Shard = shard
	if f != nil && f.forwardPublish(s, op) { // led by another broker (forward_ingress.go)
		return nil
	}
	return s.svc.Publish(&op.req, op.done)
}

// refuseUnacked refuses an un-acknowledged publish to a delivery AtLeastOnce stream: its
// publisher could never learn that it was lost, so it could not retry it (docs/operations.md,
// "Stream options"). A bi stream gets an error frame with code malformed; a publish-only uni
// stream, which cannot carry one, is ended. Nothing is stored.
func (s *session) refuseUnacked(op *pubOp, names *nameCache) {
	s.h.s.m.publishErrors.Inc()
	s.sendError(proto.CodeMalformed, "stream "+names.tenant+"/"+names.namespace+"/"+names.stream+
		" has delivery AtLeastOnce: un-acknowledged publishes are refused (ask for an ack)", nil)
	s.closeStream = s.closeStream || s.uni
	op.recycle()
}

// autoCreateStream creates tenant/namespace/stream on first use (FELIX_AUTO_CREATE=true,
// development): one shard, durable.
func (srv *Server) autoCreateStream(tenant, ns, stream string) error {
	if err := srv.catalog.EnsureNamespace(Namespace{TenantID: tenant, Namespace: ns, DisplayName: ns}); err != nil {
		return err
	}
	_, err := srv.catalog.CreateStream(Stream{TenantID: tenant, Namespace: ns, Stream: stream, Shards: 1, Durable: true}, srv.ApplyCreate)
	if errors.Is(err, ErrExists) {
		return nil
	}
	if err == nil {
		srv.log.Info("auto-created stream", "tenant", tenant, "namespace", ns, "stream", stream)
	}
	return err
}

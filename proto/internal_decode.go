package proto

// DecodeInternal decodes an FLXI body of the given kind. Known kinds return their concrete
// pointer type (type-switch on it); every field is bounds-checked and the body must end
// exactly at the last field (ErrTrailingBytes otherwise — so an AuthorizedForwardPublish
// relabelled as ForwardPublish is refused, and a ForwardPublish relabelled as authorized
// fails for want of a credential). An unknown kind returns *Unknown carrying the correlation
// id and a nil error, so the caller can answer UnsupportedKind and read on; an unknown-kind
// body shorter than 8 bytes is ErrIncomplete. Errors are *DecodeError.
func DecodeInternal(kind Kind, body []byte) (InternalMessage, error) {
	c := cursor{b: body}
	corr, err := c.u64("correlation_id")
	if err != nil {
		return nil, err
	}
	m, err := decodeInternalRest(kind, corr, &c)
	if err != nil {
		return nil, err
	}
	if _, unknown := m.(*Unknown); unknown {
		return m, nil
	}
	if err := c.end("body"); err != nil {
		return nil, err
	}
	return m, nil
}

func decodeInternalRest(kind Kind, corr uint64, c *cursor) (InternalMessage, error) {
	if l, ok := recordsLog(kind); ok {
		m := &ReplicateRecords{Log: l, CorrelationID: corr}
		return m, decodeRecordsRest(c, m)
	}
	if l, ok := bootstrapLog(kind); ok {
		m := &ReplicateBootstrap{Log: l, CorrelationID: corr}
		return m, decodeBootstrapRest(c, m)
	}
	if m, ok, err := decodeForwardKind(kind, corr, c); ok {
		return m, err
	}
	if m, ok, err := decodeControlKind(kind, corr, c); ok {
		return m, err
	}
	return &Unknown{RawKind: kind, CorrelationID: corr, Body: c.b}, nil
}

// decodeForwardKind decodes the forwarded publish / cache op kinds and their answers;
// ok is false for any other kind.
func decodeForwardKind(kind Kind, corr uint64, c *cursor) (m InternalMessage, ok bool, err error) {
	switch kind {
	case KindForwardPublish:
		fp := &ForwardPublish{CorrelationID: corr}
		return fp, true, decodeForwardPublishRest(c, fp)
	case KindAuthorizedForwardPublish:
		afp := &AuthorizedForwardPublish{ForwardPublish: ForwardPublish{CorrelationID: corr}}
		return afp, true, decodeAuthorizedPublishRest(c, afp)
	case KindIdempotentForwardPublish:
		ifp := &IdempotentForwardPublish{AuthorizedForwardPublish: AuthorizedForwardPublish{ForwardPublish: ForwardPublish{CorrelationID: corr}}}
		return ifp, true, decodeIdempotentRest(c, ifp)
	case KindForwardPublishOk:
		po := &ForwardPublishOk{CorrelationID: corr}
		return po, true, decodeOffsetsPair(c, &po.FirstOffset, &po.LastOffset)
	case KindForwardPublishDuplicate:
		dup := &ForwardPublishDuplicate{CorrelationID: corr}
		return dup, true, decodeOffsetsPair(c, &dup.FirstOffset, &dup.LastOffset)
	case KindForwardPublishError:
		fe := &ForwardPublishError{CorrelationID: corr}
		return fe, true, decodeCode(c, &fe.Code)
	case KindForwardCacheOp:
		op := &ForwardCacheOp{CorrelationID: corr}
		return op, true, decodeCacheOpRest(c, op)
	case KindAuthorizedForwardCacheOp:
		aop := &AuthorizedForwardCacheOp{ForwardCacheOp: ForwardCacheOp{CorrelationID: corr}}
		return aop, true, decodeAuthorizedCacheOpRest(c, aop)
	case KindForwardCacheOk:
		co := &ForwardCacheOk{CorrelationID: corr}
		return co, true, decodeCacheOkRest(c, co)
	case KindForwardCacheError:
		ce := &ForwardCacheError{CorrelationID: corr}
		return ce, true, decodeCode(c, &ce.Code)
	}
	return nil, false, nil
}

// decodeControlKind decodes handshake, routing, replication answers and fences; ok is
// false for any other kind.
func decodeControlKind(kind Kind, corr uint64, c *cursor) (m InternalMessage, ok bool, err error) {
	switch kind {
	case KindHello:
		h := &Hello{CorrelationID: corr}
		h.NodeID, err = c.str16("node_id")
		return h, true, err
	case KindHelloOk:
		h := &HelloOk{CorrelationID: corr}
		h.NodeID, err = c.str16("node_id")
		return h, true, err
	case KindStorageHello, KindStorageHelloOk:
		return decodeStorageHello(kind, corr, c)
	case KindFencePosition, KindFencePositionOk:
		return decodeFencePosition(kind, corr, c)
	case KindNotLeader:
		nl := &InternalNotLeader{CorrelationID: corr}
		return nl, true, decodeNotLeaderRest(c, nl)
	case KindReplicateOk:
		r := &ReplicateOk{CorrelationID: corr}
		r.DurableOffset, err = c.u64("durable_offset")
		return r, true, err
	case KindReplicateError:
		r := &ReplicateError{CorrelationID: corr}
		return r, true, decodeReplicateErrorRest(c, r)
	case KindUnsupportedKind:
		u := &UnsupportedKind{CorrelationID: corr}
		var k uint16
		k, err = c.u16("refused_kind")
		u.RefusedKind = Kind(k)
		return u, true, err
	case KindReplicateRebuild:
		r := &ReplicateRebuild{CorrelationID: corr}
		return r, true, decodeRebuildRest(c, r)
	case KindFence:
		f := &Fence{CorrelationID: corr}
		return f, true, decodeFenceRest(c, f)
	case KindFenceOk:
		f := &FenceOk{CorrelationID: corr}
		return f, true, decodeFenceOkRest(c, f)
	case KindError:
		e := &InternalError{CorrelationID: corr}
		return e, true, decodeCode(c, &e.Code)
	}
	return nil, false, nil
}

func decodeAuthorizedCacheOpRest(c *cursor, m *AuthorizedForwardCacheOp) error {
	if err := decodeCacheOpRest(c, &m.ForwardCacheOp); err != nil {
		return err
	}
	var err error
	m.Credential, err = decodeCredential(c)
	return err
}

func decodeReplicateErrorRest(c *cursor, m *ReplicateError) error {
	if err := decodeCode(c, &m.Code); err != nil {
		return err
	}
	var err error
	m.ExpectedOffset, err = c.u64("expected_offset")
	return err
}

func decodeCode(c *cursor, dst *InternalCode) error {
	v, err := c.u16("code")
	*dst = InternalCode(v)
	return err
}

func decodeOffsetsPair(c *cursor, first, last *uint64) error {
	var err error
	if *first, err = c.u64("first_offset"); err != nil {
		return err
	}
	*last, err = c.u64("last_offset")
	return err
}

func decodeLog(c *cursor) (ReplicaLog, error) {
	start := c.off
	v, err := c.u8("log")
	if err != nil {
		return 0, err
	}
	if !ReplicaLog(v).valid() {
		return 0, decodeErr("log", start, ErrMalformed)
	}
	return ReplicaLog(v), nil
}

func decodeForwardPublishRest(c *cursor, m *ForwardPublish) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Generation, err = c.u64("generation"); err != nil {
		return err
	}
	m.Payloads, err = c.payloads("payloads", m.Payloads)
	return err
}

func decodeCredential(c *cursor) ([]byte, error) {
	start := c.off
	cred, err := c.str16("credential")
	if err != nil {
		return nil, err
	}
	if len(cred) == 0 {
		return nil, decodeErr("credential", start, ErrMalformed)
	}
	return cred, nil
}

func decodeAuthorizedPublishRest(c *cursor, m *AuthorizedForwardPublish) error {
	if err := decodeForwardPublishRest(c, &m.ForwardPublish); err != nil {
		return err
	}
	var err error
	m.Credential, err = decodeCredential(c)
	return err
}

func decodeIdempotentRest(c *cursor, m *IdempotentForwardPublish) error {
	if err := decodeAuthorizedPublishRest(c, &m.AuthorizedForwardPublish); err != nil {
		return err
	}
	start := c.off
	var err error
	if m.ProducerID, err = c.str8("producer_id"); err != nil {
		return err
	}
	if len(m.ProducerID) == 0 {
		return decodeErr("producer_id", start, ErrMalformed)
	}
	m.RequestID, err = c.u64("request_id")
	return err
}

func decodeNotLeaderRest(c *cursor, m *InternalNotLeader) error {
	var err error
	if m.OwnerNodeID, err = c.str16("owner_node_id"); err != nil {
		return err
	}
	if m.OwnerAddress, err = c.str16("owner_address"); err != nil {
		return err
	}
	m.Generation, err = c.u64("generation")
	return err
}

func decodeCacheOpRest(c *cursor, m *ForwardCacheOp) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Generation, err = c.u64("generation"); err != nil {
		return err
	}
	start := c.off
	op, err := c.u8("op")
	if err != nil {
		return err
	}
	m.Op = CacheOp(op)
	if m.Op < CacheOpPut || m.Op > CacheOpCounterGet {
		return decodeErr("op", start, ErrMalformed)
	}
	if m.Key, err = c.str16("key"); err != nil {
		return err
	}
	if m.Value, err = c.bytes32("value"); err != nil {
		return err
	}
	start = c.off
	present, err := c.u8("ttl_present")
	if err != nil {
		return err
	}
	if present > 1 {
		return decodeErr("ttl_present", start, ErrMalformed)
	}
	m.HasTTL = present == 1
	start = c.off
	if m.TTLMs, err = c.u64("ttl_ms"); err != nil {
		return err
	}
	if !m.HasTTL && m.TTLMs != 0 {
		return decodeErr("ttl_ms", start, ErrMalformed)
	}
	return nil
}

func decodeCacheOkRest(c *cursor, m *ForwardCacheOk) error {
	start := c.off
	present, err := c.u8("present")
	if err != nil {
		return err
	}
	switch present {
	case 0:
		return nil
	case 1:
		m.Present = true
		m.Value, err = c.bytes32("value")
		return err
	}
	return decodeErr("present", start, ErrMalformed)
}

func decodeRecordsRest(c *cursor, m *ReplicateRecords) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Epoch, err = c.u64("epoch"); err != nil {
		return err
	}
	if m.FirstOffset, err = c.u64("first_offset"); err != nil {
		return err
	}
	if m.Checksum, err = c.u32("batch_checksum"); err != nil {
		return err
	}
	m.Payloads, err = c.payloads("payloads", m.Payloads)
	return err
}

func decodeBootstrapRest(c *cursor, m *ReplicateBootstrap) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Epoch, err = c.u64("epoch"); err != nil {
		return err
	}
	m.BaseOffset, err = c.u64("base_offset")
	return err
}

func decodeRebuildRest(c *cursor, m *ReplicateRebuild) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Log, err = decodeLog(c); err != nil {
		return err
	}
	if m.Generation, err = c.u64("generation"); err != nil {
		return err
	}
	m.BaseOffset, err = c.u64("base_offset")
	return err
}

func decodeFenceRest(c *cursor, m *Fence) error {
	if err := m.Shard.decode(c); err != nil {
		return err
	}
	var err error
	if m.Log, err = decodeLog(c); err != nil {
		return err
	}
	m.Generation, err = c.u64("generation")
	return err
}

func decodeFenceOkRest(c *cursor, m *FenceOk) error {
	var err error
	if m.Log, err = decodeLog(c); err != nil {
		return err
	}
	if m.Generation, err = c.u64("generation"); err != nil {
		return err
	}
	m.DurableOffset, err = c.u64("durable_offset")
	return err
}

// DecodeReplicateRecords decodes a records body (kinds 9, 13, 16, 18, 20) into dst without
// allocating once dst.Payloads has capacity: the follower's hot path. It does not verify
// the checksum; call dst.ChecksumOK(). A kind that is not a records kind is ErrMalformed.
func DecodeReplicateRecords(kind Kind, body []byte, dst *ReplicateRecords) error {
	l, ok := recordsLog(kind)
	if !ok {
		return decodeErr("kind", 6, ErrMalformed)
	}
	payloads := dst.Payloads[:0]
	*dst = ReplicateRecords{Log: l, Payloads: payloads}
	c := cursor{b: body}
	var err error
	if dst.CorrelationID, err = c.u64("correlation_id"); err != nil {
		return err
	}
	if err := decodeRecordsRest(&c, dst); err != nil {
		return err
	}
	return c.end("body")
}

package proto

// Kind, Correlation and AppendBody of every FLXI message, and DecodeInternal.

// Kind implements InternalMessage.
func (*Hello) Kind() Kind { return KindHello }

// Kind implements InternalMessage.
func (*HelloOk) Kind() Kind { return KindHelloOk }

// Kind implements InternalMessage.
func (*ForwardPublish) Kind() Kind { return KindForwardPublish }

// Kind implements InternalMessage.
func (*AuthorizedForwardPublish) Kind() Kind { return KindAuthorizedForwardPublish }

// Kind implements InternalMessage.
func (*IdempotentForwardPublish) Kind() Kind { return KindIdempotentForwardPublish }

// Kind implements InternalMessage.
func (*ForwardPublishOk) Kind() Kind { return KindForwardPublishOk }

// Kind implements InternalMessage.
func (*ForwardPublishDuplicate) Kind() Kind { return KindForwardPublishDuplicate }

// Kind implements InternalMessage.
func (*ForwardPublishError) Kind() Kind { return KindForwardPublishError }

// Kind implements InternalMessage.
func (*InternalNotLeader) Kind() Kind { return KindNotLeader }

// Kind implements InternalMessage.
func (*ForwardCacheOp) Kind() Kind { return KindForwardCacheOp }

// Kind implements InternalMessage.
func (*AuthorizedForwardCacheOp) Kind() Kind { return KindAuthorizedForwardCacheOp }

// Kind implements InternalMessage.
func (*ForwardCacheOk) Kind() Kind { return KindForwardCacheOk }

// Kind implements InternalMessage.
func (*ForwardCacheError) Kind() Kind { return KindForwardCacheError }

// Kind implements InternalMessage: the records kind of m.Log.
func (m *ReplicateRecords) Kind() Kind { return m.Log.RecordsKind() }

// Kind implements InternalMessage: the bootstrap kind of m.Log.
func (m *ReplicateBootstrap) Kind() Kind { return m.Log.BootstrapKind() }

// Kind implements InternalMessage.
func (*ReplicateOk) Kind() Kind { return KindReplicateOk }

// Kind implements InternalMessage.
func (*ReplicateError) Kind() Kind { return KindReplicateError }

// Kind implements InternalMessage.
func (*UnsupportedKind) Kind() Kind { return KindUnsupportedKind }

// Kind implements InternalMessage.
func (*ReplicateRebuild) Kind() Kind { return KindReplicateRebuild }

// Kind implements InternalMessage.
func (*Fence) Kind() Kind { return KindFence }

// Kind implements InternalMessage.
func (*FenceOk) Kind() Kind { return KindFenceOk }

// Kind implements InternalMessage.
func (*InternalError) Kind() Kind { return KindError }

// Kind implements InternalMessage: the unknown kind as received.
func (m *Unknown) Kind() Kind { return m.RawKind }

// Correlation implements InternalMessage.
func (m *Hello) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *HelloOk) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardPublish) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardPublishOk) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardPublishDuplicate) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardPublishError) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *InternalNotLeader) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardCacheOp) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardCacheOk) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ForwardCacheError) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ReplicateRecords) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ReplicateBootstrap) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ReplicateOk) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ReplicateError) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *UnsupportedKind) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *ReplicateRebuild) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *Fence) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *FenceOk) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *InternalError) Correlation() uint64 { return m.CorrelationID }

// Correlation implements InternalMessage.
func (m *Unknown) Correlation() uint64 { return m.CorrelationID }

// AppendBody implements InternalMessage.
func (m *Hello) AppendBody(dst []byte) ([]byte, error) {
	return appendChecked16(appendU64(dst, m.CorrelationID), m.NodeID)
}

// AppendBody implements InternalMessage.
func (m *HelloOk) AppendBody(dst []byte) ([]byte, error) {
	return appendChecked16(appendU64(dst, m.CorrelationID), m.NodeID)
}

// AppendBody implements InternalMessage.
func (m *ForwardPublish) AppendBody(dst []byte) ([]byte, error) {
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	out = appendU64(out, m.Generation)
	return appendPayloads(out, m.Payloads), nil
}

func appendCredential(dst, out []byte, credential []byte) ([]byte, error) {
	if len(credential) == 0 {
		return dst, ErrMalformed
	}
	out, err := appendChecked16(out, credential)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// AppendBody implements InternalMessage.
func (m *AuthorizedForwardPublish) AppendBody(dst []byte) ([]byte, error) {
	out, err := m.ForwardPublish.AppendBody(dst)
	if err != nil {
		return dst, err
	}
	return appendCredential(dst, out, m.Credential)
}

// AppendBody implements InternalMessage.
func (m *IdempotentForwardPublish) AppendBody(dst []byte) ([]byte, error) {
	out, err := m.AuthorizedForwardPublish.AppendBody(dst)
	if err != nil {
		return dst, err
	}
	if len(m.ProducerID) == 0 || len(m.ProducerID) > 255 {
		return dst, ErrTooLong
	}
	if err := checkNames(m.ProducerID); err != nil {
		return dst, err
	}
	out = append(out, byte(len(m.ProducerID)))
	out = append(out, m.ProducerID...)
	return appendU64(out, m.RequestID), nil
}

// AppendBody implements InternalMessage.
func (m *ForwardPublishOk) AppendBody(dst []byte) ([]byte, error) {
	return appendU64(appendU64(appendU64(dst, m.CorrelationID), m.FirstOffset), m.LastOffset), nil
}

// AppendBody implements InternalMessage.
func (m *ForwardPublishDuplicate) AppendBody(dst []byte) ([]byte, error) {
	return appendU64(appendU64(appendU64(dst, m.CorrelationID), m.FirstOffset), m.LastOffset), nil
}

// AppendBody implements InternalMessage.
func (m *ForwardPublishError) AppendBody(dst []byte) ([]byte, error) {
	return appendU16(appendU64(dst, m.CorrelationID), uint16(m.Code)), nil
}

// AppendBody implements InternalMessage.
func (m *InternalNotLeader) AppendBody(dst []byte) ([]byte, error) {
	out, err := appendChecked16(appendU64(dst, m.CorrelationID), m.OwnerNodeID)
	if err != nil {
		return dst, err
	}
	if out, err = appendChecked16(out, m.OwnerAddress); err != nil {
		return dst, err
	}
	return appendU64(out, m.Generation), nil
}

// AppendBody implements InternalMessage.
func (m *ForwardCacheOp) AppendBody(dst []byte) ([]byte, error) {
	if m.Op < CacheOpPut || m.Op > CacheOpCounterGet {
		return dst, ErrMalformed
	}
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	out = appendU64(out, m.Generation)
	out = append(out, byte(m.Op))
	if out, err = appendChecked16(out, m.Key); err != nil {
		return dst, err
	}
	out = appendU32(out, uint32(len(m.Value)))
	out = append(out, m.Value...)
	ttl := m.TTLMs
	if !m.HasTTL {
		ttl = 0
	}
	out = append(out, boolByte(m.HasTTL))
	return appendU64(out, ttl), nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// AppendBody implements InternalMessage.
func (m *AuthorizedForwardCacheOp) AppendBody(dst []byte) ([]byte, error) {
	out, err := m.ForwardCacheOp.AppendBody(dst)
	if err != nil {
		return dst, err
	}
	return appendCredential(dst, out, m.Credential)
}

// AppendBody implements InternalMessage.
func (m *ForwardCacheOk) AppendBody(dst []byte) ([]byte, error) {
	out := appendU64(dst, m.CorrelationID)
	if !m.Present {
		return append(out, 0), nil
	}
	out = append(out, 1)
	out = appendU32(out, uint32(len(m.Value)))
	return append(out, m.Value...), nil
}

// AppendBody implements InternalMessage.
func (m *ForwardCacheError) AppendBody(dst []byte) ([]byte, error) {
	return appendU16(appendU64(dst, m.CorrelationID), uint16(m.Code)), nil
}

// AppendBody implements InternalMessage. The checksum written is BatchChecksum(m.Payloads),
// whatever m.Checksum holds. Allocates nothing beyond the growth of dst.
func (m *ReplicateRecords) AppendBody(dst []byte) ([]byte, error) {
	if !m.Log.valid() {
		return dst, ErrMalformed
	}
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	out = appendU64(out, m.Epoch)
	out = appendU64(out, m.FirstOffset)
	out = appendU32(out, BatchChecksum(m.Payloads))
	return appendPayloads(out, m.Payloads), nil
}

// AppendBody implements InternalMessage.
func (m *ReplicateBootstrap) AppendBody(dst []byte) ([]byte, error) {
	if !m.Log.valid() {
		return dst, ErrMalformed
	}
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	return appendU64(appendU64(out, m.Epoch), m.BaseOffset), nil
}

// AppendBody implements InternalMessage.
func (m *ReplicateOk) AppendBody(dst []byte) ([]byte, error) {
	return appendU64(appendU64(dst, m.CorrelationID), m.DurableOffset), nil
}

// AppendBody implements InternalMessage.
func (m *ReplicateError) AppendBody(dst []byte) ([]byte, error) {
	return appendU64(appendU16(appendU64(dst, m.CorrelationID), uint16(m.Code)), m.ExpectedOffset), nil
}

// AppendBody implements InternalMessage.
func (m *UnsupportedKind) AppendBody(dst []byte) ([]byte, error) {
	return appendU16(appendU64(dst, m.CorrelationID), uint16(m.RefusedKind)), nil
}

// AppendBody implements InternalMessage.
func (m *ReplicateRebuild) AppendBody(dst []byte) ([]byte, error) {
	if !m.Log.valid() {
		return dst, ErrMalformed
	}
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	out = append(out, byte(m.Log))
	return appendU64(appendU64(out, m.Generation), m.BaseOffset), nil
}

// AppendBody implements InternalMessage.
func (m *Fence) AppendBody(dst []byte) ([]byte, error) {
	if !m.Log.valid() {
		return dst, ErrMalformed
	}
	out, err := m.Shard.append(appendU64(dst, m.CorrelationID))
	if err != nil {
		return dst, err
	}
	out = append(out, byte(m.Log))
	return appendU64(out, m.Generation), nil
}

// AppendBody implements InternalMessage.
func (m *FenceOk) AppendBody(dst []byte) ([]byte, error) {
	if !m.Log.valid() {
		return dst, ErrMalformed
	}
	out := append(appendU64(dst, m.CorrelationID), byte(m.Log))
	return appendU64(appendU64(out, m.Generation), m.DurableOffset), nil
}

// AppendBody implements InternalMessage.
func (m *InternalError) AppendBody(dst []byte) ([]byte, error) {
	return appendU16(appendU64(dst, m.CorrelationID), uint16(m.Code)), nil
}

// AppendBody implements InternalMessage: the raw body as received.
func (m *Unknown) AppendBody(dst []byte) ([]byte, error) { return append(dst, m.Body...), nil }

package proto

// Type and AppendJSON of every message. Key order follows spec/client-protocol.md §6/§8 and
// the tables in docs/client-protocol.md.

// Type implements Message.
func (*Auth) Type() MessageType { return TypeAuth }

// Type implements Message.
func (*AuthOK) Type() MessageType { return TypeAuthOK }

// Type implements Message.
func (*Publish) Type() MessageType { return TypePublish }

// Type implements Message.
func (*JSONPublishBatch) Type() MessageType { return TypePublishBatch }

// Type implements Message.
func (*PublishOK) Type() MessageType { return TypePublishOK }

// Type implements Message.
func (*PublishError) Type() MessageType { return TypePublishError }

// Type implements Message.
func (*Subscribe) Type() MessageType { return TypeSubscribe }

// Type implements Message.
func (*Subscribed) Type() MessageType { return TypeSubscribed }

// Type implements Message.
func (*SubscribeCursorError) Type() MessageType { return TypeSubscribeCursorError }

// Type implements Message.
func (*EventStreamHello) Type() MessageType { return TypeEventStreamHello }

// Type implements Message.
func (*Event) Type() MessageType { return TypeEvent }

// Type implements Message.
func (*JSONEventBatch) Type() MessageType { return TypeEventBatch }

// Type implements Message.
func (*CachePut) Type() MessageType { return TypeCachePut }

// Type implements Message.
func (*CacheGet) Type() MessageType { return TypeCacheGet }

// Type implements Message.
func (*CacheValue) Type() MessageType { return TypeCacheValue }

// Type implements Message.
func (*CacheOK) Type() MessageType { return TypeCacheOK }

// Type implements Message.
func (*OK) Type() MessageType { return TypeOK }

// Type implements Message.
func (*Error) Type() MessageType { return TypeError }

// Type implements Message.
func (*CacheDelete) Type() MessageType { return TypeCacheDelete }

// Type implements Message.
func (*CacheDeleted) Type() MessageType { return TypeCacheDeleted }

// Type implements Message.
func (*CounterAdd) Type() MessageType { return TypeCounterAdd }

// Type implements Message.
func (*CounterGet) Type() MessageType { return TypeCounterGet }

// Type implements Message.
func (*CounterValue) Type() MessageType { return TypeCounterValue }

// Type implements Message.
func (*GroupPoll) Type() MessageType { return TypeGroupPoll }

// Type implements Message.
func (*GroupRecords) Type() MessageType { return TypeGroupRecords }

// Type implements Message.
func (*GroupAck) Type() MessageType { return TypeGroupAck }

// Type implements Message.
func (*GroupNack) Type() MessageType { return TypeGroupNack }

// Type implements Message.
func (*GroupOK) Type() MessageType { return TypeGroupOK }

// Type implements Message.
func (*DeadLettersList) Type() MessageType { return TypeDeadLettersList }

// Type implements Message.
func (*DeadLetters) Type() MessageType { return TypeDeadLetters }

// Type implements Message.
func (*DeadLettersRedrive) Type() MessageType { return TypeDeadLettersRedrive }

// Type implements Message.
func (*CacheWatch) Type() MessageType { return TypeCacheWatch }

// Type implements Message.
func (*CacheWatching) Type() MessageType { return TypeCacheWatching }

// Type implements Message.
func (*CacheChange) Type() MessageType { return TypeCacheChange }

// Type implements Message.
func (*CacheUnwatch) Type() MessageType { return TypeCacheUnwatch }

// Type implements Message.
func (*NotLeader) Type() MessageType { return TypeNotLeader }

// Type implements Message.
func (*RouteLookup) Type() MessageType { return TypeRouteLookup }

// Type implements Message.
func (*Route) Type() MessageType { return TypeRoute }

// AppendJSON implements Message.
func (m *Auth) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeAuth)
	w.str("tenant_id", m.TenantID)
	w.str("token", m.Token)
	if m.ClientFlags != nil {
		w.u64("client_flags", uint64(*m.ClientFlags))
	}
	if len(m.Features) > 0 {
		w.strList("features", m.Features)
	}
	return w.end()
}

// AppendJSON implements Message.
func (m *AuthOK) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeAuthOK)
	w.u64("server_flags", uint64(m.ServerFlags))
	if len(m.Features) > 0 {
		w.strList("features", m.Features)
	}
	return w.end()
}

func (w *jw) target(tenant, namespace, stream string) {
	w.str("tenant_id", tenant)
	w.str("namespace", namespace)
	w.str("stream", stream)
}

func (w *jw) cacheKey(tenant, namespace, cache, key string) {
	w.str("tenant_id", tenant)
	w.str("namespace", namespace)
	w.str("cache", cache)
	w.str("key", key)
}

// AppendJSON implements Message.
func (m *Publish) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypePublish)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.optBytes("key", m.Key)
	w.bytes("payload", m.Payload)
	w.optU64("request_id", m.RequestID)
	w.optStr("ack", string(m.Ack))
	w.optStr("producer_id", m.ProducerID)
	w.optTrue("idempotent", m.Idempotent)
	return w.end()
}

// AppendJSON implements Message.
func (m *JSONPublishBatch) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypePublishBatch)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.optBytes("key", m.Key)
	w.bytesList("payloads", m.Payloads)
	w.optU64("request_id", m.RequestID)
	w.optStr("ack", string(m.Ack))
	w.optStr("producer_id", m.ProducerID)
	w.optTrue("idempotent", m.Idempotent)
	return w.end()
}

// AppendJSON implements Message.
func (m *PublishOK) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypePublishOK)
	w.u64("request_id", m.RequestID)
	w.optU64("first_offset", m.FirstOffset)
	w.optU64("last_offset", m.LastOffset)
	w.optTrue("duplicate", m.Duplicate)
	w.optU32("shard", m.Shard)
	return w.end()
}

// AppendJSON implements Message.
func (m *PublishError) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypePublishError)
	w.u64("request_id", m.RequestID)
	w.str("message", m.Message)
	w.optStr("code", string(m.Code))
	return w.end()
}

// AppendJSON implements Message.
func (m *Subscribe) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeSubscribe)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.optU64("subscription_id", m.SubscriptionID)
	if m.Start != nil {
		w.key("start")
		w.b = m.Start.appendJSON(w.b)
	}
	w.optU32("shard", m.Shard)
	w.optTrue("with_publisher", m.WithPublisher)
	return w.end()
}

// AppendJSON implements Message.
func (m *Subscribed) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeSubscribed)
	w.u64("subscription_id", m.SubscriptionID)
	return w.end()
}

// AppendJSON implements Message.
func (m *SubscribeCursorError) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeSubscribeCursorError)
	w.str("reason", string(m.Reason))
	w.u64("requested", m.Requested)
	w.u64("available", m.Available)
	return w.end()
}

// AppendJSON implements Message.
func (m *EventStreamHello) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeEventStreamHello)
	w.u64("subscription_id", m.SubscriptionID)
	return w.end()
}

// AppendJSON implements Message.
func (m *Event) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeEvent)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.bytes("payload", m.Payload)
	w.optU64("offset", m.Offset)
	w.optStr("publisher", m.Publisher)
	return w.end()
}

// AppendJSON implements Message.
func (m *JSONEventBatch) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeEventBatch)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.bytesList("payloads", m.Payloads)
	w.optU64("base_offset", m.BaseOffset)
	if m.SkippedBefore != 0 {
		w.u64("skipped_before", m.SkippedBefore)
	}
	if m.Publishers != nil {
		w.strList("publishers", m.Publishers)
	}
	return w.end()
}

// AppendJSON implements Message.
func (m *CachePut) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCachePut)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.bytes("value", m.Value)
	w.optU64("request_id", m.RequestID)
	w.key("ttl_ms")
	if m.TTLMs == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = appendUint(w.b, *m.TTLMs)
	}
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheGet) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheGet)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheValue) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheValue)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.nullBytes("value", m.Value)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheOK) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheOK)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *OK) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeOK)
	return w.end()
}

// AppendJSON implements Message.
func (m *Error) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeError)
	w.str("message", m.Message)
	w.optStr("code", string(m.Code))
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheDelete) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheDelete)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheDeleted) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheDeleted)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.nullBytes("value", m.Value)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CounterAdd) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCounterAdd)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.i64("delta", m.Delta)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CounterGet) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCounterGet)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CounterValue) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCounterValue)
	w.cacheKey(m.TenantID, m.Namespace, m.Cache, m.Key)
	w.i64("value", m.Value)
	w.optU64("request_id", m.RequestID)
	if m.Found != nil { // found? (additive): written only when the broker knows presence
		w.key("found")
		if *m.Found {
			w.b = append(w.b, "true"...)
		} else {
			w.b = append(w.b, "false"...)
		}
	}
	return w.end()
}

func (w *jw) groupTarget(tenant, namespace, stream string, shard uint32, group string) {
	w.target(tenant, namespace, stream)
	w.u64("shard", uint64(shard))
	w.str("group", group)
}

// AppendJSON implements Message.
func (m *GroupPoll) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeGroupPoll)
	w.groupTarget(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	w.u64("max_records", uint64(m.MaxRecords))
	w.u64("max_wait_ms", m.MaxWaitMs)
	w.optTrue("with_publisher", m.WithPublisher)
	w.optTrue("binary_records", m.BinaryRecords)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *GroupRecords) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeGroupRecords)
	w.u64("request_id", m.RequestID)
	w.str("group", m.Group)
	w.u64("shard", uint64(m.Shard))
	w.key("records")
	w.b = append(w.b, '[')
	for i := range m.Records {
		r := &m.Records[i]
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `{"offset":`...)
		w.b = appendUint(w.b, r.Offset)
		w.bytes("payload", r.Payload)
		w.u64("delivery", uint64(r.Delivery))
		w.optStr("publisher", r.Publisher)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ']')
	return w.end()
}

// AppendJSON implements Message.
func (m *GroupAck) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeGroupAck)
	w.groupTarget(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	w.u64List("offsets", m.Offsets)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *GroupNack) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeGroupNack)
	w.groupTarget(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	w.u64List("offsets", m.Offsets)
	w.optU64("redeliver_after_ms", m.RedeliverAfterMs)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *GroupOK) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeGroupOK)
	w.u64("request_id", m.RequestID)
	w.optU64("count", m.Count)
	return w.end()
}

// AppendJSON implements Message.
func (m *DeadLettersList) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeDeadLettersList)
	w.groupTarget(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	w.u64("from_offset", m.FromOffset)
	w.u64("limit", uint64(m.Limit))
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *DeadLetters) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeDeadLetters)
	w.u64("request_id", m.RequestID)
	w.str("group", m.Group)
	w.u64("shard", uint64(m.Shard))
	w.key("entries")
	w.b = append(w.b, '[')
	for i, e := range m.Entries {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `{"offset":`...)
		w.b = appendUint(w.b, e.Offset)
		w.u64("deliveries", uint64(e.Deliveries))
		w.u64("dead_lettered_at_ms", e.DeadLetteredAtMs)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ']')
	w.optU64("next_from", m.NextFrom)
	return w.end()
}

// AppendJSON implements Message.
func (m *DeadLettersRedrive) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeDeadLettersRedrive)
	w.groupTarget(m.TenantID, m.Namespace, m.Stream, m.Shard, m.Group)
	w.u64List("offsets", m.Offsets)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheWatch) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheWatch)
	w.str("tenant_id", m.TenantID)
	w.str("namespace", m.Namespace)
	w.str("cache", m.Cache)
	if m.Key != nil {
		w.str("key", *m.Key)
	}
	if m.Prefix != nil {
		w.str("prefix", *m.Prefix)
	}
	w.optU64("from_offset", m.FromOffset)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheWatching) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheWatching)
	w.u64("request_id", m.RequestID)
	w.u64("watch_id", m.WatchID)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheChange) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheChange)
	w.u64("watch_id", m.WatchID)
	w.str("key", m.Key)
	w.str("op", string(m.Op))
	w.nullBytes("value", m.Value)
	w.u64("offset", m.Offset)
	return w.end()
}

// AppendJSON implements Message.
func (m *CacheUnwatch) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeCacheUnwatch)
	w.u64("watch_id", m.WatchID)
	w.optU64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *NotLeader) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeNotLeader)
	w.optU64("request_id", m.RequestID)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.u64("shard", uint64(m.Shard))
	w.owner("owner", m.Owner)
	w.u64("generation", m.Generation)
	return w.end()
}

// AppendJSON implements Message.
func (m *RouteLookup) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeRouteLookup)
	w.target(m.TenantID, m.Namespace, m.Stream)
	w.u64("request_id", m.RequestID)
	return w.end()
}

// AppendJSON implements Message.
func (m *Route) AppendJSON(dst []byte) []byte {
	w := newObject(dst, TypeRoute)
	w.u64("request_id", m.RequestID)
	w.key("shards")
	w.b = append(w.b, '[')
	for i, s := range m.Shards {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = append(w.b, `{"shard":`...)
		w.b = appendUint(w.b, uint64(s.Shard))
		w.owner("owner", s.Owner)
		w.u64("generation", s.Generation)
		w.b = append(w.b, '}')
	}
	w.b = append(w.b, ']')
	w.optStr("routing", m.Routing)
	return w.end()
}

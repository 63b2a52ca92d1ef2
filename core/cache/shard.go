package cache

import "encoding/binary"

// Stats are a shard's counts since it was created (replay included in the
// gauges, not in the op counts). The engine exports them as metrics.
type Stats struct {
	Entries     int   // stored values (gauge)
	Bytes       int64 // accounted bytes of stored values (gauge)
	Counters    int   // counters (gauge)
	Puts        uint64
	Gets        uint64
	Hits        uint64 // Gets that found a live value
	Deletes     uint64 // Deletes that removed a live value
	Expirations uint64 // values expired, lazily or by Sweep
	Evictions   uint64 // values evicted to stay within capacity
	CounterAdds uint64
}

// Shard is the state machine of one cache shard: its values (with TTLs), its
// counters (a separate key space with a log of its own, docs/cache.md) and its
// watches. Create one with New; only the owning core calls it.
type Shard struct {
	cfg         Config
	values      *table
	counters    counterStore
	watches     watchSet
	out         outbox
	cacheNext   uint64 // offset the next cache-log record gets
	counterNext uint64 // offset the next counter-log record gets
	stats       Stats
	replay      replayState
	compactBuf  []byte
	compactOut  [][]byte
}

// New returns an empty shard bounded by cfg (zero fields take DefaultConfig's
// values). To restore a durable shard, replay its logs next (ReplayCache,
// ReplayCounter, FinishReplay); a new shard's logs start at offset 0.
func New(cfg Config) *Shard {
	return &Shard{cfg: cfg.withDefaults(), values: newTable(), counters: newCounterStore()}
}

// Config returns the shard's bounds with defaults filled in.
func (s *Shard) Config() Config { return s.cfg }

// Stats returns the shard's counts.
func (s *Shard) Stats() Stats {
	st := s.stats
	st.Entries, st.Bytes, st.Counters = s.values.len(), s.values.bytes, s.counters.len()
	return st
}

// NextOffsets returns the offsets the next cache-log and counter-log records
// will get (pending effects included).
func (s *Shard) NextOffsets() (cacheNext, counterNext uint64) { return s.cacheNext, s.counterNext }

// Effects returns the work owed since the last Advance (see Effects). The
// result and every slice in it stay valid until Advance.
func (s *Shard) Effects() *Effects {
	cacheFirst := s.cacheNext - uint64(len(s.out.cache))
	counterFirst := s.counterNext - uint64(len(s.out.counter))
	return s.out.build(cacheFirst, counterFirst)
}

// Advance tells the shard the owner has taken the current Effects (appended
// the records, queued the changes); their buffers are reused from now on.
func (s *Shard) Advance() { s.out.reset() }

// checkKey validates a client key.
func (s *Shard) checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > s.cfg.MaxKeyBytes:
		return ErrKeyTooLarge
	}
	return nil
}

// Put stores a copy of value under key (spec/client-protocol.md §6
// cache_put). ttl NoTTL never expires; TTLMillis(ms) expires at
// nowMillis+ms (docs/cache.md, "TTL"). An empty value is stored as such and
// is not a miss. If the key's previous value had expired, its expire record
// comes first. If the shard is full, values are evicted first (docs/cache.md,
// "Capacity and eviction"). Returns the offset of the put record. Errors:
// ErrEmptyKey, ErrKeyTooLarge, ErrValueTooLarge, ErrNegativeTTL, ErrZeroTTL,
// ErrTTLTooLarge; on error nothing changes.
func (s *Shard) Put(key, value []byte, ttl TTL, nowMillis int64) (uint64, error) {
	if err := s.checkKey(key); err != nil {
		return 0, err
	}
	size := accounted(len(key), len(value))
	if len(value) > s.cfg.MaxValueBytes || size > s.cfg.MaxBytes {
		return 0, ErrValueTooLarge
	}
	expiresAt, hasExpiry, err := ttl.expiry(nowMillis)
	if err != nil {
		return 0, err
	}
	self, exists := s.liveSlot(key, nowMillis)
	s.makeRoom(self, exists, size, nowMillis)
	start := len(s.out.buf)
	s.out.buf = appendPut(s.out.buf, OpPut, key, value, hasExpiry, expiresAt)
	rec := s.out.endCache(start)
	off := s.cacheNext
	s.cacheNext++
	s.values.set(key, value, hasExpiry, expiresAt)
	s.stats.Puts++
	if !s.watches.empty() {
		k := s.out.recordKey(rec, putHeaderBytes)
		v := span{start: k.end + 4, end: rec.end}
		s.notify(ChangePut, off, k, v, true)
	}
	return off, nil
}

// liveSlot looks key up at nowMillis, expiring it (with its record) when its
// instant has come, so no operation ever sees an expired value.
func (s *Shard) liveSlot(key []byte, nowMillis int64) (int32, bool) {
	i, ok := s.values.lookup(key)
	if !ok {
		return none, false
	}
	if sl := &s.values.slots[i]; sl.hasExpiry && nowMillis >= sl.expiresAt {
		s.expireSlot(i)
		return none, false
	}
	return i, true
}

// Get returns the live value of key at nowMillis and whether there is one
// (spec/client-protocol.md §6 cache_get / cache_value; found with an empty
// value is not a miss). A value whose expiry instant has come is expired
// here, which emits its expire record and changes. The returned slice aliases
// the shard's memory and is valid until the next call on the shard: copy it
// before handing it to another goroutine. Errors: none (a bad key is a miss).
func (s *Shard) Get(key []byte, nowMillis int64) (value []byte, found bool) {
	s.stats.Gets++
	i, ok := s.liveSlot(key, nowMillis)
	if !ok {
		return nil, false
	}
	s.stats.Hits++
	return s.values.slots[i].value, true
}

// Delete removes key's live value and returns it (spec/client-protocol.md
// §8.1: found = false is the wire's null; an empty removed value is not
// null). A value already expired at nowMillis is expired instead (expire
// record, ChangeExpire) and reported as not found. The returned slice aliases
// the shard's memory until the next call. offset is the delete record's
// offset, meaningful when found. Deleting a missing key writes nothing.
func (s *Shard) Delete(key []byte, nowMillis int64) (value []byte, found bool, offset uint64) {
	i, ok := s.liveSlot(key, nowMillis)
	if !ok {
		return nil, false, 0
	}
	start := len(s.out.buf)
	s.out.buf = appendKeyOnly(s.out.buf, OpDelete, key)
	rec := s.out.endCache(start)
	offset = s.cacheNext
	s.cacheNext++
	value = s.values.slots[i].value
	s.values.remove(i)
	s.stats.Deletes++
	if !s.watches.empty() {
		s.notify(ChangeDelete, offset, s.out.recordKey(rec, keyOnlyHeaderBytes), span{}, false)
	}
	return value, true, offset
}

// Sweep expires up to maxRecords values whose expiry instant is at or before
// nowMillis, soonest first, and returns how many it expired. The core calls it
// from its timer hook so that expired values nobody reads still leave memory
// and watchers still hear of them; the bound keeps one tick short.
func (s *Shard) Sweep(nowMillis int64, maxRecords int) int {
	n := 0
	for n < maxRecords {
		i, ok := s.values.soonest()
		if !ok || s.values.slots[i].expiresAt > nowMillis {
			break
		}
		s.expireSlot(i)
		n++
	}
	return n
}

// expireSlot removes slot i with an expire record and ChangeExpire.
func (s *Shard) expireSlot(i int32) {
	sl := &s.values.slots[i]
	start := len(s.out.buf)
	s.out.buf = append(s.out.buf, byte(OpExpire))
	s.out.buf = binary.BigEndian.AppendUint64(s.out.buf, uint64(sl.expiresAt))
	s.out.buf = appendKeyString(s.out.buf, sl.key)
	s.removeWithRecord(i, start, ChangeExpire, expireHeaderBytes)
	s.stats.Expirations++
}

// evictSlot removes slot i with an evict record and ChangeEvict.
func (s *Shard) evictSlot(i int32) {
	start := len(s.out.buf)
	s.out.buf = appendKeyString(append(s.out.buf, byte(OpEvict)), s.values.slots[i].key)
	s.removeWithRecord(i, start, ChangeEvict, keyOnlyHeaderBytes)
	s.stats.Evictions++
}

func (s *Shard) removeWithRecord(i int32, start int, op ChangeOp, header int) {
	rec := s.out.endCache(start)
	off := s.cacheNext
	s.cacheNext++
	s.values.remove(i)
	if !s.watches.empty() {
		s.notify(op, off, s.out.recordKey(rec, header), span{}, false)
	}
}

// notify queues one Change per watch following the key at span k.
func (s *Shard) notify(op ChangeOp, offset uint64, k, v span, hasValue bool) {
	key := s.out.buf[k.start:k.end]
	add := func(id uint64) {
		s.out.changes = append(s.out.changes, pendingChange{watchID: id, op: op, offset: offset,
			key: k, value: v, hasValue: hasValue})
	}
	for _, id := range s.watches.exact[string(key)] {
		add(id)
	}
	for _, p := range s.watches.prefixes {
		if len(key) >= len(p.prefix) && string(key[:len(p.prefix)]) == p.prefix {
			add(p.id)
		}
	}
}

// Watch registers watch id on key (or on every key starting with key when
// prefix). From now on each change to a matching key yields a Change for id
// in Effects, in log order. Resuming from an older offset is the engine's
// job: it reads the cache log from there and filters it with
// ChangeFromRecord before joining live changes at NextOffsets. Errors:
// ErrWatchExists; ErrKeyTooLarge; ErrEmptyKey for an exact watch.
func (s *Shard) Watch(id uint64, key []byte, prefix bool) error {
	if len(key) > s.cfg.MaxKeyBytes {
		return ErrKeyTooLarge
	}
	if len(key) == 0 && !prefix {
		return ErrEmptyKey
	}
	return s.watches.add(id, key, prefix)
}

// Unwatch removes watch id and reports whether it was registered. Changes
// already in the current Effects stay there.
func (s *Shard) Unwatch(id uint64) bool { return s.watches.remove(id) }

package cache

import "encoding/binary"

// ChangeOp is what happened to a watched key (spec/client-protocol.md §8.4).
type ChangeOp uint8

// Change ops. The wire knows put, delete and expire; WireName maps an
// eviction to "delete" (the value is gone without having expired).
const (
	ChangePut    ChangeOp = 1
	ChangeDelete ChangeOp = 2
	ChangeExpire ChangeOp = 3
	ChangeEvict  ChangeOp = 4
)

// WireName returns the cache_change "op" string of spec/client-protocol.md
// §8.4: "put", "delete" (also for an eviction) or "expire".
func (op ChangeOp) WireName() string {
	switch op {
	case ChangePut:
		return "put"
	case ChangeExpire:
		return "expire"
	}
	return "delete"
}

// Change is one event for one watch: a record of the cache log that touched
// a key the watch matches, at the record's offset. Key and Value alias the
// shard's effects buffer (valid until Advance). Value is set for ChangePut
// only, non-nil even when the stored value is empty.
type Change struct {
	WatchID uint64
	Op      ChangeOp
	Key     []byte
	Value   []byte
	Offset  uint64
}

// Effects is the work owed after one or more shard operations, in order:
// append CacheRecords to the cache log (the first gets CacheFirstOffset, the
// rest follow one by one) and CounterRecords to the counter log (from
// CounterFirstOffset); once those appends are committed, answer the callers
// and hand each Change to its watch's queue. Every slice aliases the shard's
// buffers and stays valid until Advance.
type Effects struct {
	CacheRecords       [][]byte
	CacheFirstOffset   uint64
	CounterRecords     [][]byte
	CounterFirstOffset uint64
	Changes            []Change
}

// Empty reports whether there is nothing to do.
func (e *Effects) Empty() bool {
	return len(e.CacheRecords) == 0 && len(e.CounterRecords) == 0 && len(e.Changes) == 0
}

// span is [start, end) of the effects buffer.
type span struct{ start, end int }

// pendingChange is a Change whose byte fields are still spans.
type pendingChange struct {
	watchID  uint64
	op       ChangeOp
	offset   uint64
	key      span
	value    span
	hasValue bool
}

// outbox accumulates effects between Advance calls. Records are encoded into
// one growing buffer; spans are turned into slices only in Effects, so the
// buffer may move while it grows.
type outbox struct {
	buf      []byte
	cache    []span
	counter  []span
	changes  []pendingChange
	effects  Effects
	cacheOut [][]byte
	countOut [][]byte
	chgOut   []Change
}

// endCache records buf[start:] as the next cache-log record and returns its
// span. Callers append the encoding to o.buf between len(o.buf) and this call.
func (o *outbox) endCache(start int) span {
	sp := span{start: start, end: len(o.buf)}
	o.cache = append(o.cache, sp)
	return sp
}

// endCounter records buf[start:] as the next counter-log record.
func (o *outbox) endCounter(start int) {
	o.counter = append(o.counter, span{start: start, end: len(o.buf)})
}

// recordKey returns the span of the key inside an encoded record that has a
// key at header bytes past its start.
func (o *outbox) recordKey(rec span, header int) span {
	n := int(binary.BigEndian.Uint16(o.buf[rec.start+header-2:]))
	start := rec.start + header
	return span{start: start, end: start + n}
}

// pending reports whether any effect awaits Advance.
func (o *outbox) pending() bool {
	return len(o.cache) != 0 || len(o.counter) != 0 || len(o.changes) != 0
}

// build materializes the effects; first offsets are supplied by the shard.
func (o *outbox) build(cacheFirst, counterFirst uint64) *Effects {
	o.cacheOut = o.cacheOut[:0]
	for _, sp := range o.cache {
		o.cacheOut = append(o.cacheOut, o.buf[sp.start:sp.end:sp.end])
	}
	o.countOut = o.countOut[:0]
	for _, sp := range o.counter {
		o.countOut = append(o.countOut, o.buf[sp.start:sp.end:sp.end])
	}
	o.chgOut = o.chgOut[:0]
	for _, c := range o.changes {
		ch := Change{WatchID: c.watchID, Op: c.op, Offset: c.offset,
			Key: o.buf[c.key.start:c.key.end:c.key.end]}
		if c.hasValue {
			ch.Value = o.buf[c.value.start:c.value.end:c.value.end]
		}
		o.chgOut = append(o.chgOut, ch)
	}
	o.effects = Effects{CacheRecords: o.cacheOut, CacheFirstOffset: cacheFirst,
		CounterRecords: o.countOut, CounterFirstOffset: counterFirst, Changes: o.chgOut}
	return &o.effects
}

// reset forgets every effect, keeping the buffers' capacity.
func (o *outbox) reset() {
	o.buf = o.buf[:0]
	o.cache = o.cache[:0]
	o.counter = o.counter[:0]
	o.changes = o.changes[:0]
	clear(o.chgOut)
	o.effects = Effects{}
}

package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
)

// Idempotent producer (spec/client-protocol.md §8.10, PROPOSED there, decided
// in docs/architecture.md "core"): each shard keeps a window of the most
// recent (producer id, sequence) keys with the offsets they landed at. A
// publish whose key is in the window is answered with the original offsets
// and Duplicate=true instead of being appended again; a duplicate of a
// publish still in flight waits for the original's outcome.
//
// Durability: a durable shard writes one record per idempotent publish to its
// companion log "producers", staged before the batch's records, and the
// record log never starts a write before the producers log holds every key
// staged ahead of it (seglog.Log.WriteAfter); it acknowledges on commit only
// once both are durable. Reopening rebuilds the window from that log,
// keeping the keys whose records are in the data log (recover). Past four
// windows of records the log is compacted to the current window.
//
// Key record layout (big-endian): u8 id_len, id_len bytes id, u64 sequence,
// u64 first_offset, u64 last_offset.

const producerRecordFixed = 1 + 8 + 8 + 8

// MaxProducerIDBytes bounds PublishRequest.ProducerID.
const MaxProducerIDBytes = 255

type producerKey struct {
	id       string
	sequence uint64
}

type producerEntry struct {
	key         producerKey
	first, last uint64
	committed   bool // the data append completed
	logged      bool // the key record completed (always true in memory)
	ackDone     func(PublishResult, error)
	ackResult   PublishResult
	waiters     []heldPublish // duplicates that arrived while in flight
}

type producerWindow struct {
	entries map[producerKey]*producerEntry
	order   fifo[*producerEntry]
	max     int
	// gate holds key records back until the producer log's quorum mark passes them
	// (a replicated Quorum shard: producer_gate.go).
	gate keyGate
	// promoting parks idempotent publishes while a promoted shard rebuilds the window
	// (replicate_promote.go).
	promoting rebuildGate
}

func newProducerWindow(size int) *producerWindow {
	return &producerWindow{entries: map[producerKey]*producerEntry{}, max: size}
}

// duplicate answers h when its key is known and reports whether it did.
func (w *producerWindow) duplicate(s *streamShard, h heldPublish) bool {
	if w.promoting.park(func() { s.republish(h) }) {
		return true // answered once the window is rebuilt (replicate_promote.go)
	}
	e := w.entries[producerKey{h.req.ProducerID, h.req.Sequence}]
	if e == nil {
		return false
	}
	if e.committed && e.logged {
		h.done(e.duplicateResult(s.index), nil)
		return true
	}
	e.waiters = append(e.waiters, h)
	return true
}

func (e *producerEntry) duplicateResult(shard int) PublishResult {
	return PublishResult{Shard: shard, FirstOffset: e.first, LastOffset: e.last, Committed: true, Duplicate: true}
}

// begin adds a key (its publish is being appended) and evicts the oldest
// settled keys beyond the window.
func (w *producerWindow) begin(id string, sequence, first, last uint64) *producerEntry {
	e := &producerEntry{key: producerKey{id, sequence}, first: first, last: last}
	w.entries[e.key] = e
	w.order.push(e)
	for w.order.len() > w.max {
		old := *w.order.at(0)
		if !old.committed || !old.logged {
			break
		}
		w.order.pop()
		if w.entries[old.key] == old {
			delete(w.entries, old.key)
		}
	}
	return e
}

// settle answers the publish and its waiting duplicates once both the data
// and the key record are durable.
func (w *producerWindow) settle(s *streamShard, e *producerEntry) {
	if !e.committed || !e.logged {
		return
	}
	if e.ackDone != nil {
		done := e.ackDone
		e.ackDone = nil
		done(e.ackResult, nil)
	}
	for i, h := range e.waiters {
		h.done(e.duplicateResult(s.index), nil)
		e.waiters[i] = heldPublish{}
	}
	e.waiters = nil
}

// abort forgets a key whose append failed and fails whoever waits on it.
func (w *producerWindow) abort(s *streamShard, e *producerEntry, err error) {
	if w.entries[e.key] == e {
		delete(w.entries, e.key)
	}
	e.committed, e.logged = true, true // lets eviction pass it
	if e.ackDone != nil {
		e.ackDone(PublishResult{}, err)
		e.ackDone = nil
	}
	for _, h := range e.waiters {
		h.done(PublishResult{}, err)
	}
	e.waiters = nil
}

// logProducer stages e's key record in the producers log (no allocation:
// the scratch buffer is copied by Append).
func (s *streamShard) logProducer(e *producerEntry) {
	b := appendProducerRecord(s.producerScratch[:0], e.key, e.first, e.last)
	s.producerScratch = b
	s.producerArgs[0] = b
	if err := s.producerLog.Append(s.producerArgs[:], s.c.clock.WallMicros(), s.onLogged); err != nil {
		s.fail(storageError("append producer key", err))
		e.logged = true // the data append's outcome decides
		return
	}
	s.producerPending.push(e)
	s.begin()
}

// producerLogged is the producers log's append callback.
func (s *streamShard) producerLogged(first, _ uint64, err error) {
	if s.producerPending.len() == 0 {
		return
	}
	e := s.producerPending.pop()
	if err != nil {
		err = storageError("producer key commit", err)
		s.fail(err)
		s.producers.abort(s, e, err)
		s.end()
		return
	}
	s.keyLogged(e, first) // logged now, or once replicated to a majority (producer_gate.go)
	s.compactProducers()
	s.end()
}

// compactProducers rewrites the producers log as the current window once it
// holds more than producerCompactFactor windows of key records, so that it
// stays bounded and reopening reads little. The live set includes keys still
// in flight: their own records sit in the segments the compaction drops.
func (s *streamShard) compactProducers() {
	w := s.producers
	limit := uint64(producerCompactFactor * max(w.max, 64))
	if s.producerCompacting || s.producerLog.NextOffset()-s.producerLog.EarliestOffset() <= limit {
		return
	}
	live := make([][]byte, 0, w.order.len())
	for i := 0; i < w.order.len(); i++ {
		e := *w.order.at(i)
		if w.entries[e.key] == e {
			live = append(live, appendProducerRecord(nil, e.key, e.first, e.last))
		}
	}
	if len(live) == 0 {
		return
	}
	s.producerCompacting = s.compact(s.producerLog, "compact producer keys", live, s.c.clock.WallMicros(), s.onCompacted)
}

// producerCompactFactor: the producers log is compacted past this many
// windows of records.
const producerCompactFactor = 4

// producerCompacted is the compaction's append callback.
func (s *streamShard) producerCompacted(_, _ uint64, err error) {
	s.producerCompacting = false
	if err != nil {
		s.fail(storageError("compact producer keys", err))
	}
	s.compactEnded()
}

// appendProducerRecord appends the key record of key at [first, last].
func appendProducerRecord(dst []byte, key producerKey, first, last uint64) []byte {
	dst = append(dst, byte(len(key.id)))
	dst = append(dst, key.id...)
	dst = binary.BigEndian.AppendUint64(dst, key.sequence)
	dst = binary.BigEndian.AppendUint64(dst, first)
	return binary.BigEndian.AppendUint64(dst, last)
}

// errBadProducerRecord marks a key record that does not parse.
var errBadProducerRecord = errors.New("core: malformed producer key record")

// decodeProducerRecord parses one key record, checking lengths first.
func decodeProducerRecord(b []byte) (producerKey, uint64, uint64, error) {
	if len(b) < producerRecordFixed || len(b) != producerRecordFixed+int(b[0]) {
		return producerKey{}, 0, 0, errBadProducerRecord
	}
	n := int(b[0])
	id := string(b[1 : 1+n])
	rest := b[1+n:]
	key := producerKey{id: id, sequence: binary.BigEndian.Uint64(rest)}
	first, last := binary.BigEndian.Uint64(rest[8:]), binary.BigEndian.Uint64(rest[16:])
	if last < first {
		return producerKey{}, 0, 0, errBadProducerRecord
	}
	return key, first, last, nil
}

// producerRecovery is what recover found beyond the data log's end.
type producerRecovery struct {
	// unbacked: some key record names records that are not all in the data
	// log (its batch's write never completed before a kill).
	unbacked bool
	// torn: the newest such key's batch is partly in the data log (a write
	// cut short, first < dataNext <= last): cut is its first offset, where
	// the data log must be truncated. Nothing of that batch was acknowledged
	// or delivered: both wait for the whole write.
	torn bool
	cut  uint64
}

// recover rebuilds the window from the producers log, keeping keys whose
// records are in the data log (last < dataNext).
//
// The record log writes after the producers log (seglog.Log.WriteAfter) and a
// key is staged before its records, so a kill can leave a key without its
// records, never records without their key. A key whose records are missing
// names offsets that later batches reuse, and their key records follow it in
// the producers log. Offsets of live batches only grow, so a key record whose
// first offset is at or below an earlier record's last offset proves the
// earlier ones stale: they are dropped, never answered as duplicates pointing
// at another batch's records. Un-keyed publishes reuse offsets without a key
// record: the fence record that recoverProducers writes after a kill (a key
// record with an empty producer id, at the data log's end) proves those stale.
func (w *producerWindow) recover(log logReader, dataNext uint64) (producerRecovery, error) {
	var rec producerRecovery
	var tornLast uint64
	from := log.EarliestOffset()
	var replayed []*producerEntry // in log order; offsets ascend among live ones
	for from < log.CommittedOffset() {
		read := 0
		err := log.ReadCommitted(from, 1<<20, func(off uint64, _ int64, p []byte) bool {
			from = off + 1
			read++
			key, first, last, err := decodeProducerRecord(p)
			if err != nil {
				return true
			}
			replayed = w.dropStale(replayed, first)
			if rec.torn && first <= tornLast {
				rec.torn = false // superseded, as dropStale says
			}
			if key.id == "" {
				return true // a fence
			}
			if last >= dataNext {
				rec.unbacked = true
				if first < dataNext {
					rec.torn, rec.cut, tornLast = true, first, last
				}
				return true
			}
			e := w.begin(key.id, key.sequence, first, last)
			e.committed, e.logged = true, true
			replayed = append(replayed, e)
			return true
		})
		if err != nil {
			return rec, err
		}
		if read == 0 {
			return rec, fmt.Errorf("producers log: no record at %d below %d", from, log.CommittedOffset())
		}
	}
	return rec, nil
}

// recoverProducers orders the record log after the producers log, rebuilds
// the window, cuts a torn batch off the record log and, when the producers
// log names records that are not there, appends a fence at the record log's
// end before anything else is written (see recover). A follower (follows) only
// rebuilds the window.
func (s *streamShard) recoverProducers() error {
	if err := s.records.writeAfter(s.producerLog); err != nil {
		return err
	}
	rec, err := s.producers.recover(s.producerLog, s.records.NextOffset())
	if err != nil {
		return err
	}
	if s.follows() {
		// The producers log can be ahead of the records log here without any crash (the
		// leader's key records replicate before the records they name): a "torn" batch is
		// one still arriving, and the records held were acknowledged. Nothing is cut or
		// fenced; a promotion rebuilds the window and fences as the leader.
		return nil
	}
	if rec.torn && rec.cut < s.records.NextOffset() {
		dropped := s.records.NextOffset() - rec.cut
		if err := s.records.TruncateSuffix(rec.cut); err != nil {
			return fmt.Errorf("truncate the torn batch at %d: %w", rec.cut, err)
		}
		slog.Warn("core: dropped the records of a batch whose write a crash cut short (never acknowledged)",
			"stream", s.name.String(), "shard", s.index, "from_offset", rec.cut, "records", dropped)
	}
	if !rec.unbacked {
		return nil
	}
	return s.fenceKeys()
}

// fenceKeys appends a fence record at the record log's end to the producers log: the
// key records before it that name offsets from there on are stale (see recover).
func (s *streamShard) fenceKeys() error {
	next := s.records.NextOffset()
	fence := appendProducerRecord(nil, producerKey{}, next, next)
	return s.producerLog.Append([][]byte{fence}, s.c.clock.WallMicros(), s.fenceLogged)
}

// fenceLogged is the fence record's append callback.
func (s *streamShard) fenceLogged(_, _ uint64, err error) {
	if err != nil {
		s.fail(storageError("producer fence commit", err))
	}
}

// dropStale forgets the replayed entries (the tail of replayed) whose offsets
// reach first: their data was lost and the offsets reused (see recover).
func (w *producerWindow) dropStale(replayed []*producerEntry, first uint64) []*producerEntry {
	for len(replayed) > 0 && replayed[len(replayed)-1].last >= first {
		e := replayed[len(replayed)-1]
		if w.entries[e.key] == e {
			delete(w.entries, e.key)
		}
		replayed[len(replayed)-1] = nil
		replayed = replayed[:len(replayed)-1]
	}
	return replayed
}

package cache

import "encoding/binary"

// CompactCache returns the cache log's live set, framed for crash safety
// (docs/cache.md, "Compaction"): CompactBegin{count}, one SnapshotPut per
// stored value in write order (absolute expiry kept), CompactCommit{begin
// offset, count}. The owner appends them at the log's tail (seglog Log.Compact
// appends the live set, then drops head segments below firstOffset only once
// it is durable); offsets are never renumbered. The records occupy
// [firstOffset, firstOffset+len(records)). Values already expired are kept
// (call Sweep first to drop them with expire records). The slices alias a
// buffer reused by the next CompactCache or CompactCounters call. Nothing in
// memory changes but the next offset. Error: ErrEffectsPending.
func (s *Shard) CompactCache() (records [][]byte, firstOffset uint64, err error) {
	if s.out.pending() {
		return nil, 0, ErrEffectsPending
	}
	t := s.values
	count := uint64(t.len())
	s.startCompaction(count)
	for i := t.head; i != none; i = t.slots[i].next {
		sl := &t.slots[i]
		start := len(s.compactBuf)
		s.compactBuf = appendPutString(s.compactBuf, sl.key, sl.value, sl.hasExpiry, sl.expiresAt)
		s.compactOut = append(s.compactOut, s.compactBuf[start:len(s.compactBuf):len(s.compactBuf)])
	}
	firstOffset = s.cacheNext
	s.finishCompaction(firstOffset, count)
	s.cacheNext += count + 2
	return s.rebase(), firstOffset, nil
}

// CompactCounters is CompactCache for the counter log: CompactBegin, one
// CounterSnapshot{sum} per counter, CompactCommit. Error: ErrEffectsPending.
func (s *Shard) CompactCounters() (records [][]byte, firstOffset uint64, err error) {
	if s.out.pending() {
		return nil, 0, ErrEffectsPending
	}
	c := &s.counters
	count := uint64(c.len())
	s.startCompaction(count)
	for i, key := range c.keys {
		start := len(s.compactBuf)
		s.compactBuf = binary.BigEndian.AppendUint64(append(s.compactBuf, byte(OpCounterSnapshot)), uint64(c.sums[i]))
		s.compactBuf = appendKeyString(s.compactBuf, key)
		s.compactOut = append(s.compactOut, s.compactBuf[start:len(s.compactBuf):len(s.compactBuf)])
	}
	firstOffset = s.counterNext
	s.finishCompaction(firstOffset, count)
	s.counterNext += count + 2
	return s.rebase(), firstOffset, nil
}

func (s *Shard) startCompaction(count uint64) {
	s.compactBuf = binary.BigEndian.AppendUint64(append(s.compactBuf[:0], byte(OpCompactBegin)), count)
	s.compactOut = append(s.compactOut[:0], s.compactBuf[:beginBytes:beginBytes])
}

func (s *Shard) finishCompaction(begin, count uint64) {
	start := len(s.compactBuf)
	s.compactBuf = appendRecord(s.compactBuf, &Record{Op: OpCompactCommit, BeginOffset: begin, Count: count})
	s.compactOut = append(s.compactOut, s.compactBuf[start:])
}

// rebase re-slices compactOut over the final compactBuf: the buffer may have
// moved while it grew, and the slices taken before that still point at copies
// that are complete but would pin old arrays.
func (s *Shard) rebase() [][]byte {
	pos := 0
	for i, r := range s.compactOut {
		n := len(r)
		s.compactOut[i] = s.compactBuf[pos : pos+n : pos+n]
		pos += n
	}
	return s.compactOut
}

// appendPutString is appendPut for a stored (string) key with op SnapshotPut.
func appendPutString(dst []byte, key string, value []byte, has bool, expiresAt int64) []byte {
	var flags byte
	if has {
		flags = flagHasExpiry
	} else {
		expiresAt = 0
	}
	dst = append(dst, byte(OpSnapshotPut), flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(expiresAt))
	dst = appendKeyString(dst, key)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

package groups

// Snapshot returns records that rebuild the shard's current state when replayed after
// (or instead of) the records the logs hold now: for the cursor log, per group (in name
// order) a create record and a checkpoint record; for the dead-letter log, one
// DeadLettered record per current dead letter. It is the live set for seglog's Compact,
// which appends it at the log's tail and then drops head segments (spec/storage-format.md
// §5, docs/groups.md "Compaction"). The procedure:
//
//  1. compact the dead-letter log with deadLetters;
//  2. SetDeadLetterLogEnd with that log's new next offset;
//  3. compact the cursor log with cursor.
//
// Replaying a checkpoint replaces its group's state, so records of the old head that
// survive compaction do not matter. Leases become outstanding offsets (with their delivery
// counts), as on any restart. The slices are freshly allocated and owned by the caller.
func (s *Shard) Snapshot() (cursor, deadLetters [][]byte) {
	for _, name := range s.Groups() {
		g := s.byName[name]
		cursor = append(cursor, AppendCreateRecord(nil, g.name, g.frontier, g.cfg, s.dlEnd))
		cursor = append(cursor, s.appendCheckpoint(nil, g))
		for _, off := range sortedKeys(g.dead) {
			d := g.dead[off]
			deadLetters = append(deadLetters, AppendDeadLetterRecord(nil, DeadLetterRecord{
				Kind: DeadLettered, GroupID: g.id, Offset: off, Deliveries: d.Deliveries, AtMillis: d.AtMillis}))
		}
	}
	return cursor, deadLetters
}

// SetDeadLetterLogEnd tells the shard the dead-letter log's next offset after that log
// was compacted outside the shard (Snapshot step 2). It must not be lower than the end
// the shard knows.
func (s *Shard) SetDeadLetterLogEnd(end uint64) {
	if end > s.dlEnd {
		s.dlEnd = end
	}
}

// appendCheckpoint appends a checkpoint record of g: its frontier and every outstanding
// offset (ascending) with its delivery count.
func (s *Shard) appendCheckpoint(b []byte, g *group) []byte {
	start := len(b)
	b = appendCursorHeader(b, KindCheckpoint, g.id, g.resume(), s.dlEnd, 0)
	b = appendEntry(b, KindAck, CursorEntry{Offset: g.frontier}) // u64 frontier prefix
	var n uint32
	for _, off := range sortedKeys(g.entries) {
		b = appendEntry(b, KindCheckpoint, CursorEntry{Offset: off, Value: uint64(g.entries[off].deliveries)})
		n++
	}
	patchCursorHeader(b[start:], g.resume(), s.dlEnd, n)
	return b
}

// stageCheckpoint stages a checkpoint record of g in the current batch.
func (s *Shard) stageCheckpoint(g *group) {
	s.stageCursor(func(b []byte) []byte { return s.appendCheckpoint(b, g) })
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slicesSort(keys)
	return keys
}

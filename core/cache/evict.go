package cache

// makeRoom evicts values until a value of size accounted bytes fits beside
// the others (docs/cache.md, "Capacity and eviction"). self is the slot the
// value will overwrite when exists, and is never chosen. Victims, one at a
// time: the value whose expiry instant is soonest; when no other value
// expires, the least recently written one. A victim already expired at
// nowMillis is expired (expire record), not evicted.
func (s *Shard) makeRoom(self int32, exists bool, size, nowMillis int64) {
	for {
		entries, bytes := s.values.len(), s.values.bytes+size
		if exists {
			sl := &s.values.slots[self]
			bytes -= accounted(len(sl.key), len(sl.value))
		} else {
			entries++
		}
		if entries <= s.cfg.MaxEntries && bytes <= s.cfg.MaxBytes {
			return
		}
		v := s.victim(self)
		if v == none {
			return // only self is stored, and a single value fits (checked by Put)
		}
		if sl := &s.values.slots[v]; sl.hasExpiry && nowMillis >= sl.expiresAt {
			s.expireSlot(v)
		} else {
			s.evictSlot(v)
		}
	}
}

// victim picks the next value to evict, never self.
func (s *Shard) victim(self int32) int32 {
	t := s.values
	if n := len(t.heap); n > 0 {
		if t.heap[0] != self {
			return t.heap[0]
		}
		best := int32(none)
		for j := 1; j <= 2 && j < n; j++ {
			c := t.heap[j]
			if best == none || t.slots[c].expiresAt < t.slots[best].expiresAt {
				best = c
			}
		}
		if best != none {
			return best
		}
	}
	v := t.head
	if v == self && v != none {
		v = t.slots[v].next
	}
	return v
}

package cache

import "encoding/binary"

// counterStore holds a shard's counters: a key space of its own, separate
// from values (docs/cache.md, "Counters"), logged in the counter log.
type counterStore struct {
	index map[string]int32
	keys  []string
	sums  []int64
}

func newCounterStore() counterStore {
	return counterStore{index: make(map[string]int32)}
}

func (c *counterStore) len() int { return len(c.keys) }

// set stores sum under key, creating the counter when new.
func (c *counterStore) set(key []byte, sum int64) {
	if i, ok := c.index[string(key)]; ok {
		c.sums[i] = sum
		return
	}
	k := string(key)
	c.index[k] = int32(len(c.keys))
	c.keys = append(c.keys, k)
	c.sums = append(c.sums, sum)
}

// CounterAdd adds delta to the counter key (0 when it does not exist yet) and
// returns the new sum and the offset of its counter-log record
// (spec/client-protocol.md §8.2; counters are signed 64-bit, have no TTL and
// are a key space separate from values). Errors, which change nothing:
// ErrEmptyKey, ErrKeyTooLarge, ErrCounterOverflow (the sum would leave the
// int64 range: no wrap), ErrCapacity (a new counter beyond MaxCounters).
// CounterAdd is not safe to re-send after a lost answer (SafeToResend).
func (s *Shard) CounterAdd(key []byte, delta int64) (sum int64, offset uint64, err error) {
	if err := s.checkKey(key); err != nil {
		return 0, 0, err
	}
	i, exists := s.counters.index[string(key)]
	var cur int64
	if exists {
		cur = s.counters.sums[i]
	} else if s.counters.len() >= s.cfg.MaxCounters {
		return 0, 0, ErrCapacity
	}
	sum = cur + delta
	if (delta > 0 && sum < cur) || (delta < 0 && sum > cur) {
		return 0, 0, ErrCounterOverflow
	}
	start := len(s.out.buf)
	s.out.buf = append(s.out.buf, byte(OpCounterAdd))
	s.out.buf = binary.BigEndian.AppendUint64(s.out.buf, uint64(delta))
	s.out.buf = binary.BigEndian.AppendUint64(s.out.buf, uint64(sum))
	s.out.buf = appendKey(s.out.buf, key)
	s.out.endCounter(start)
	offset = s.counterNext
	s.counterNext++
	if exists {
		s.counters.sums[i] = sum
	} else {
		s.counters.set(key, sum)
	}
	s.stats.CounterAdds++
	return sum, offset, nil
}

// CounterGet returns the counter key's sum and whether the counter exists.
// The wire answers a missing counter with value 0 (spec/client-protocol.md
// §8.2 counter_value); found lets the broker say more if it wants to.
func (s *Shard) CounterGet(key []byte) (sum int64, found bool) {
	i, ok := s.counters.index[string(key)]
	if !ok {
		return 0, false
	}
	return s.counters.sums[i], true
}

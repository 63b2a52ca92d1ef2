package cache

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// memLog is an in-memory stand-in for one seglog log: records at offsets
// base, base+1, ... (head segments dropped = base raised).
type memLog struct {
	base uint64
	recs [][]byte
}

func (l *memLog) next() uint64 { return l.base + uint64(len(l.recs)) }

func (l *memLog) append(first uint64, recs [][]byte) error {
	if len(recs) > 0 && first != l.next() {
		return fmt.Errorf("append at %d, log next is %d", first, l.next())
	}
	for _, r := range recs {
		l.recs = append(l.recs, bytes.Clone(r))
	}
	return nil
}

// harness drives a shard like the engine does: it performs Effects on two
// memLogs and keeps copies of every Change.
type harness struct {
	t       testing.TB
	cfg     Config
	s       *Shard
	cache   memLog
	counter memLog
	changes []Change
}

func newHarness(t testing.TB, cfg Config) *harness {
	return &harness{t: t, cfg: cfg, s: New(cfg)}
}

// flush performs the pending effects.
func (h *harness) flush() {
	h.t.Helper()
	e := h.s.Effects()
	if err := h.cache.append(e.CacheFirstOffset, e.CacheRecords); err != nil {
		h.t.Fatalf("cache log: %v", err)
	}
	if err := h.counter.append(e.CounterFirstOffset, e.CounterRecords); err != nil {
		h.t.Fatalf("counter log: %v", err)
	}
	for _, c := range e.Changes {
		c.Key = bytes.Clone(c.Key)
		if c.Value != nil {
			c.Value = append([]byte{}, c.Value...)
		}
		h.changes = append(h.changes, c)
	}
	h.s.Advance()
}

// compact flushes, then appends both logs' compactions.
func (h *harness) compact() {
	h.t.Helper()
	h.flush()
	recs, first, err := h.s.CompactCache()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.cache.append(first, recs); err != nil {
		h.t.Fatal(err)
	}
	recs, first, err = h.s.CompactCounters()
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.counter.append(first, recs); err != nil {
		h.t.Fatal(err)
	}
}

// replayInto builds a fresh shard from the two logs.
func replayLogs(t testing.TB, cfg Config, cache, counter *memLog) (*Shard, error) {
	t.Helper()
	s := New(cfg)
	for i, r := range cache.recs {
		if err := s.ReplayCache(cache.base+uint64(i), r); err != nil {
			return nil, err
		}
	}
	for i, r := range counter.recs {
		if err := s.ReplayCounter(counter.base+uint64(i), r); err != nil {
			return nil, err
		}
	}
	return s, s.FinishReplay(cache.next(), counter.next())
}

// restart replays the harness's logs into a new shard and uses it from now.
func (h *harness) restart() {
	h.t.Helper()
	h.flush()
	s, err := replayLogs(h.t, h.cfg, &h.cache, &h.counter)
	if err != nil {
		h.t.Fatalf("replay: %v", err)
	}
	h.s = s
}

// dump prints a shard's state in a canonical form: values sorted by key
// with their expiry, then counters.
func dump(s *Shard) string {
	var lines []string
	for k, i := range s.values.index {
		sl := &s.values.slots[i]
		exp := "-"
		if sl.hasExpiry {
			exp = fmt.Sprint(sl.expiresAt)
		}
		lines = append(lines, fmt.Sprintf("v %q=%q exp=%s", k, sl.value, exp))
	}
	for k, i := range s.counters.index {
		lines = append(lines, fmt.Sprintf("c %q=%d", k, s.counters.sums[i]))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func mustPut(t testing.TB, s *Shard, key, value string, ttl TTL, now int64) uint64 {
	t.Helper()
	off, err := s.Put([]byte(key), []byte(value), ttl, now)
	if err != nil {
		t.Fatalf("put %q: %v", key, err)
	}
	return off
}

func mustGet(t testing.TB, s *Shard, key string, now int64) (string, bool) {
	t.Helper()
	v, ok := s.Get([]byte(key), now)
	return string(v), ok
}

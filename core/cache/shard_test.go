package cache

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestEmptyValueIsNotAMiss(t *testing.T) {
	h := newHarness(t, Config{})
	h.s.Watch(1, []byte("e"), false)
	mustPut(t, h.s, "e", "", NoTTL, 0)
	v, ok := h.s.Get([]byte("e"), 0)
	if !ok || v == nil || len(v) != 0 {
		t.Fatalf("memory: get = %v %v, want empty non-nil found", v, ok)
	}
	if _, ok := h.s.Get([]byte("missing"), 0); ok {
		t.Fatal("miss reported as found")
	}
	h.flush()
	if c := h.changes[0]; c.Value == nil || len(c.Value) != 0 {
		t.Fatalf("watch: put of an empty value carries %v", c.Value)
	}
	r, err := DecodeRecord(h.cache.recs[0])
	if err != nil || r.Value == nil || len(r.Value) != 0 {
		t.Fatalf("log: record value %v, %v", r.Value, err)
	}
	h.restart()
	if v, ok := h.s.Get([]byte("e"), 0); !ok || v == nil {
		t.Fatalf("replay: get = %v %v", v, ok)
	}
	v, ok, _ = h.s.Delete([]byte("e"), 0)
	if !ok || v == nil || len(v) != 0 {
		t.Fatalf("delete: removed %v %v, want empty found", v, ok)
	}
	if _, ok, _ := h.s.Delete([]byte("e"), 0); ok {
		t.Fatal("second delete found a value")
	}
}

func TestDeleteReturnsTheRemovedValue(t *testing.T) {
	h := newHarness(t, Config{})
	mustPut(t, h.s, "k", "hello", NoTTL, 0)
	v, ok, off := h.s.Delete([]byte("k"), 0)
	if !ok || string(v) != "hello" || off != 1 {
		t.Fatalf("delete = %q %v %d", v, ok, off)
	}
	_, ok, _ = h.s.Delete([]byte("nothing"), 0)
	h.flush()
	if ok || len(h.cache.recs) != 2 {
		t.Fatalf("deleting a missing key: found=%v, %d records (want 2)", ok, len(h.cache.recs))
	}
}

func TestKeyAndValueLimits(t *testing.T) {
	s := New(Config{MaxKeyBytes: 4, MaxValueBytes: 8, MaxBytes: 100})
	cases := []struct {
		key, value string
		want       error
	}{
		{"", "v", ErrEmptyKey},
		{"12345", "v", ErrKeyTooLarge},
		{"k", "123456789", ErrValueTooLarge},
	}
	for _, c := range cases {
		if _, err := s.Put([]byte(c.key), []byte(c.value), NoTTL, 0); !errors.Is(err, c.want) {
			t.Errorf("put %q=%q: %v, want %v", c.key, c.value, err, c.want)
		}
	}
	if _, _, err := s.CounterAdd(nil, 1); !errors.Is(err, ErrEmptyKey) {
		t.Errorf("counter add with no key: %v", err)
	}
	tiny := New(Config{MaxBytes: EntryOverheadBytes + 2})
	if _, err := tiny.Put([]byte("k"), []byte("vv"), NoTTL, 0); !errors.Is(err, ErrValueTooLarge) {
		t.Errorf("value larger than the whole shard: %v", err)
	}
	if e := s.Effects(); !e.Empty() {
		t.Fatal("refused operations produced effects")
	}
}

func TestCounters(t *testing.T) {
	h := newHarness(t, Config{MaxCounters: 2})
	if sum, off, err := h.s.CounterAdd([]byte("hits"), 5); sum != 5 || off != 0 || err != nil {
		t.Fatalf("add = %d %d %v", sum, off, err)
	}
	if sum, _, _ := h.s.CounterAdd([]byte("hits"), -7); sum != -2 {
		t.Fatalf("sum %d, want -2", sum)
	}
	if _, ok := h.s.CounterGet([]byte("nope")); ok {
		t.Fatal("missing counter found")
	}
	if _, ok := h.s.Get([]byte("hits"), 0); ok {
		t.Fatal("counters and values share a key space")
	}
	h.s.CounterAdd([]byte("max"), math.MaxInt64)
	if _, _, err := h.s.CounterAdd([]byte("max"), 1); !errors.Is(err, ErrCounterOverflow) {
		t.Fatalf("overflow up: %v", err)
	}
	h.s.CounterAdd([]byte("max"), math.MinInt64) // MaxInt64 + MinInt64 = -1: fine
	if _, _, err := h.s.CounterAdd([]byte("max"), math.MinInt64); !errors.Is(err, ErrCounterOverflow) {
		t.Fatalf("overflow down: %v", err)
	}
	if _, _, err := h.s.CounterAdd([]byte("third"), 1); !errors.Is(err, ErrCapacity) {
		t.Fatalf("counter beyond capacity: %v", err)
	}
	h.restart()
	if sum, ok := h.s.CounterGet([]byte("hits")); !ok || sum != -2 {
		t.Fatalf("after restart hits = %d %v", sum, ok)
	}
	if sum, _ := h.s.CounterGet([]byte("max")); sum != -1 {
		t.Fatalf("after restart max = %d", sum)
	}
	if len(h.cache.recs) != 0 || len(h.counter.recs) != 4 {
		t.Fatalf("records: cache %d counter %d, want 0 and 4", len(h.cache.recs), len(h.counter.recs))
	}
}

func TestWatchesExactPrefixAndUnwatch(t *testing.T) {
	h := newHarness(t, Config{})
	must(t, h.s.Watch(1, []byte("a"), false))
	must(t, h.s.Watch(2, []byte("a"), true))
	must(t, h.s.Watch(3, nil, true))
	if err := h.s.Watch(1, []byte("b"), false); !errors.Is(err, ErrWatchExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	if err := h.s.Watch(4, nil, false); !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("exact watch on empty key: %v", err)
	}
	mustPut(t, h.s, "a", "1", NoTTL, 0)
	mustPut(t, h.s, "ab", "2", NoTTL, 0)
	mustPut(t, h.s, "b", "3", NoTTL, 0)
	if !h.s.Unwatch(2) || h.s.Unwatch(2) {
		t.Fatal("unwatch should succeed once")
	}
	h.s.Delete([]byte("ab"), 0)
	h.s.Delete([]byte("a"), 0)
	h.flush()
	var got []string
	for _, c := range h.changes {
		got = append(got, string(rune('0'+c.WatchID))+c.Op.WireName()+string(c.Key)+"@"+string(rune('0'+c.Offset)))
	}
	want := "1puta@0 2puta@0 3puta@0 2putab@1 3putab@1 3putb@2 3deleteab@3 1deletea@4 3deletea@4"
	if strings.Join(got, " ") != want {
		t.Fatalf("changes\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A watch resumed from an offset sees, from the log, exactly what it saw live.
func TestChangeFromRecordMatchesLiveChanges(t *testing.T) {
	h := newHarness(t, Config{MaxEntries: 2})
	w := Watch{Key: []byte("k"), Prefix: true}
	must(t, h.s.Watch(9, w.Key, w.Prefix))
	mustPut(t, h.s, "k1", "a", TTLMillis(5), 0)
	mustPut(t, h.s, "x", "b", NoTTL, 0)
	mustPut(t, h.s, "k2", "", NoTTL, 1) // evicts k1 (soonest expiry)
	h.s.Delete([]byte("k2"), 2)
	mustPut(t, h.s, "k3", "c", TTLMillis(1), 2)
	h.s.Sweep(10, 10)
	h.compact()
	var resumed []Change
	for i, rec := range h.cache.recs {
		c, ok, err := ChangeFromRecord(w, 9, uint64(i), rec)
		must(t, err)
		if ok {
			resumed = append(resumed, c)
		}
	}
	if len(resumed) != len(h.changes) || len(resumed) != 6 {
		t.Fatalf("resumed %d changes, live %d (want 6)", len(resumed), len(h.changes))
	}
	for i := range resumed {
		a, b := resumed[i], h.changes[i]
		if a.Op != b.Op || string(a.Key) != string(b.Key) || a.Offset != b.Offset ||
			string(a.Value) != string(b.Value) || (a.Value == nil) != (b.Value == nil) {
			t.Errorf("change %d: resumed %+v, live %+v", i, a, b)
		}
	}
}

func TestEvictionPolicy(t *testing.T) {
	h := newHarness(t, Config{MaxEntries: 3})
	mustPut(t, h.s, "old", "1", NoTTL, 0)
	mustPut(t, h.s, "late", "2", TTLMillis(100), 0)
	mustPut(t, h.s, "soon", "3", TTLMillis(10), 0)
	mustPut(t, h.s, "new1", "4", NoTTL, 0) // evicts soon (soonest expiry)
	mustPut(t, h.s, "new2", "5", NoTTL, 0) // evicts late
	mustPut(t, h.s, "new3", "6", NoTTL, 0) // no expiring values left: evicts old (least recently written)
	mustPut(t, h.s, "new1", "7", NoTTL, 0) // overwrite: no eviction
	mustPut(t, h.s, "new4", "8", NoTTL, 0) // evicts new2 (new1 was rewritten)
	h.flush()
	var evicted []string
	for _, b := range h.cache.recs {
		if r, _ := DecodeRecord(b); r.Op == OpEvict {
			evicted = append(evicted, string(r.Key))
		}
	}
	if got := strings.Join(evicted, ","); got != "soon,late,old,new2" {
		t.Fatalf("evicted %s", got)
	}
	if st := h.s.Stats(); st.Evictions != 4 || st.Entries != 3 {
		t.Fatalf("stats %+v", st)
	}
	h.restart()
	if got := dump(h.s); got != `v "new1"="7" exp=-`+"\n"+`v "new3"="6" exp=-`+"\n"+`v "new4"="8" exp=-` {
		t.Fatalf("after restart:\n%s", got)
	}
}

// The overwritten key is never its own victim, even when it expires soonest
// or was written least recently; an expired victim is expired, not evicted.
func TestEvictionSparesTheKeyBeingWritten(t *testing.T) {
	s := New(Config{MaxBytes: 3 * (EntryOverheadBytes + 2)})
	mustPut(t, s, "a", "1", TTLMillis(5), 0)
	mustPut(t, s, "b", "2", TTLMillis(50), 0)
	mustPut(t, s, "c", "3", TTLMillis(6), 0)
	mustPut(t, s, "a", "11", TTLMillis(5), 1) // one byte more: evicts c, not a
	if _, ok := s.Get([]byte("a"), 1); !ok {
		t.Fatal("the key being written was evicted")
	}
	if _, ok := s.Get([]byte("c"), 1); ok {
		t.Fatal("c should have been evicted")
	}
	mustPut(t, s, "d", "4", NoTTL, 6) // a (rewritten at 1, ttl 5) expired at 6: expired, not evicted
	if st := s.Stats(); st.Evictions != 1 || st.Expirations != 1 {
		t.Fatalf("stats %+v", st)
	}
	wide := New(Config{MaxBytes: 2 * (EntryOverheadBytes + 2)})
	mustPut(t, wide, "x", "1", NoTTL, 0)
	mustPut(t, wide, "y", "2", NoTTL, 0)
	mustPut(t, wide, "x", "11", NoTTL, 0) // x is least recently written: y goes
	if _, ok := wide.Get([]byte("x"), 0); !ok {
		t.Fatal("least recently written self evicted")
	}
}

func TestOperationsSeeEarlierOnesBeforeAdvance(t *testing.T) {
	s := New(Config{})
	s.CounterAdd([]byte("c"), 1)
	if sum, _, _ := s.CounterAdd([]byte("c"), 1); sum != 2 {
		t.Fatalf("second add before advance saw %d", sum-1)
	}
	mustPut(t, s, "k", "v", NoTTL, 0)
	if _, _, err := s.CompactCache(); !errors.Is(err, ErrEffectsPending) {
		t.Fatalf("compaction with pending effects: %v", err)
	}
	if c, n := s.NextOffsets(); c != 1 || n != 2 {
		t.Fatalf("next offsets %d %d", c, n)
	}
	e := s.Effects()
	if e.CacheFirstOffset != 0 || e.CounterFirstOffset != 0 || len(e.CounterRecords) != 2 {
		t.Fatalf("effects %+v", e)
	}
}

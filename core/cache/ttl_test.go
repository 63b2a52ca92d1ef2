package cache

import (
	"errors"
	"math"
	"testing"
)

func TestTTLZeroAndNegativeAreRefused(t *testing.T) {
	s := New(Config{})
	for _, c := range []struct {
		ttl  TTL
		want error
	}{
		{TTLMillis(0), ErrZeroTTL},
		{TTLMillis(-1), ErrNegativeTTL},
		{TTLMillis(math.MinInt64), ErrNegativeTTL},
		{TTLMillis(math.MaxInt64), ErrTTLTooLarge},
	} {
		if _, err := s.Put([]byte("k"), []byte("v"), c.ttl, 1000); !errors.Is(err, c.want) {
			t.Errorf("ttl %d: got %v, want %v", c.ttl.Millis(), err, c.want)
		}
	}
	if _, ok := s.Get([]byte("k"), 1000); ok {
		t.Fatal("a refused put stored a value")
	}
	if e := s.Effects(); !e.Empty() {
		t.Fatalf("a refused put produced effects: %+v", e)
	}
}

func TestTTLAbsentNeverExpires(t *testing.T) {
	s := New(Config{})
	mustPut(t, s, "k", "v", NoTTL, 0)
	if v, ok := mustGet(t, s, "k", math.MaxInt64); !ok || v != "v" {
		t.Fatalf("got %q %v at the end of time", v, ok)
	}
	if n := s.Sweep(math.MaxInt64, 10); n != 0 {
		t.Fatalf("sweep expired %d values without a ttl", n)
	}
}

func TestTTLBoundaryInstant(t *testing.T) {
	const now, ttl = 1_000, 250
	s := New(Config{})
	mustPut(t, s, "k", "v", TTLMillis(ttl), now)
	if _, ok := mustGet(t, s, "k", now+ttl-1); !ok {
		t.Fatal("value gone one millisecond before its expiry instant")
	}
	if _, ok := mustGet(t, s, "k", now+ttl); ok {
		t.Fatal("value readable at its expiry instant")
	}
	e := s.Effects()
	if len(e.CacheRecords) != 2 {
		t.Fatalf("want put + expire records, got %d", len(e.CacheRecords))
	}
	r, err := DecodeRecord(e.CacheRecords[1])
	if err != nil || r.Op != OpExpire || r.ExpiresAt != now+ttl || string(r.Key) != "k" {
		t.Fatalf("expire record = %+v, %v", r, err)
	}
	if st := s.Stats(); st.Expirations != 1 || st.Entries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An expired value is seen as gone by every operation, and each emits the
// expire record exactly once.
func TestExpiredValueIsGoneForEveryOperation(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   func(s *Shard) bool // reports whether the old value showed through
	}{
		{"get", func(s *Shard) bool { _, ok := s.Get([]byte("k"), 20); return ok }},
		{"delete", func(s *Shard) bool { _, ok, _ := s.Delete([]byte("k"), 20); return ok }},
		{"put", func(s *Shard) bool { mustPut(t, s, "k", "new", NoTTL, 20); return false }},
		{"sweep", func(s *Shard) bool { return s.Sweep(20, 10) != 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			mustPut(t, h.s, "k", "old", TTLMillis(10), 10)
			h.s.Watch(1, []byte("k"), false)
			h.flush()
			if tc.op(h.s) {
				t.Fatal("the expired value showed through")
			}
			h.flush()
			if len(h.changes) == 0 || h.changes[0].Op != ChangeExpire || h.changes[0].Offset != 1 {
				t.Fatalf("first change should be the expire at offset 1: %+v", h.changes)
			}
			if v, ok := mustGet(t, h.s, "k", 20); tc.name == "put" != ok || (ok && v != "new") {
				t.Fatalf("after %s: %q %v", tc.name, v, ok)
			}
			h.flush()
			if n := countOps(t, h.cache.recs, OpExpire); n != 1 {
				t.Fatalf("%d expire records, want 1", n)
			}
		})
	}
}

func countOps(t *testing.T, recs [][]byte, op RecordOp) int {
	t.Helper()
	n := 0
	for _, b := range recs {
		r, err := DecodeRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if r.Op == op {
			n++
		}
	}
	return n
}

func TestExpiryDuringWatchIsDeliveredInLogOrder(t *testing.T) {
	h := newHarness(t, Config{})
	if err := h.s.Watch(7, []byte("cfg"), true); err != nil {
		t.Fatal(err)
	}
	mustPut(t, h.s, "cfg/a", "1", TTLMillis(100), 0)
	mustPut(t, h.s, "cfg/b", "2", TTLMillis(50), 0)
	mustPut(t, h.s, "other", "x", TTLMillis(10), 0)
	h.flush()
	if n := h.s.Sweep(100, 10); n != 3 {
		t.Fatalf("swept %d, want 3", n)
	}
	h.flush()
	want := []struct {
		op  ChangeOp
		key string
		off uint64
	}{{ChangePut, "cfg/a", 0}, {ChangePut, "cfg/b", 1}, {ChangeExpire, "cfg/b", 4}, {ChangeExpire, "cfg/a", 5}}
	if len(h.changes) != len(want) {
		t.Fatalf("changes %+v", h.changes)
	}
	for i, w := range want {
		c := h.changes[i]
		if c.WatchID != 7 || c.Op != w.op || string(c.Key) != w.key || c.Offset != w.off {
			t.Errorf("change %d = %+v, want %+v", i, c, w)
		}
	}
}

func TestSweepIsBoundedPerTick(t *testing.T) {
	s := New(Config{})
	for i := range 10 {
		mustPut(t, s, string(rune('a'+i)), "v", TTLMillis(int64(1+i)), 0)
	}
	if n := s.Sweep(100, 4); n != 4 {
		t.Fatalf("swept %d, want 4", n)
	}
	if _, ok := s.values.lookup([]byte("e")); !ok {
		t.Fatal("sweep did not go soonest first")
	}
	if n := s.Sweep(100, 100); n != 6 {
		t.Fatalf("second sweep %d, want 6", n)
	}
}

// TTL expiry survives a restart as an absolute instant.
func TestRestartKeepsAbsoluteExpiry(t *testing.T) {
	h := newHarness(t, Config{})
	mustPut(t, h.s, "k", "v", TTLMillis(100), 1_000)
	h.restart()
	if _, ok := mustGet(t, h.s, "k", 1_099); !ok {
		t.Fatal("value lost its remaining life on restart")
	}
	if _, ok := mustGet(t, h.s, "k", 1_100); ok {
		t.Fatal("restart restarted the ttl clock")
	}
	h.flush()
	if r, _ := DecodeRecord(h.cache.recs[1]); r.Op != OpExpire {
		t.Fatalf("expire after restart not logged: %v", r.Op)
	}
}

package cache

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"felix/internal/testseed"
)

// modelValue is the reference model's stored value.
type modelValue struct {
	value     string
	hasExpiry bool
	expiresAt int64
}

// model is the simple map the shard is checked against: values live while
// now < expiresAt, counters are plain int64 sums that refuse overflow.
type model struct {
	values   map[string]modelValue
	counters map[string]int64
}

func (m *model) get(key string, now int64) (string, bool) {
	v, ok := m.values[key]
	if !ok || (v.hasExpiry && now >= v.expiresAt) {
		return "", false
	}
	return v.value, true
}

// TestShardAgainstModel runs random operations (puts with and without TTL,
// gets, deletes, counter adds and gets, sweeps, compactions, restarts, clock
// steps) and checks every answer against the model, and the table's
// invariants as it goes.
func TestShardAgainstModel(t *testing.T) {
	testseed.Run(t, 0, 10, func(t *testing.T, seed uint64) { runModel(t, seed, 2_000) })
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	h := newHarness(t, Config{})
	m := &model{values: map[string]modelValue{}, counters: map[string]int64{}}
	now := int64(1_000)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for step := range steps {
		key := keys[rng.IntN(len(keys))]
		desc := fmt.Sprintf("seed %d step %d key %q now %d", seed, step, key, now)
		switch op := rng.IntN(100); {
		case op < 30:
			modelPut(t, h.s, m, rng, key, now, desc)
		case op < 55:
			gotV, gotOK := h.s.Get([]byte(key), now)
			wantV, wantOK := m.get(key, now)
			if gotOK != wantOK || string(gotV) != wantV {
				t.Fatalf("%s: get = %q %v, want %q %v", desc, gotV, gotOK, wantV, wantOK)
			}
		case op < 65:
			gotV, gotOK, _ := h.s.Delete([]byte(key), now)
			wantV, wantOK := m.get(key, now)
			delete(m.values, key)
			if gotOK != wantOK || string(gotV) != wantV {
				t.Fatalf("%s: delete = %q %v, want %q %v", desc, gotV, gotOK, wantV, wantOK)
			}
		case op < 80:
			modelCounter(t, h.s, m, rng, key, desc)
		case op < 88:
			now += int64(rng.IntN(40))
		case op < 92:
			h.s.Sweep(now, rng.IntN(4))
		case op < 95:
			h.compact()
		default:
			h.restart()
		}
		if step%100 == 0 {
			checkTable(t, h.s.values)
		}
		if rng.IntN(4) == 0 {
			h.flush()
		}
	}
	checkModelAfterRestart(t, h, m, now)
}

func modelPut(t *testing.T, s *Shard, m *model, rng *rand.Rand, key string, now int64, desc string) {
	value := fmt.Sprint(rng.IntN(1000))
	if rng.IntN(5) == 0 {
		value = "" // empty values are values
	}
	ttl := NoTTL
	if rng.IntN(2) == 0 {
		ttl = TTLMillis(int64(rng.IntN(60)) - 5)
	}
	_, err := s.Put([]byte(key), []byte(value), ttl, now)
	switch ms := ttl.Millis(); {
	case ttl.IsSet() && ms < 0:
		if !errors.Is(err, ErrNegativeTTL) {
			t.Fatalf("%s: negative ttl: %v", desc, err)
		}
	case ttl.IsSet() && ms == 0:
		if !errors.Is(err, ErrZeroTTL) {
			t.Fatalf("%s: zero ttl: %v", desc, err)
		}
	case err != nil:
		t.Fatalf("%s: put: %v", desc, err)
	default:
		m.values[key] = modelValue{value: value, hasExpiry: ttl.IsSet(), expiresAt: now + ms}
	}
}

func modelCounter(t *testing.T, s *Shard, m *model, rng *rand.Rand, key, desc string) {
	if rng.IntN(3) == 0 {
		got, ok := s.CounterGet([]byte(key))
		want, wantOK := m.counters[key]
		if got != want || ok != wantOK {
			t.Fatalf("%s: counter get = %d %v, want %d %v", desc, got, ok, want, wantOK)
		}
		return
	}
	deltas := []int64{1, -1, 1000, math.MaxInt64, math.MinInt64, 0}
	delta := deltas[rng.IntN(len(deltas))]
	cur := m.counters[key]
	sum, _, err := s.CounterAdd([]byte(key), delta)
	overflow := (delta > 0 && cur > math.MaxInt64-delta) || (delta < 0 && cur < math.MinInt64-delta)
	if overflow {
		if !errors.Is(err, ErrCounterOverflow) {
			t.Fatalf("%s: add %d to %d: %v, want overflow", desc, delta, cur, err)
		}
		return
	}
	if err != nil || sum != cur+delta {
		t.Fatalf("%s: add %d to %d = %d, %v", desc, delta, cur, sum, err)
	}
	m.counters[key] = sum
}

// checkModelAfterRestart compares every key after a final restart.
func checkModelAfterRestart(t *testing.T, h *harness, m *model, now int64) {
	h.restart()
	checkTable(t, h.s.values)
	for _, key := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		gotV, gotOK := h.s.Get([]byte(key), now)
		wantV, wantOK := m.get(key, now)
		if gotOK != wantOK || string(gotV) != wantV {
			t.Fatalf("after restart %q: %q %v, want %q %v", key, gotV, gotOK, wantV, wantOK)
		}
		got, _ := h.s.CounterGet([]byte(key))
		if got != m.counters[key] {
			t.Fatalf("after restart counter %q: %d, want %d", key, got, m.counters[key])
		}
	}
}

// TestReplayReproducesMemoryUnderEviction: with small bounds (so evictions
// and expirations interleave with writes), replaying the logs the shard
// wrote always rebuilds exactly the state it holds in memory, including
// the write order eviction depends on.
func TestReplayReproducesMemoryUnderEviction(t *testing.T) {
	testseed.Run(t, 0, 10, func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := newHarness(t, Config{MaxEntries: 4, MaxBytes: 5 * (EntryOverheadBytes + 4), MaxCounters: 3})
		now := int64(0)
		for step := range 1500 {
			key := []byte{byte('a' + rng.IntN(8))}
			switch op := rng.IntN(10); {
			case op < 5:
				ttl := NoTTL
				if rng.IntN(2) == 0 {
					ttl = TTLMillis(int64(1 + rng.IntN(30)))
				}
				h.s.Put(key, make([]byte, rng.IntN(4)), ttl, now)
			case op < 6:
				h.s.Delete(key, now)
			case op < 7:
				h.s.CounterAdd(key, 1)
			case op < 8:
				h.s.Sweep(now, 2)
			case op < 9:
				now += int64(rng.IntN(10))
			default:
				h.compact()
			}
			h.flush()
			if step%50 != 0 {
				continue
			}
			replayed, err := replayLogs(t, h.cfg, &h.cache, &h.counter)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := dump(h.s), dump(replayed); a != b {
				t.Fatalf("seed %d step %d: memory\n%s\nreplay\n%s", seed, step, a, b)
			}
			if a, b := writeOrder(h.s), writeOrder(replayed); a != b {
				t.Fatalf("seed %d step %d: write order %s, replayed %s", seed, step, a, b)
			}
			checkTable(t, replayed.values)
		}
	})
}

func writeOrder(s *Shard) string {
	var out []byte
	for i := s.values.head; i != none; i = s.values.slots[i].next {
		out = append(out, s.values.slots[i].key...)
	}
	return string(out)
}

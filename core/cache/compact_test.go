package cache

import (
	"fmt"
	"testing"
)

// crashWorkload writes a log whose history holds a committed compaction, a
// compaction torn by a crash (its live set half written, no commit), writes
// made after the restart, and a second committed compaction. It returns the
// harness and, for every cache-log length n, the state a replay of the first
// n records must produce (the state before any compaction still open at n).
func crashWorkload(t *testing.T) (*harness, []string) {
	h := newHarness(t, Config{})
	var want []string
	record := func() { // call after each operation that writes one record
		h.flush()
		for len(want) <= len(h.cache.recs) {
			want = append(want, dumpValues(h.s))
		}
	}
	record()
	for i := range 6 {
		mustPut(t, h.s, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), TTLMillis(int64(100+i)), 0)
		record()
	}
	h.s.Delete([]byte("k1"), 1)
	record()
	mustPut(t, h.s, "k2", "", NoTTL, 1)
	record()
	h.compact() // committed compaction 1
	stateBefore := want[len(want)-1]
	for len(want) <= len(h.cache.recs) {
		want = append(want, stateBefore)
	}
	tornStart := len(h.cache.recs)
	recs, _, err := h.s.CompactCache()
	must(t, err)
	must(t, h.cache.append(uint64(tornStart), recs[:3])) // crash: begin + 2 of 5 live values reached the disk
	h.restart()
	for len(want) <= len(h.cache.recs) {
		want = append(want, stateBefore)
	}
	h.s.Delete([]byte("k3"), 2)
	record()
	mustPut(t, h.s, "k9", "x", NoTTL, 2)
	record()
	h.compact() // committed compaction 2
	last := want[len(want)-1]
	for len(want) <= len(h.cache.recs) {
		want = append(want, last)
	}
	return h, want
}

func dumpValues(s *Shard) string {
	c := New(Config{})
	c.values = s.values
	return dump(c)
}

// Replay of every prefix of a log holding compactions (committed and torn)
// yields the state before or after each compaction, never a mix.
func TestCompactionEveryPrefixReplaysToOldOrNewState(t *testing.T) {
	h, want := crashWorkload(t)
	for n := 0; n <= len(h.cache.recs); n++ {
		prefix := memLog{recs: h.cache.recs[:n]}
		s, err := replayLogs(t, Config{}, &prefix, &memLog{})
		if err != nil {
			t.Fatalf("prefix %d: %v", n, err)
		}
		if got := dumpValues(s); got != want[n] {
			t.Fatalf("prefix %d:\n got %s\nwant %s", n, got, want[n])
		}
		checkTable(t, s.values)
	}
}

// Once a compaction is committed, seglog drops head segments below its begin
// record; replay from any such head yields the compacted state.
func TestCompactionSurvivesHeadDrop(t *testing.T) {
	h, want := crashWorkload(t)
	final := want[len(h.cache.recs)]
	lastBegin := 0
	for i, b := range h.cache.recs {
		if r, _ := DecodeRecord(b); r.Op == OpCompactBegin {
			lastBegin = i
		}
	}
	for base := 0; base <= lastBegin; base++ {
		log := memLog{base: uint64(base), recs: h.cache.recs[base:]}
		s, err := replayLogs(t, Config{}, &log, &memLog{})
		if err != nil {
			t.Fatalf("base %d: %v", base, err)
		}
		if got := dumpValues(s); got != final {
			t.Fatalf("base %d:\n got %s\nwant %s", base, got, final)
		}
	}
}

// An uncommitted live set never leaks into the state, even when it differs
// from it; a commit that does not match its begin (offset or count) is
// ignored too.
func TestUncommittedLiveSetIsIsolated(t *testing.T) {
	enc := func(r Record) []byte { b, _ := AppendRecord(nil, &r); return b }
	base := [][]byte{enc(Record{Op: OpPut, Key: []byte("a"), Value: []byte("1")})}
	live := [][]byte{
		enc(Record{Op: OpCompactBegin, Count: 1}),
		enc(Record{Op: OpSnapshotPut, Key: []byte("z"), Value: []byte("9")}),
	}
	old := `v "a"="1" exp=-`
	for _, tc := range []struct {
		name   string
		commit []byte
		want   string
	}{
		{"torn", nil, old},
		{"wrong begin", enc(Record{Op: OpCompactCommit, BeginOffset: 0, Count: 1}), old},
		{"wrong count", enc(Record{Op: OpCompactCommit, BeginOffset: 1, Count: 2}), old},
		{"committed", enc(Record{Op: OpCompactCommit, BeginOffset: 1, Count: 1}), `v "z"="9" exp=-`},
	} {
		recs := append(append([][]byte{}, base...), live...)
		if tc.commit != nil {
			recs = append(recs, tc.commit)
		}
		s, err := replayLogs(t, Config{}, &memLog{recs: recs}, &memLog{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := dumpValues(s); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCounterCompactionEveryPrefix(t *testing.T) {
	h := newHarness(t, Config{})
	h.s.CounterAdd([]byte("a"), 5)
	h.s.CounterAdd([]byte("b"), -3)
	h.s.CounterAdd([]byte("a"), 2)
	h.flush()
	oldLen := len(h.counter.recs)
	h.compact()
	h.s.CounterAdd([]byte("a"), 1)
	h.flush()
	want := `c "a"=7` + "\n" + `c "b"=-3`
	for n := oldLen; n < len(h.counter.recs); n++ {
		for base := 0; base <= oldLen && (base == 0 || n == len(h.counter.recs)-1); base++ {
			log := memLog{base: uint64(base), recs: h.counter.recs[base:n]}
			s, err := replayLogs(t, Config{}, &memLog{}, &log)
			if err != nil {
				t.Fatal(err)
			}
			if got := dump(s); got != want {
				t.Fatalf("prefix %d base %d:\n got %s\nwant %s", n, base, got, want)
			}
		}
	}
	h.restart()
	if sum, _ := h.s.CounterGet([]byte("a")); sum != 8 {
		t.Fatalf("a = %d after compaction and restart, want 8", sum)
	}
}

func TestCompactionKeepsOffsetsAndWriteOrder(t *testing.T) {
	h := newHarness(t, Config{MaxEntries: 3})
	mustPut(t, h.s, "first", "1", NoTTL, 0)
	mustPut(t, h.s, "second", "2", NoTTL, 0)
	mustPut(t, h.s, "first", "1b", NoTTL, 0) // now "second" is least recently written
	h.compact()
	if next, _ := h.s.NextOffsets(); next != h.cache.next() || next != 3+2+2 {
		t.Fatalf("next offset %d, log %d", next, h.cache.next())
	}
	h.cache.base, h.cache.recs = 3, h.cache.recs[3:] // the head is dropped
	h.restart()
	mustPut(t, h.s, "third", "3", NoTTL, 0)
	mustPut(t, h.s, "fourth", "4", NoTTL, 0) // evicts "second"
	if _, ok := h.s.Get([]byte("second"), 0); ok {
		t.Fatal("write order lost by compaction + replay")
	}
}

func TestReplayRefusesDisorder(t *testing.T) {
	s := New(Config{})
	put, _ := AppendRecord(nil, &Record{Op: OpPut, Key: []byte("k"), Value: []byte("v")})
	must(t, s.ReplayCache(5, put))
	for _, err := range []error{s.ReplayCache(5, put), s.FinishReplay(5, 0)} {
		if err == nil {
			t.Fatal("disorder accepted")
		}
	}
	add, _ := AppendRecord(nil, &Record{Op: OpCounterAdd, Key: []byte("k"), Sum: 1})
	if err := s.ReplayCache(6, add); err == nil {
		t.Fatal("counter record accepted in the cache log")
	}
	if err := s.ReplayCounter(0, put); err == nil {
		t.Fatal("put accepted in the counter log")
	}
	must(t, s.FinishReplay(6, 0))
	if off := mustPut(t, s, "k2", "v", NoTTL, 0); off != 6 {
		t.Fatalf("first offset after replay %d, want 6", off)
	}
}

package groups

import (
	"bytes"
	"testing"
)

// seedRecords returns cursor and dead-letter records produced by the encoders through
// a short workload, for the fuzz corpora.
func seedRecords(f *testing.F) (cursor, dead [][]byte) {
	s, err := NewShard(Options{Defaults: GroupConfig{MaxDeliveries: 1}}, 0)
	if err != nil {
		f.Fatal(err)
	}
	ls, _, _ := s.Poll(nil, PollRequest{Group: "g", Consumer: 1, MaxRecords: 4, NowMillis: 1, Window: Window{End: 4}})
	s.Ack("g", 1, []Ref{{Offset: ls[0].Offset}}, 1)
	s.Nack("g", 1, []Ref{{Offset: ls[1].Offset}}, 0, 1)
	s.Redrive("g", []uint64{ls[1].Offset}, 2)
	s.stageCheckpoint(s.byName["g"])
	fx := s.TakeEffects()
	for _, p := range fx.Cursor {
		cursor = append(cursor, bytes.Clone(p))
	}
	for _, p := range fx.DeadLetters {
		dead = append(dead, bytes.Clone(p))
	}
	return cursor, dead
}

func FuzzDecodeCursorRecord(f *testing.F) {
	cursor, _ := seedRecords(f)
	for _, p := range cursor {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeCursorRecord(b)
		if err != nil {
			return
		}
		var again []byte
		if r.Kind == KindCreate {
			c, err := r.Create()
			if err != nil {
				t.Fatalf("decoded create record fails Create: %v", err)
			}
			again = AppendCreateRecord(nil, string(c.Name), c.StartOffset, c.Config, r.DeadLetterEnd)
			copy(again[10:18], b[10:18]) // next_offset is free-form in a create record
		} else {
			entries := make([]CursorEntry, r.Count)
			for i := range entries {
				entries[i] = r.Entry(i)
			}
			var frontier uint64
			if r.Kind == KindCheckpoint {
				frontier = r.Frontier()
			}
			again = AppendCursorRecord(nil, r.Kind, r.GroupID, r.NextOffset, r.DeadLetterEnd, frontier, entries)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("round trip changed the record:\n%x\n%x", b, again)
		}
	})
}

func FuzzDecodeDeadLetterRecord(f *testing.F) {
	_, dead := seedRecords(f)
	for _, p := range dead {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeDeadLetterRecord(b)
		if err != nil {
			return
		}
		if again := AppendDeadLetterRecord(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("round trip changed the record:\n%x\n%x", b, again)
		}
	})
}

// FuzzReplay feeds arbitrary records to a Replayer: it may refuse them, never panic,
// and a shard it builds must serve a poll.
func FuzzReplay(f *testing.F) {
	cursor, dead := seedRecords(f)
	f.Add(bytes.Join(cursor, []byte{0xff, 0xfe}), bytes.Join(dead, []byte{0xff, 0xfe}), uint8(1))
	f.Fuzz(func(t *testing.T, cur, dl []byte, dlEnd uint8) {
		r, err := NewReplayer(Options{}, uint64(dlEnd))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range bytes.Split(dl, []byte{0xff, 0xfe}) {
			r.DeadLetter(p)
		}
		for _, p := range bytes.Split(cur, []byte{0xff, 0xfe}) {
			r.Cursor(p)
		}
		s, _, err := r.Finish(100)
		if err != nil {
			return
		}
		for _, name := range s.Groups() {
			if _, _, err := s.Poll(nil, PollRequest{Group: name, Consumer: 1, MaxRecords: 10, NowMillis: 100, Window: Window{End: 1 << 20}}); err != nil {
				t.Fatalf("poll after replay: %v", err)
			}
		}
	})
}

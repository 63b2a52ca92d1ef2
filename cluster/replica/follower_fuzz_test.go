package replica

import (
	"fmt"
	"testing"

	"felix/proto"
)

// FuzzDecideFollower: any state and any records batch from a peer get an answer and never
// a panic; what the decision stores lands exactly at the tail (or the truncation point) and
// the answer's durable_offset is where the log ends after it.
func FuzzDecideFollower(f *testing.F) {
	f.Add(uint64(1), uint64(1), uint64(3), uint64(0), uint8(3), uint8(2), uint8(2), false, uint8(0))
	f.Add(uint64(2), uint64(3), uint64(1), uint64(2), uint8(4), uint8(3), uint8(1), true, uint8(9))
	f.Fuzz(func(t *testing.T, ballot, epoch, first, compared uint64, held, sent, split uint8, badsum bool, kind uint8) {
		st, m := fuzzCase(ballot, epoch, first, compared, held, sent, split, badsum)
		d := DecideFollower(st, "A", proto.Kind(kind%32), m)
		if d.Answer == nil {
			t.Fatalf("no answer: %+v", d)
		}
		switch d.Action {
		case ActStore, ActTruncateStore:
			at := st.Tail
			if d.Action == ActTruncateStore {
				at = d.TruncateAt
			}
			if d.StoreAt != at || at > st.Tail || at < m.FirstOffset {
				t.Fatalf("stores at %d, tail %d, truncate %d, first %d", d.StoreAt, st.Tail, d.TruncateAt, m.FirstOffset)
			}
			if ok, isOk := d.Answer.(*proto.ReplicateOk); !isOk || ok.DurableOffset != at+uint64(len(d.Store)) || !d.Sync {
				t.Fatalf("answer %s after storing %d at %d", fmtMessage(d.Answer), len(d.Store), at)
			}
		default:
			if len(d.Store) > 0 {
				t.Fatalf("%v stores %d records", d.Action, len(d.Store))
			}
		}
	})
}

// fuzzCase builds a follower holding records "r<i>" (the first split of them "x<i>" when
// split is odd: a divergent copy) with epochs 1@0 and 2@held/2, and a batch of sent
// records "r<i>" from first.
func fuzzCase(ballot, epoch, first, compared uint64, held, sent, split uint8, badsum bool) (*FollowerState, *proto.ReplicateRecords) {
	first %= 64
	r := &memReader{}
	for i := range uint64(held % 32) {
		p := fmt.Sprintf("r%d", i)
		if split%2 == 1 && i >= uint64(split/2)%32 {
			p = fmt.Sprintf("x%d", i)
		}
		r.recs = append(r.recs, []byte(p))
	}
	tail := uint64(len(r.recs))
	st := &FollowerState{Kind: ShardStream, Log: proto.LogStream, Member: true, HasLog: true, Tail: tail,
		Durable: tail / 2, Epochs: []Epoch{{1, 0}}, Ballot: Ballot{Generation: ballot % 4, Leader: "A"}, Records: r,
		Compared: Compared{Generation: epoch % 5, Offset: compared % 40}}
	if tail > 2 {
		st.Epochs = append(st.Epochs, Epoch{2, tail / 2})
	}
	m := &proto.ReplicateRecords{Log: proto.LogStream, Epoch: epoch % 5, FirstOffset: first}
	for i := range uint64(sent % 16) {
		m.Payloads = append(m.Payloads, []byte(fmt.Sprintf("r%d", first+i)))
	}
	m.Checksum = proto.BatchChecksum(m.Payloads)
	if badsum {
		m.Checksum++
	}
	return st, m
}

package core

import "testing"

// keyLog is a read-only shardLog holding producer key records, for recover.
type keyLog struct{ recs [][]byte }

func (k *keyLog) Append([][]byte, int64, func(uint64, uint64, error)) error { return nil }
func (k *keyLog) NextOffset() uint64                                        { return uint64(len(k.recs)) }
func (k *keyLog) EarliestOffset() uint64                                    { return 0 }
func (k *keyLog) CommittedOffset() uint64                                   { return uint64(len(k.recs)) }
func (k *keyLog) Close() error                                              { return nil }
func (k *keyLog) ReadCommitted(from uint64, _ int, fn func(uint64, int64, []byte) bool) error {
	for i := from; i < uint64(len(k.recs)); i++ {
		if !fn(i, 0, k.recs[i]) {
			break
		}
	}
	return nil
}

// TestRecoverDropsKeysWhoseOffsetsWereReused: a crash kept the key record of
// batch 1 (offsets 10..11) but not its data; after the restart batch 2 took
// offsets 10..11; after a second restart the stale key must not answer a
// re-send of batch 1 with batch 2's offsets (found by the e2e crash soak:
// acknowledged files whose ack offsets held other files).
func TestRecoverDropsKeysWhoseOffsetsWereReused(t *testing.T) {
	rec := func(seq, first, last uint64) []byte {
		return appendProducerRecord(nil, producerKey{"p", seq}, first, last)
	}
	log := &keyLog{recs: [][]byte{
		rec(0, 0, 9),   // live
		rec(1, 10, 11), // its data was lost in a crash
		rec(2, 10, 11), // after the restart: the same offsets for another batch
		rec(3, 12, 13), // live
	}}
	w := newProducerWindow(16)
	if _, err := w.recover(log, 14); err != nil {
		t.Fatal(err)
	}
	if e := w.entries[producerKey{"p", 1}]; e != nil {
		t.Fatalf("stale key of batch 1 kept, pointing at %d..%d (batch 2's records)", e.first, e.last)
	}
	for _, seq := range []uint64{0, 2, 3} {
		if w.entries[producerKey{"p", seq}] == nil {
			t.Fatalf("live key of batch %d dropped", seq)
		}
	}
	// A key beyond the recovered data is dropped too (its data never landed).
	w2 := newProducerWindow(16)
	if _, err := w2.recover(&keyLog{recs: [][]byte{rec(0, 0, 9), rec(1, 10, 11)}}, 10); err != nil {
		t.Fatal(err)
	}
	if w2.entries[producerKey{"p", 1}] != nil || w2.entries[producerKey{"p", 0}] == nil {
		t.Fatalf("window after a lost tail: %v", w2.entries)
	}
}

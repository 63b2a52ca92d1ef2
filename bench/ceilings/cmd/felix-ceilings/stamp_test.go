package main

import (
	"testing"
	"time"
)

// The books fail on a lost, duplicated or reordered record, and give each record's send time.
func TestBooks(t *testing.T) {
	rec := make([]byte, stampBytes)
	t0 := time.Unix(0, 1234567)
	for _, c := range []struct {
		seqs []uint64
		ok   bool
	}{
		{[]uint64{0, 1, 2}, true},
		{[]uint64{0, 2}, false},    // lost
		{[]uint64{0, 1, 1}, false}, // duplicated
		{[]uint64{1, 0}, false},    // reordered
	} {
		var bk books
		var err error
		for _, s := range c.seqs {
			putStamp(rec, s, t0)
			var got time.Time
			if got, err = bk.take(rec); err != nil {
				break
			}
			if !got.Equal(t0) {
				t.Fatalf("send time %v, want %v", got, t0)
			}
		}
		if (err == nil) != c.ok {
			t.Fatalf("%v: err = %v", c.seqs, err)
		}
	}
}

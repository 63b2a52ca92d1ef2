package main

import (
	"encoding/binary"
	"fmt"
	"time"
)

// stampBytes is the head of every record: sequence number and send time (Unix ns), both
// little-endian uint64.
const stampBytes = 16

func putStamp(rec []byte, seq uint64, t time.Time) {
	binary.LittleEndian.PutUint64(rec, seq)
	binary.LittleEndian.PutUint64(rec[8:], uint64(t.UnixNano()))
}

// books checks that records arrive exactly once and in order.
type books struct {
	next uint64
}

// take checks rec's sequence number and returns its send time.
func (b *books) take(rec []byte) (time.Time, error) {
	seq := binary.LittleEndian.Uint64(rec)
	if seq != b.next {
		return time.Time{}, fmt.Errorf("record %d arrived where %d was due (lost, duplicated or reordered)", seq, b.next)
	}
	b.next++
	return time.Unix(0, int64(binary.LittleEndian.Uint64(rec[8:]))), nil
}

package core

// replayBatch is one published batch kept by an in-memory shard.
type replayBatch struct {
	base  uint64
	count int
	frame []byte // shared event frame without offsets; never mutated
}

// replayRing is an in-memory shard's bounded replay ring: the most recent
// batches, holding at most maxRecords records (the newest batch is always
// kept, even when larger). Core goroutine only.
type replayRing struct {
	batches    []replayBatch // circular
	head       int
	count      int
	records    int
	maxRecords int
}

func newReplayRing(maxRecords int) *replayRing {
	return &replayRing{batches: make([]replayBatch, 16), maxRecords: maxRecords}
}

func (r *replayRing) at(i int) *replayBatch {
	j := r.head + i
	if j >= len(r.batches) {
		j -= len(r.batches)
	}
	return &r.batches[j]
}

// add keeps a batch, evicting the oldest ones beyond maxRecords.
func (r *replayRing) add(b replayBatch) {
	if r.maxRecords <= 0 {
		return
	}
	for r.count > 0 && r.records+b.count > r.maxRecords {
		old := r.at(0)
		r.records -= old.count
		*old = replayBatch{}
		r.head++
		if r.head == len(r.batches) {
			r.head = 0
		}
		r.count--
	}
	if r.count == len(r.batches) {
		grown := make([]replayBatch, 2*len(r.batches))
		for i := 0; i < r.count; i++ {
			grown[i] = *r.at(i)
		}
		r.batches, r.head = grown, 0
	}
	*r.at(r.count) = b
	r.count++
	r.records += b.count
}

// earliest returns the oldest retained offset, or next when empty.
func (r *replayRing) earliest(next uint64) uint64 {
	if r.count == 0 {
		return next
	}
	return r.at(0).base
}

// from returns the retained batches that hold offsets >= off, oldest first.
func (r *replayRing) from(off uint64) []replayBatch {
	var out []replayBatch
	for i := 0; i < r.count; i++ {
		b := r.at(i)
		if b.base+uint64(b.count) > off {
			out = append(out, *b)
		}
	}
	return out
}

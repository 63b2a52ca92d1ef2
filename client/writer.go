package client

import (
	"io"
	"sync"
)

// A session keeps its write buffers for the next writes: one of up to keptWriteBuf always,
// a larger one (coalesced publish batches) only while the writes fill at least a quarter of
// it, and never one over maxKeptWriteBuf, so a session that goes quiet after a burst does
// not pin a big buffer, and one publishing steadily does not reallocate one per write.
const (
	keptWriteBuf    = 1 << 20
	maxKeptWriteBuf = 16 << 20
)

// sessionWriter coalesces the frames of pipelined requests into stream writes (issue 22,
// finding 5). A request arriving while no write is in progress is written at once on the
// caller's goroutine (no hand-off); requests arriving while a write is in progress are
// appended to the next write, which the caller whose write just ended (or else the first of
// them to find the stream idle) makes for all of them, so requests in flight together leave
// in a few writes, not one each. Callers wait on a sync.Cond, not on a goroutine or a
// channel of their own. Frames are written in the order write was called.
//
// A failed write makes the writer refuse every later frame: the frames it carried that
// began before the failure point are "started" (their outcome is unknown), the rest and all
// later ones were never sent.
type sessionWriter struct {
	w io.Writer

	mu sync.Mutex
	// conds[g&1] (L = &mu) wakes the callers of generation g: all of them when its write
	// ended, or one to make the write (nobody else is writing). Two, so ending one
	// write does not wake the callers queued for the next.
	conds   [2]sync.Cond
	queue   []byte // frames for the next write (generation next)
	spare   []byte // the previous write's buffer, reused for the next queue
	writing bool
	next    uint64 // generation of the frames in queue (the first write is generation 1)
	written uint64 // the last generation whose write has ended
	failGen uint64 // the generation whose write failed (0 = none)
	failN   int    // bytes of failGen's write the stream accepted
	failErr error
}

func newSessionWriter(w io.Writer) *sessionWriter {
	sw := &sessionWriter{w: w, next: 1}
	sw.conds[0].L, sw.conds[1].L = &sw.mu, &sw.mu
	return sw
}

// write appends one frame (appendFrame appends it to its argument and returns the result)
// to the next stream write and returns once that write has ended. err is nil when the
// stream accepted the frame. Otherwise started reports whether any byte of the frame may
// have left the client (false: nothing did, re-sending is safe); err is the stream's error.
func (sw *sessionWriter) write(appendFrame func([]byte) []byte) (started bool, err error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.failGen != 0 {
		return false, sw.failErr
	}
	start := len(sw.queue)
	sw.queue = appendFrame(sw.queue)
	gen := sw.next
	for sw.written < gen {
		if sw.writing {
			sw.conds[gen&1].Wait()
			continue
		}
		sw.flushLocked()
	}
	if len(sw.queue) > 0 && !sw.writing && sw.failGen == 0 {
		// Frames queued behind our write: write them too, now, rather than wait for one of
		// their callers to be scheduled (one extra write at most, so no caller is held for
		// long by others' traffic).
		sw.flushLocked()
	}
	if len(sw.queue) > 0 && !sw.writing {
		sw.conds[sw.next&1].Signal() // one of the queued frames' callers makes the next write
	}
	switch {
	case sw.failGen == 0 || gen < sw.failGen:
		return false, nil
	case gen == sw.failGen && start < sw.failN:
		return true, sw.failErr
	}
	return false, sw.failErr
}

// flushLocked writes the queued frames as one write, releasing mu while the stream
// writes; frames appended meanwhile form the next generation. Caller holds mu.
func (sw *sessionWriter) flushLocked() {
	buf, gen := sw.queue, sw.next
	sw.next++
	sw.queue, sw.spare = sw.spare[:0], nil
	if sw.failGen != 0 { // the stream already failed: this generation is not sent
		sw.written = gen
		sw.conds[gen&1].Broadcast()
		return
	}
	sw.writing = true
	sw.mu.Unlock()
	n, err := sw.w.Write(buf)
	sw.mu.Lock()
	sw.writing = false
	sw.written = gen
	if err != nil && sw.failGen == 0 {
		sw.failGen, sw.failN, sw.failErr = gen, n, err
	}
	if c := cap(buf); c <= keptWriteBuf || (c <= maxKeptWriteBuf && len(buf) >= c/4) {
		sw.spare = buf[:0]
	}
	sw.conds[gen&1].Broadcast()
}

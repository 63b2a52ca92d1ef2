package netq

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Errors from Writer. Test with errors.Is.
var (
	// ErrWriterFull: the peer is not reading its answers and more than the writer's byte
	// bound is queued. The caller ends the stream (the peer broke the protocol's pacing).
	ErrWriterFull = errors.New("netq: stream writer queue full")
	// ErrWriterClosed: the writer was closed or its stream failed.
	ErrWriterClosed = errors.New("netq: stream writer closed")
)

// Writer queues encoded frames for one stream and writes them from its own goroutine, so
// producers never block: answers are produced by engine completion callbacks, which run on
// a core goroutine and must not wait on the network (docs/architecture.md, "Goroutines").
//
// Frames are appended into a pending buffer under a mutex; the write goroutine swaps it
// with its spare buffer and writes the whole batch with one Write call. In steady state this
// allocates nothing (two buffers ping-pong) and coalesces answers into fewer stream writes.
// Bound: at most maxQueued bytes wait; beyond that Append fails with ErrWriterFull.
type Writer struct {
	w         io.Writer
	maxQueued int

	mu      sync.Mutex
	pending []byte
	spare   []byte
	err     error
	closing bool
	wake    chan struct{}
	done    chan struct{}
}

// NewWriter starts a writer goroutine for w with a queue bound of maxQueued bytes (> 0).
func NewWriter(w io.Writer, maxQueued int) *Writer {
	if maxQueued <= 0 {
		maxQueued = 1 << 20
	}
	wr := &Writer{w: w, maxQueued: maxQueued, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go wr.run()
	return wr
}

// Append runs encode on the pending buffer (encode must append exactly one or more whole
// frames to dst and return it) and wakes the writer. Safe from any goroutine, never blocks
// on the network. Errors: ErrWriterFull past the bound (nothing is queued), or an error
// wrapping ErrWriterClosed after Close or a failed write.
func (wr *Writer) Append(encode func(dst []byte) []byte) error {
	wr.mu.Lock()
	if wr.err != nil || wr.closing {
		err := wr.err
		wr.mu.Unlock()
		if err == nil {
			return ErrWriterClosed
		}
		return fmt.Errorf("%w: %v", ErrWriterClosed, err)
	}
	if len(wr.pending) >= wr.maxQueued {
		wr.mu.Unlock()
		return ErrWriterFull
	}
	wr.pending = encode(wr.pending)
	wr.mu.Unlock()
	select {
	case wr.wake <- struct{}{}:
	default:
	}
	return nil
}

// Begin locks the writer and returns the pending buffer for the caller to append whole
// frames to; Commit(buf) must follow (on every path where err is nil) and unlocks. It is
// Append without a closure, for hot paths (a capturing closure escapes to the heap).
// Errors as Append; on error nothing is locked.
func (wr *Writer) Begin() ([]byte, error) {
	wr.mu.Lock()
	if wr.err != nil || wr.closing {
		err := wr.err
		wr.mu.Unlock()
		if err == nil {
			return nil, ErrWriterClosed
		}
		return nil, fmt.Errorf("%w: %v", ErrWriterClosed, err)
	}
	if len(wr.pending) >= wr.maxQueued {
		wr.mu.Unlock()
		return nil, ErrWriterFull
	}
	return wr.pending, nil
}

// Commit stores buf (the slice Begin returned, appended to) as the pending buffer, unlocks
// and wakes the writer goroutine.
func (wr *Writer) Commit(buf []byte) {
	wr.pending = buf
	wr.mu.Unlock()
	select {
	case wr.wake <- struct{}{}:
	default:
	}
}

// Write queues a copy of p (one or more whole frames). See Append.
func (wr *Writer) Write(p []byte) (int, error) {
	if err := wr.Append(func(dst []byte) []byte { return append(dst, p...) }); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close writes what is queued, then stops the goroutine and returns the first write error.
// Appends after Close fail. It does not close the underlying stream. Idempotent.
func (wr *Writer) Close() error {
	wr.mu.Lock()
	wr.closing = true
	wr.mu.Unlock()
	select {
	case wr.wake <- struct{}{}:
	default:
	}
	<-wr.done
	wr.mu.Lock()
	defer wr.mu.Unlock()
	return wr.err
}

// Done is closed when the writer goroutine has exited (after Close, or a write error).
func (wr *Writer) Done() <-chan struct{} { return wr.done }

func (wr *Writer) run() {
	defer close(wr.done)
	for {
		wr.mu.Lock()
		for len(wr.pending) == 0 {
			if wr.closing || wr.err != nil {
				wr.mu.Unlock()
				return
			}
			wr.mu.Unlock()
			<-wr.wake
			wr.mu.Lock()
		}
		batch := wr.pending
		wr.pending = wr.spare[:0]
		wr.mu.Unlock()

		_, err := wr.w.Write(batch)

		wr.mu.Lock()
		wr.spare = batch[:0]
		if err != nil {
			wr.err = err
			wr.pending = wr.pending[:0]
			wr.mu.Unlock()
			return
		}
		wr.mu.Unlock()
	}
}

package client

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
)

// gateWriter is a stream whose writes block until released, recording each write.
type gateWriter struct {
	mu     sync.Mutex
	writes [][]byte
	gate   chan struct{} // one receive per write
	accept int           // bytes accepted by a failing write (fail set)
	fail   error
}

func (g *gateWriter) Write(p []byte) (int, error) {
	<-g.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writes = append(g.writes, bytes.Clone(p))
	if g.fail != nil {
		return min(g.accept, len(p)), g.fail
	}
	return len(p), nil
}

func frameOf(s string) func([]byte) []byte {
	return func(dst []byte) []byte { return append(dst, s...) }
}

// TestSessionWriterCoalesces: while one write is in progress, the frames of 16 more
// requests queue up and leave together in the next write, in the order they were queued;
// the idle writer wrote the first frame at once on its caller's goroutine (issue 22
// finding 5: before, every pipelined request was a write of its own, 17 writes here).
func TestSessionWriterCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gateWriter{gate: make(chan struct{})}
		sw := newSessionWriter(g)
		errs := make(chan error, 17)
		go func() { _, err := sw.write(frameOf("first;")); errs <- err }()
		synctest.Wait() // the first write is in progress (blocked in the stream)
		for i := range 16 {
			go func() { _, err := sw.write(frameOf(fmt.Sprintf("r%02d;", i))); errs <- err }()
			synctest.Wait() // queued behind the write in progress, in this order
		}
		close(g.gate)
		for range 17 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var want bytes.Buffer
		for i := range 16 {
			fmt.Fprintf(&want, "r%02d;", i)
		}
		if len(g.writes) != 2 || string(g.writes[0]) != "first;" || string(g.writes[1]) != want.String() {
			t.Fatalf("%d stream writes %q, want 2: %q then the 16 queued frames in order", len(g.writes), g.writes, "first;")
		}
	})
}

// TestSessionWriterFailure: a write that fails after the stream accepted some bytes
// reports the frames that began before that point as started (their outcome is unknown)
// and the others, and every later frame, as not sent (safe to re-send); nothing more
// reaches the stream.
func TestSessionWriterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("stream reset")
		g := &gateWriter{gate: make(chan struct{})}
		sw := newSessionWriter(g)
		type outcome struct {
			started bool
			err     error
		}
		frames := []string{"aaaa", "bbbb", "cccc", "dddd"}
		res := make([]chan outcome, len(frames))
		for i, f := range frames {
			res[i] = make(chan outcome, 1)
			go func() { st, err := sw.write(frameOf(f)); res[i] <- outcome{st, err} }()
			synctest.Wait() // "aaaa" is being written; the others queue in order
		}
		g.gate <- struct{}{} // "aaaa" succeeds
		synctest.Wait()      // a queued caller now writes "bbbbccccdddd"
		g.mu.Lock()
		g.fail, g.accept = boom, 6 // ... and the stream takes 6 bytes of it, then fails
		g.mu.Unlock()
		g.gate <- struct{}{}
		want := []outcome{{false, nil}, {true, boom}, {true, boom}, {false, boom}}
		for i := range frames {
			if got := <-res[i]; got != want[i] {
				t.Errorf("frame %q: started=%v err=%v, want started=%v err=%v", frames[i], got.started, got.err, want[i].started, want[i].err)
			}
		}
		if st, err := sw.write(frameOf("eeee")); st || err != boom {
			t.Errorf("a frame after the failure: started=%v err=%v, want not sent, %v", st, err, boom)
		}
		if len(g.writes) != 2 {
			t.Errorf("%d stream writes %q, want 2", len(g.writes), g.writes)
		}
	})
}

// countingWriter records what reaches the stream (safe: the writer never writes from two
// goroutines at once, which the race detector checks here).
type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	return c.buf.Write(p)
}

// TestSessionWriterConcurrent: 16 goroutines writing 200 frames each through one writer:
// every frame reaches the stream once, whole, and each goroutine's frames in its order
// (no frame lost or left unwritten when callers hand the next write to each other).
func TestSessionWriterConcurrent(t *testing.T) {
	const writers, each = 16, 200
	cw := &countingWriter{}
	sw := newSessionWriter(cw)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := sw.write(frameOf(fmt.Sprintf("<%02d:%03d>", g, i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	next := make([]int, writers)
	out := cw.buf.String()
	for len(out) > 0 {
		var g, i int
		if _, err := fmt.Sscanf(out[:8], "<%02d:%03d>", &g, &i); err != nil {
			t.Fatalf("torn frame at %q: %v", out[:min(len(out), 16)], err)
		}
		if i != next[g] {
			t.Fatalf("writer %d: frame %d after %d", g, i, next[g]-1)
		}
		next[g]++
		out = out[8:]
	}
	for g, n := range next {
		if n != each {
			t.Fatalf("writer %d: %d frames reached the stream, want %d", g, n, each)
		}
	}
	t.Logf("%d frames in %d stream writes", writers*each, cw.writes)
}

package supervisor

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// DefaultTailBytes is the in-memory tail kept per process run when Spec.TailBytes is 0: 64 KiB.
const DefaultTailBytes = 64 << 10

// tail keeps the last max bytes written to it and wakes waiters on every write.
// Safe for concurrent use.
type tail struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	total   int64         // bytes ever written
	changed chan struct{} // closed and replaced at every write
}

func newTail(max int) *tail {
	if max <= 0 {
		max = DefaultTailBytes
	}
	return &tail{max: max, changed: make(chan struct{})}
}

// Write appends p, dropping the oldest bytes beyond the bound. It never fails.
func (b *tail) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	b.total += int64(len(p))
	close(b.changed)
	b.changed = make(chan struct{})
	return len(p), nil
}

// snapshot returns the tail, the byte count ever written and a channel closed at the next write.
func (b *tail) snapshot() (string, int64, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf), b.total, b.changed
}

// waitFor blocks until the tail contains substr, done is closed (the writer is finished:
// the process exited and its output was copied) or ctx ends.
func (b *tail) waitFor(ctx context.Context, substr string, done <-chan struct{}) error {
	for {
		s, _, changed := b.snapshot()
		if strings.Contains(s, substr) {
			return nil
		}
		select {
		case <-changed:
		case <-done:
			if s, _, _ := b.snapshot(); strings.Contains(s, substr) {
				return nil
			}
			return fmt.Errorf("%w before its output contained %q", ErrExited, substr)
		case <-ctx.Done():
			return fmt.Errorf("output never contained %q: %w", substr, ctx.Err())
		}
	}
}

// lastLines returns at most n trailing lines of s (for error messages).
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

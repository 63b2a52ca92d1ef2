package core

import "sync"

// msgKind says what a message asks its core to do.
type msgKind uint8

const (
	msgPublish msgKind = iota + 1 // PublishRequest for one shard
	msgOp                         // an operation value: op.apply(core)
)

// operation is a message kind defined outside the publish fast path
// (catalog changes, subscribe, and the cache and group operations in
// cache_ops.go, group_ops.go and group_poll.go). apply runs on the owning core goroutine
// and must not block. fail runs instead of apply, exactly once, when the
// core stops before applying it (err is ErrClosed); it may run on any
// goroutine.
type operation interface {
	apply(c *core)
	fail(err error)
}

// message is one inbox entry, stored by value in the inbox ring so that a
// publish costs no allocation to enqueue.
type message struct {
	kind  msgKind
	shard *streamShard // msgPublish: the target shard (state owned by the core)
	req   *PublishRequest
	done  func(PublishResult, error)
	op    operation // msgOp
	// enqueuedNanos is the clock reading at enqueue (inbox wait metric).
	enqueuedNanos int64
}

// inbox is a core's bounded multi-producer single-consumer queue. Producers
// are any goroutines; the consumer is the core. A full inbox refuses the
// message with ErrOverloaded instead of growing.
//
// Sleep protocol: the core calls prepareSleep before blocking in its ring;
// when that finds the inbox empty it sets sleeping, and the next producer
// clears it and reports that the core must be woken (ring Wake). Producers
// never wake a core that did not say it would sleep.
type inbox struct {
	mu       sync.Mutex
	buf      []message
	head     int // index of the oldest message
	count    int
	sleeping bool
	closed   bool
}

func newInbox(capacity int) *inbox {
	return &inbox{buf: make([]message, capacity)}
}

// push appends m. It returns wake=true when the caller must wake the core.
// Errors: ErrOverloaded when full, ErrClosed after close.
func (q *inbox) push(m message) (wake bool, err error) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false, ErrClosed
	}
	if q.count == len(q.buf) {
		q.mu.Unlock()
		return false, ErrOverloaded
	}
	tail := q.head + q.count
	if tail >= len(q.buf) {
		tail -= len(q.buf)
	}
	q.buf[tail] = m
	q.count++
	wake = q.sleeping
	q.sleeping = false
	q.mu.Unlock()
	return wake, nil
}

// drain moves up to cap(dst)-len(dst) messages into dst, oldest first, and
// clears their slots so the inbox keeps no references. Core only.
func (q *inbox) drain(dst []message) []message {
	q.mu.Lock()
	n := q.count
	if room := cap(dst) - len(dst); n > room {
		n = room
	}
	for i := 0; i < n; i++ {
		dst = append(dst, q.buf[q.head])
		q.buf[q.head] = message{}
		q.head++
		if q.head == len(q.buf) {
			q.head = 0
		}
	}
	q.count -= n
	q.mu.Unlock()
	return dst
}

// prepareSleep sets the sleeping flag and returns true when the inbox is
// empty; otherwise it returns false and the core must not block.
func (q *inbox) prepareSleep() bool {
	q.mu.Lock()
	empty := q.count == 0
	q.sleeping = empty
	q.mu.Unlock()
	return empty
}

// awake clears the sleeping flag after the core returns from its wait.
func (q *inbox) awake() {
	q.mu.Lock()
	q.sleeping = false
	q.mu.Unlock()
}

// wakeRequest clears the sleeping flag and reports whether it was set: used by
// goroutines other than producers (a subscriber that drained its overflow)
// that need the core to look at its state again.
func (q *inbox) wakeRequest() bool {
	q.mu.Lock()
	wake := q.sleeping
	q.sleeping = false
	q.mu.Unlock()
	return wake
}

// depth returns the number of queued messages.
func (q *inbox) depth() int {
	q.mu.Lock()
	n := q.count
	q.mu.Unlock()
	return n
}

// close refuses further pushes and returns the messages still queued.
func (q *inbox) close() []message {
	q.mu.Lock()
	q.closed = true
	rest := make([]message, 0, q.count)
	q.mu.Unlock()
	return q.drain(rest)
}

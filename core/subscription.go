package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// SlowPolicy is what a subscription's full queue does with the next batch
// (spec/config.md FELIX_SUB_QUEUE_POLICY; docs/architecture.md, core).
type SlowPolicy uint8

const (
	// DropNew: on a durable shard, the subscriber falls back to reading the
	// batch and those after it from the log and rejoins live delivery at the
	// tail (catchup.go; counted in felix_subscribe_catchup_total): nothing is
	// lost but what retention removed first, reported as a gap. On an
	// in-memory shard the batch is dropped for this subscriber only. A loss
	// shows as an offset gap and in Delivery.Dropped of the next delivery; it
	// is counted in felix_subscribe_dropped_total.
	DropNew SlowPolicy = iota
	// Block parks the batch and holds the shard's further publishes until
	// the subscriber drains, for at most its BlockTimeout; then the
	// subscription ends with ErrSlowSubscriber (nothing is skipped silently).
	Block
)

// StartKind is where a subscription starts (spec/client-protocol.md §7).
type StartKind uint8

const (
	// StartLatest: only records published from now on.
	StartLatest StartKind = iota
	// StartEarliest: the oldest record still retained.
	StartEarliest
	// StartOffset: exactly Offset, the first record not yet seen.
	StartOffset
)

// SubscribeRequest asks for one shard's records.
type SubscribeRequest struct {
	Stream StreamName
	Shard  int // offsets are per shard (spec/client-protocol.md §8.9)
	Start  StartKind
	Offset uint64 // StartOffset only
	// WithOffsets chooses frames with base_offset (flag 0x0020) on durable
	// streams. In-memory streams never put offsets on the wire.
	WithOffsets bool
	Policy      SlowPolicy
	// QueueCapacity is the live queue in frames (0 = Config default).
	QueueCapacity int
	// BlockTimeout bounds a Block subscriber's wait (0 = Config default).
	BlockTimeout time.Duration
}

// Delivery is one frame for a subscriber. Frame is a complete FLX1 shared
// event batch frame (spec/client-protocol.md §5.5; with 0x0020 when the
// subscription asked for offsets on a durable stream) holding the records
// [BaseOffset, BaseOffset+Count). Live frames are shared by every
// subscriber and never mutated: write them, do not modify them.
type Delivery struct {
	Frame      []byte
	Shard      int
	BaseOffset uint64
	Count      int
	// Dropped is the number of records dropped for this subscription
	// (DropNew in memory, or removed by retention before a catching-up
	// subscriber read them) just below BaseOffset: the offset gap
	// [BaseOffset-Dropped, BaseOffset) before this frame.
	Dropped uint64
	// Skipped is the number of offsets just below BaseOffset that hold no
	// deliverable record (generation-start records): not a loss. The broker
	// sends it as skipped_before (flag 0x0800) to clients that negotiated it
	// (spec/client-protocol.md §8.5).
	Skipped uint64
	// History is true for frames read from the log or the replay ring
	// rather than delivered live.
	History bool
}

// Subscription is one subscriber's view of a shard. Next is for one
// goroutine at a time; Close and the counters for any goroutine.
type Subscription struct {
	id          uint64
	shard       *streamShard // pointer only: its state belongs to the core
	core        *core
	withOffsets bool
	policy      SlowPolicy
	capacity    int
	// blockTimeout and blockDeadline are used by the core.
	blockTimeout  time.Duration
	blockDeadline int64

	// History (consumer goroutine only): durable records [histNext, histEnd)
	// read from the log, then memHistory (in-memory replay), then live.
	log          shardLog
	histNext     uint64
	histEnd      uint64
	historyBytes int
	memHistory   []Delivery
	skipBelow    uint64 // live records below this offset are not delivered
	// catchReading: [histNext, histEnd) is a catch-up read (catchup.go);
	// gapPending: records lost to retention, reported with the next delivery.
	catchReading bool
	gapPending   uint64

	mu             sync.Mutex
	items          []Delivery // circular, len = capacity
	head, count    int
	overflow       []Delivery // Block only: batches parked while full
	droppedPending uint64
	catchUp        catchUpState // catchup.go
	err            error
	notify         chan struct{}
	stalled        atomic.Bool // set while the core lists it as blocking
	dropped        atomic.Uint64
}

// pushResult is what a core learns from Subscription.push.
type pushResult uint8

const (
	pushQueued pushResult = iota
	pushDropped
	pushOverflow
	pushClosed
)

// ID is the process-unique subscription id (spec/client-protocol.md §1.3).
func (q *Subscription) ID() uint64 { return q.id }

// Dropped returns how many records were dropped for this subscription.
func (q *Subscription) Dropped() uint64 { return q.dropped.Load() }

// push hands a live delivery to the queue (core goroutine). queued is the
// number of records waiting in the queue afterwards (its lag).
func (q *Subscription) push(d Delivery) (pushResult, uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return pushClosed, 0
	}
	if q.catchUp.catching { // read from the log instead (catchup.go)
		q.catchUp.end = d.BaseOffset + uint64(d.Count)
		return pushQueued, q.catchUpLag()
	}
	if q.count == q.capacity || len(q.overflow) > 0 {
		if q.catchUp.enabled {
			q.startCatchUp(d)
			return pushQueued, q.queuedRecords() + q.catchUpLag()
		}
		if q.policy == DropNew {
			q.droppedPending += uint64(d.Count)
			q.dropped.Add(uint64(d.Count))
			return pushDropped, q.queuedRecords()
		}
		q.overflow = append(q.overflow, d)
		q.stalled.Store(true)
		return pushOverflow, q.queuedRecords()
	}
	d.Dropped, q.droppedPending = q.droppedPending, 0
	q.put(d)
	return pushQueued, q.queuedRecords()
}

func (q *Subscription) put(d Delivery) {
	i := q.head + q.count
	if i >= q.capacity {
		i -= q.capacity
	}
	q.items[i] = d
	q.count++
	if q.count == 1 {
		select {
		case q.notify <- struct{}{}:
		default:
		}
	}
}

// queuedRecords estimates the records waiting (caller holds mu): frames
// times the newest frame's size is enough for a lag gauge.
func (q *Subscription) queuedRecords() uint64 {
	n := q.count + len(q.overflow)
	if n == 0 {
		return 0
	}
	last := q.head + q.count - 1
	if last >= q.capacity {
		last -= q.capacity
	}
	if q.count == 0 {
		return uint64(n * q.overflow[0].Count)
	}
	return uint64(n * q.items[last].Count)
}

func (q *Subscription) overflowLen() int {
	q.mu.Lock()
	n := len(q.overflow)
	q.mu.Unlock()
	return n
}

// end closes the subscription with err (core goroutine or Close). Queued
// frames stay deliverable unless err is ErrClosed; parked ones are dropped.
func (q *Subscription) end(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.err = err
	}
	clear(q.overflow)
	q.overflow = nil
	if errors.Is(err, ErrClosed) {
		clear(q.items)
		q.count = 0
	}
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Close ends the subscription. The core forgets it at its next fanout; a
// core held by it resumes. Next returns ErrClosed afterwards.
func (q *Subscription) Close() error {
	q.end(ErrClosed)
	if q.stalled.Load() {
		q.core.wake()
	}
	return nil
}

// Next returns the next delivery: history first (durable log pages, or the
// in-memory replay ring), then live frames, in offset order with no gap but
// the counted drops and no duplicate. It blocks until a frame is ready, ctx
// ends (ctx.Err()), or the subscription ends: ErrClosed, ErrSlowSubscriber,
// ErrNotFound (stream deleted), ErrMoved-wrapped (the shard changed role or
// closed here: SetRole, CloseShard; frames queued before stay deliverable),
// a *CursorError (history trimmed away while reading), or an
// ErrStorageFailed-wrapped read error.
func (q *Subscription) Next(ctx context.Context) (Delivery, error) {
	for {
		if q.histNext < q.histEnd {
			// An ended subscription stops here: its live frames lie past
			// the history it can no longer complete.
			if err := q.endedErr(); err != nil {
				return Delivery{}, err
			}
			d, err := q.nextHistory()
			if err == errCatchUpGap {
				continue
			}
			return d, err
		}
		if len(q.memHistory) > 0 {
			d := q.memHistory[0]
			q.memHistory[0] = Delivery{}
			q.memHistory = q.memHistory[1:]
			return d, nil
		}
		d, ok, err := q.pop()
		if err != nil {
			return Delivery{}, err
		}
		if ok {
			if d, ok = q.trim(d); ok {
				d.Dropped += q.takeGap()
				return d, nil
			}
			continue
		}
		if q.resumeCatchUp() {
			continue
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

func (q *Subscription) endedErr() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// pop takes the oldest queued live frame and refills from the overflow.
func (q *Subscription) pop() (Delivery, bool, error) {
	q.mu.Lock()
	if q.count == 0 {
		err := q.err
		q.mu.Unlock()
		return Delivery{}, false, err
	}
	d := q.items[q.head]
	q.items[q.head] = Delivery{}
	q.head++
	if q.head == q.capacity {
		q.head = 0
	}
	q.count--
	drained := false
	if len(q.overflow) > 0 {
		q.put(q.overflow[0])
		q.overflow[0] = Delivery{}
		q.overflow = q.overflow[1:]
		drained = len(q.overflow) == 0
	}
	q.mu.Unlock()
	if drained && q.stalled.Load() {
		q.core.wake()
	}
	return d, true, nil
}

// trim cuts records below skipBelow off a live frame (a subscription that
// started inside a batch still in flight). ok=false: nothing left.
func (q *Subscription) trim(d Delivery) (Delivery, bool) {
	if d.BaseOffset >= q.skipBelow {
		return d, true
	}
	end := d.BaseOffset + uint64(d.Count)
	if end <= q.skipBelow {
		return d, false
	}
	skip := int(q.skipBelow - d.BaseOffset)
	frame, err := reframe(d.Frame, skip, q.withOffsets && q.shard.durable, q.skipBelow)
	if err != nil {
		return d, false
	}
	return Delivery{Frame: frame, Shard: d.Shard, BaseOffset: q.skipBelow, Count: d.Count - skip}, true
}

// historyRecordsMax bounds the records of one history frame.
const historyRecordsMax = 4096

// nextHistory reads one page of durable history [histNext, histEnd) into a
// new frame (consumer goroutine; the log's committed reads are goroutine-safe).
// Offsets holding no data record (a generation-start record) are reported as
// Delivery.Skipped of the frame after them.
func (q *Subscription) nextHistory() (Delivery, error) {
	var b frameBuilder
	from := q.histNext
	base := from
	err := q.log.ReadCommitted(from, q.historyBytes, func(off uint64, _ int64, p []byte) bool {
		if b.count == 0 {
			if off >= q.histEnd {
				return false
			}
			base = off
			b.reset(q.withOffsets, base, min(q.historyBytes, 1<<20)+64)
		}
		if off >= q.histEnd || off != base+uint64(b.count) || b.count >= historyRecordsMax {
			return false
		}
		b.add(p)
		return true
	})
	if err != nil {
		if q.catchUpTrimmed(err, from) {
			return Delivery{}, errCatchUpGap
		}
		var trimmed *trimmedError
		if errors.As(err, &trimmed) {
			cerr := &CursorError{Reason: CursorTooOld, Requested: from, Available: trimmed.oldest}
			q.end(cerr)
			return Delivery{}, cerr
		}
		if b.count == 0 { // else deliver the records below the damage first: the next page meets it again
			err = q.shard.readFailed("history read", err) // a *DamageError for damaged bytes (damage.go)
			q.end(err)
			return Delivery{}, err
		}
	}
	if b.count == 0 {
		err := storageError("history read", fmt.Errorf("no record at %d below %d", from, q.histEnd))
		q.end(err)
		return Delivery{}, err
	}
	q.histNext = base + uint64(b.count)
	if q.catchReading {
		q.shard.metrics.catchUpRecords.Add(b.count)
	}
	return Delivery{Frame: b.finish(), Shard: q.shard.index, BaseOffset: base, Count: b.count,
		Dropped: q.takeGap(), Skipped: base - from, History: true}, nil
}

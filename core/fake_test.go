package core

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// fakeClock is a settable clock for deterministic tests.
type fakeClock struct{ nanos atomic.Int64 }

func (c *fakeClock) MonoNanos() int64        { return c.nanos.Load() }
func (c *fakeClock) WallMicros() int64       { return 1_700_000_000_000_000 + c.nanos.Load()/1000 }
func (c *fakeClock) advance(d time.Duration) { c.nanos.Add(int64(d)) }

// fakeStore is a simulated disk shared by the fake disks of every engine a
// test opens, so a second engine sees what the first committed. crash drops
// every record whose append has not completed.
type fakeStore struct {
	mu   sync.Mutex
	logs map[string]*fakeLog
	// appendErr, when set, fails the next Append of any log; completeErr
	// fails completions instead.
	appendErr   error
	completeErr error
	readErr     error // fails ReadCommitted
}

func newFakeStore() *fakeStore { return &fakeStore{logs: map[string]*fakeLog{}} }

func (st *fakeStore) crash() {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, l := range st.logs {
		l.mu.Lock()
		l.records = l.records[:l.committed-l.base]
		l.next = l.committed
		l.open = false
		l.mu.Unlock()
	}
}

type fakeRecord struct {
	ts      int64
	payload []byte
	hidden  bool // occupies its offset but is no data record
}

// hide turns the record at off into a non-data record (reads skip it).
func (l *fakeLog) hide(off uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records[off-l.base].hidden = true
}

// fakeLog is one simulated log. Offsets [base, committed) are durable,
// [committed, next) written but not completed.
type fakeLog struct {
	mu        sync.Mutex
	records   []fakeRecord
	base      uint64
	next      uint64
	committed uint64
	open      bool
	disk      *fakeDisk
	retention int // EnforceRetention calls
}

func (l *fakeLog) EnforceRetention(time.Time) (int, error) { l.retention++; return 0, nil }

type fakeAppend struct {
	log         *fakeLog
	first, last uint64
	done        func(first, last uint64, err error)
	compact     bool // drop every record below first on completion
}

// fakeDisk is a coreDisk over a fakeStore. Appends wait in staged until
// Flush, then in submitted until Poll completes them (unless hold is set).
// Poll(block > 0) with nothing to complete waits for Wake (or block).
type fakeDisk struct {
	store     *fakeStore
	staged    []fakeAppend
	submitted []fakeAppend
	hold      bool
	syncs     int
	wakeCh    chan struct{}
	wakes     atomic.Int64
	closed    bool
}

func newFakeDisk(st *fakeStore) *fakeDisk {
	return &fakeDisk{store: st, wakeCh: make(chan struct{}, 1)}
}

func fakeLogKey(kind logKind, name StreamName, shard int) string {
	return fmt.Sprintf("%d/%s/%d", kind, name, shard)
}

func (d *fakeDisk) OpenLog(kind logKind, name StreamName, shard int) (shardLog, error) {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	key := fakeLogKey(kind, name, shard)
	l := d.store.logs[key]
	if l == nil {
		l = &fakeLog{}
		d.store.logs[key] = l
	}
	if l.open {
		return nil, fmt.Errorf("fake: log %s already open", key)
	}
	l.open, l.disk = true, d
	return l, nil
}

func (d *fakeDisk) RemoveLogs(name StreamName, shard int) error {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	delete(d.store.logs, fakeLogKey(logRecords, name, shard))
	delete(d.store.logs, fakeLogKey(logProducers, name, shard))
	return nil
}

func (d *fakeDisk) Flush() error {
	d.submitted = append(d.submitted, d.staged...)
	clear(d.staged)
	d.staged = d.staged[:0]
	return nil
}

func (d *fakeDisk) Poll(block time.Duration) error {
	if d.hold || len(d.submitted) == 0 {
		if block > 0 && !d.hold {
			timer := time.NewTimer(block)
			select {
			case <-d.wakeCh:
			case <-timer.C:
			}
			timer.Stop()
		}
		return nil
	}
	d.completeAll()
	return nil
}

// completeAll completes every submitted append in order.
func (d *fakeDisk) completeAll() {
	batch := d.submitted
	d.submitted = nil
	d.store.mu.Lock()
	err := d.store.completeErr
	d.store.mu.Unlock()
	for _, a := range batch {
		if err == nil {
			a.log.mu.Lock()
			a.log.committed = a.last + 1
			a.log.mu.Unlock()
			if a.compact {
				a.log.trim(a.first)
			}
		}
		a.done(a.first, a.last, err)
	}
}

func (d *fakeDisk) SyncAll() error { d.syncs++; return nil }

func (d *fakeDisk) Wake() error {
	d.wakes.Add(1)
	select {
	case d.wakeCh <- struct{}{}:
	default:
	}
	return nil
}

func (d *fakeDisk) Close() error { d.closed = true; return nil }

func (l *fakeLog) Append(payloads [][]byte, ts int64, done func(first, last uint64, err error)) error {
	l.disk.store.mu.Lock()
	err := l.disk.store.appendErr
	l.disk.store.mu.Unlock()
	if err != nil {
		return err
	}
	l.mu.Lock()
	first := l.next
	for _, p := range payloads {
		l.records = append(l.records, fakeRecord{ts: ts, payload: append([]byte(nil), p...)})
	}
	l.next += uint64(len(payloads))
	last := l.next - 1
	l.mu.Unlock()
	l.disk.staged = append(l.disk.staged, fakeAppend{log: l, first: first, last: last, done: done})
	return nil
}

func (l *fakeLog) Compact(live [][]byte, ts int64, done func(first, last uint64, err error)) error {
	if err := l.Append(live, ts, done); err != nil {
		return err
	}
	l.disk.staged[len(l.disk.staged)-1].compact = true
	return nil
}

func (l *fakeLog) NextOffset() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.next }
func (l *fakeLog) EarliestOffset() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base
}
func (l *fakeLog) CommittedOffset() uint64 { l.mu.Lock(); defer l.mu.Unlock(); return l.committed }

// trim drops records below off (simulated retention).
func (l *fakeLog) trim(off uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = l.records[off-l.base:]
	l.base = off
}

func (l *fakeLog) ReadCommitted(from uint64, maxBytes int, fn func(uint64, int64, []byte) bool) error {
	l.disk.store.mu.Lock()
	readErr := l.disk.store.readErr
	l.disk.store.mu.Unlock()
	if readErr != nil {
		return readErr
	}
	l.mu.Lock()
	if from < l.base {
		l.mu.Unlock()
		return &trimmedError{requested: from, oldest: l.base}
	}
	var recs []fakeRecord
	if from < l.committed {
		recs = append(recs, l.records[from-l.base:l.committed-l.base]...)
	}
	l.mu.Unlock()
	bytes := 0
	for i, r := range recs {
		if r.hidden {
			continue
		}
		if i > 0 && bytes+len(r.payload) > maxBytes {
			break
		}
		bytes += len(r.payload)
		if !fn(from+uint64(i), r.ts, r.payload) {
			break
		}
	}
	return nil
}

func (l *fakeLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.open {
		return errors.New("fake: close of a closed log")
	}
	l.open = false
	return nil
}

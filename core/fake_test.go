package core

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"felix/clock/clocktest"
	"felix/proto"
	"felix/seglog"
)

// fakeClock is the module's fake clock (clock/clocktest.Fake; the zero value starts at
// clocktest.Epoch, wall 1_700_000_000_000_000 µs).
type fakeClock = clocktest.Fake

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

// fakeRecord is one stored record, as a seglog record holds it.
type fakeRecord struct {
	ts        int64
	kind      seglog.RecordKind // a non-data record occupies its offset; ReadCommitted skips it
	publisher []byte            // nil when absent
	payload   []byte
}

// hide turns the record at off into a non-data record (reads skip it).
func (l *fakeLog) hide(off uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records[off-l.base].kind = seglog.KindCommitMarker
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
	epochs    []seglog.Epoch
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

// The fake store's names of a shard's logs, for tests that reach into it
// (each names one kind of shard: a key needs no ShardKind).
const (
	logRecords       = proto.LogStream
	logProducers     = proto.LogProducers
	logCacheRecords  = proto.LogCache
	logCacheCounters = proto.LogCounters
	logGroupCursors  = proto.LogGroupCursors
	logDeadLetters   = proto.LogDeadLetters
)

func fakeLogKey(log proto.ReplicaLog, name StreamName, shard int) string {
	return fmt.Sprintf("%d/%s/%d", log, name, shard)
}

// OpenLog opens the fake log addr names; options only matter on disk.
func (d *fakeDisk) OpenLog(addr LogAddr, _ logOptions) (shardLog, error) {
	if err := addr.Validate(); err != nil {
		return nil, err
	}
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	key := fakeLogKey(addr.Log, addr.Name, addr.Shard)
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

// RemoveLogs deletes every log of the shard (as the production disk removes
// the shard directory with its companions).
func (d *fakeDisk) RemoveLogs(ref ShardRef) error {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	for log := proto.LogStream; log <= proto.LogLast; log++ {
		if (LogAddr{Kind: ref.Kind, Name: ref.Name, Shard: ref.Shard, Log: log}).Validate() == nil {
			delete(d.store.logs, fakeLogKey(log, ref.Name, ref.Shard))
		}
	}
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
	if err := l.disk.store.appendError(); err != nil {
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

func (st *fakeStore) appendError() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.appendErr
}

// stageRecords stores recs verbatim at the tail and stages their completion.
func (l *fakeLog) stageRecords(recs []seglog.Record, done func(first, last uint64, err error)) {
	l.mu.Lock()
	first := l.next
	for i := range recs {
		r := &recs[i]
		fr := fakeRecord{ts: r.TimestampMicros, kind: r.Kind, payload: bytes.Clone(r.Payload)}
		if r.Publisher != nil {
			fr.publisher = append([]byte{}, r.Publisher...)
		}
		l.records = append(l.records, fr)
	}
	l.next += uint64(len(recs))
	last := l.next - 1
	l.mu.Unlock()
	l.disk.staged = append(l.disk.staged, fakeAppend{log: l, first: first, last: last, done: done})
}

// AppendRecord stores one record of any kind at NextOffset.
func (l *fakeLog) AppendRecord(r seglog.Record, done func(first, last uint64, err error)) error {
	if err := l.disk.store.appendError(); err != nil {
		return err
	}
	if r.Kind > seglog.KindCommitMarker || len(r.Publisher) > 255 {
		return fmt.Errorf("%w: record kind %d", seglog.ErrBadOptions, r.Kind)
	}
	l.stageRecords([]seglog.Record{r}, done)
	return nil
}

// AppendAt stores recs verbatim at first, which must be the tail, with
// consecutive offsets (seglog.Log.AppendAt's refusals).
func (l *fakeLog) AppendAt(first uint64, recs []seglog.Record, done func(first, last uint64, err error)) error {
	if err := l.disk.store.appendError(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return seglog.ErrEmptyBatch
	}
	tail := l.NextOffset()
	if first != tail {
		return &seglog.NotTailError{Tail: tail, Offset: first}
	}
	for i := range recs {
		if recs[i].Offset != first+uint64(i) {
			return &seglog.NotTailError{Tail: tail, Index: i, Offset: recs[i].Offset}
		}
		if recs[i].Kind > seglog.KindCommitMarker || len(recs[i].Publisher) > 255 {
			return fmt.Errorf("%w: record kind %d", seglog.ErrBadOptions, recs[i].Kind)
		}
	}
	l.stageRecords(recs, done)
	return nil
}

// idle reports seglog.ErrBusy while an append of l is staged or submitted.
func (l *fakeLog) idle() error {
	for _, a := range append(l.disk.staged[:len(l.disk.staged):len(l.disk.staged)], l.disk.submitted...) {
		if a.log == l {
			return seglog.ErrBusy
		}
	}
	return nil
}

// TruncateSuffix drops the records at and above off and the epochs starting
// there.
func (l *fakeLog) TruncateSuffix(off uint64) error {
	if err := l.idle(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if off >= l.next {
		return nil
	}
	if off < l.base {
		return &trimmedError{requested: off, oldest: l.base}
	}
	l.records = l.records[:off-l.base]
	l.next, l.committed = off, min(l.committed, off)
	keep := 0
	for keep < len(l.epochs) && l.epochs[keep].StartOffset < off {
		keep++
	}
	l.epochs = l.epochs[:keep]
	return nil
}

// Reset empties the log, epochs included, and restarts it at base.
func (l *fakeLog) Reset(base uint64) error {
	if err := l.idle(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records, l.epochs = nil, nil
	l.base, l.next, l.committed = base, base, base
	return nil
}

// DurableOffset is the committed offset: a completed fake append is durable.
func (l *fakeLog) DurableOffset() uint64 { return l.CommittedOffset() }

func (l *fakeLog) Epochs() []seglog.Epoch { return append([]seglog.Epoch(nil), l.epochs...) }

// AddEpoch appends to the history under seglog.Log.AddEpoch's rules.
func (l *fakeLog) AddEpoch(generation, start uint64) error {
	if n := len(l.epochs); n > 0 && (generation <= l.epochs[n-1].Generation || start < l.epochs[n-1].StartOffset) {
		return fmt.Errorf("%w: epoch (%d, %d) after %v", seglog.ErrBadOptions, generation, start, l.epochs[n-1])
	}
	l.epochs = append(l.epochs, seglog.Epoch{Generation: generation, StartOffset: start})
	return nil
}

func (l *fakeLog) Compact(live [][]byte, ts int64, done func(first, last uint64, err error)) error {
	if err := l.Append(live, ts, done); err != nil {
		return err
	}
	l.disk.staged[len(l.disk.staged)-1].compact = true
	return nil
}

// writeAfter, seglog and stateFile: the fake keeps no files and orders nothing (its appends
// complete on Poll in the order the core made them).
func (l *fakeLog) writeAfter(shardLog) error                  { return nil }
func (l *fakeLog) seglog() *seglog.Log                        { return nil }
func (l *fakeLog) stateFile(string) (seglog.FS, string, bool) { return nil, "", false }

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
	return l.read(from, maxBytes, false, func(r *seglog.Record) bool { return fn(r.Offset, r.TimestampMicros, r.Payload) })
}

// ReadRaw delivers every committed record from from, non-data ones too.
func (l *fakeLog) ReadRaw(from uint64, maxBytes int, fn func(r *seglog.Record) bool) error {
	return l.read(from, maxBytes, true, fn)
}

// read delivers the committed records from from (raw: of every kind; else
// the data records) up to about maxBytes of payload.
func (l *fakeLog) read(from uint64, maxBytes int, raw bool, fn func(r *seglog.Record) bool) error {
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
	n := 0
	for i, r := range recs {
		if r.kind != seglog.KindData && !raw {
			continue
		}
		if i > 0 && n+len(r.payload) > maxBytes {
			break
		}
		n += len(r.payload)
		rec := seglog.Record{Offset: from + uint64(i), TimestampMicros: r.ts, Kind: r.kind, Publisher: r.publisher, Payload: r.payload}
		if !fn(&rec) {
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

package seglog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sort"
	"sync"
)

// readCursor is the read state of one reader: its own read descriptors (one
// per segment, opened lazily) and one reusable buffer. Not goroutine-safe.
type readCursor struct {
	l     *Log
	files map[uint64]File
	buf   []byte
}

func newReadCursor(l *Log) *readCursor {
	return &readCursor{l: l, files: map[uint64]File{}}
}

func (c *readCursor) close() {
	for id, f := range c.files {
		f.Close()
		delete(c.files, id)
	}
}

// prune closes descriptors of segments wholly below from's segment (removed
// by retention or compaction, or simply passed).
func (c *readCursor) prune(from uint64) {
	if len(c.files) < 4 {
		return
	}
	v := c.l.view(from)
	for id, f := range c.files {
		if v == nil || id < v.id {
			f.Close()
			delete(c.files, id)
		}
	}
}

func (c *readCursor) file(id uint64, path string) (File, error) {
	if f, ok := c.files[id]; ok {
		return f, nil
	}
	f, err := c.l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, storageErr("open", path, err)
	}
	c.files[id] = f
	return f, nil
}

// segView is an immutable snapshot of what a reader needs from a segment.
type segView struct {
	id, base uint64
	version  uint16
	path     string
	index    []IndexEntry
	last     bool
}

// view returns the segment holding off (nil when off is below every segment).
func (l *Log) view(off uint64) *segView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > off }) - 1
	if i < 0 {
		return nil
	}
	s := l.segs[i]
	return &segView{id: s.id, base: s.base, version: s.version, path: s.path, index: s.index, last: i == len(l.segs)-1}
}

// read delivers data records [from, limit) in order, verifying checksums,
// until maxBytes of payload were delivered (at least one record), the record
// cap, or fn returns false. Non-data records (generation start, commit
// markers) take offsets but are not delivered.
func (c *readCursor) read(from, limit uint64, maxBytes int, fn func(off uint64, ts int64, payload []byte) bool) error {
	return c.readRecords(from, limit, maxBytes, false, func(r *Record) bool { return fn(r.Offset, r.TimestampMicros, r.Payload) })
}

// readRecords is read delivering whole data records (with a v6 publisher);
// raw delivers every stored record, generation starts and commit markers too.
func (c *readCursor) readRecords(from, limit uint64, maxBytes int, raw bool, fn func(r *Record) bool) error {
	var out Record // reused for every record: no per-record allocation
	l := c.l
	if oldest := l.earliest.Load(); from < oldest {
		return &TrimmedError{Requested: from, Oldest: oldest}
	}
	c.prune(from)
	delivered, bytes := 0, 0
	for from < limit {
		v := l.view(from)
		if v == nil {
			return &TrimmedError{Requested: from, Oldest: l.earliest.Load()}
		}
		f, err := c.file(v.id, v.path)
		if err != nil {
			return err
		}
		size, err := f.Size()
		if err != nil {
			return storageErr("stat", v.path, err)
		}
		pos, off := lookup(v.index, v.base, from)
		sc := newScanner(f, size, v.version, c.buf)
		sc.verifyFrom = from // records below from are not delivered: only their headers are checked
		stop := false
		r := sc.scanRecords(pos, off, func(_ int64, h *recordHeader, rec []byte) bool {
			if h.offset >= limit {
				stop = true
				return false
			}
			if h.offset < from {
				return true
			}
			from = h.offset + 1
			if h.kind != KindData && !raw {
				return true
			}
			pub, payload, _ := splitBody(rec[sc.hl:], h)
			delivered++
			bytes += len(payload)
			out = Record{Offset: h.offset, TimestampMicros: h.ts, Kind: h.kind, Publisher: pub, Payload: payload}
			if !fn(&out) || bytes >= maxBytes || delivered >= l.opts.MaxRecordsPerRead {
				stop = true
				return false
			}
			return true
		})
		c.buf = sc.buf
		if r.err != nil && r.next < limit {
			return locateOffset(r.err, l.dir, v.id, r.next)
		}
		if r.err != nil {
			return nil // bytes past the committed offset may still be in flight
		}
		if stop {
			return nil
		}
		if r.next > from {
			from = r.next
		}
		if v.last || r.next < from {
			return nil // the rest is not written yet
		}
		if nv := l.view(from); nv == nil || nv.id == v.id {
			return nil
		}
	}
	return nil
}

// Read delivers records from offset from up to CommittedOffset (core goroutine
// only): fn gets each data record's offset, timestamp (µs) and payload (valid
// only during the call). It stops after maxBytes of payload (always ≥ 1 record
// when any exists), after MaxRecordsPerRead records, or when fn returns false.
// from at or past the committed offset delivers nothing. Errors: *TrimmedError
// (from < EarliestOffset), *CorruptionError, ErrStorageFailed.
func (l *Log) Read(from uint64, maxBytes int, fn func(off uint64, ts int64, payload []byte) bool) error {
	if l.closed {
		return ErrClosed
	}
	return l.core.read(from, l.committed.Load(), maxBytes, fn)
}

// ReadRecords is Read delivering each data record whole: offset, timestamp,
// publisher (v6 records; nil otherwise) and payload. The *Record and its
// slices are valid only during the call.
func (l *Log) ReadRecords(from uint64, maxBytes int, fn func(r *Record) bool) error {
	if l.closed {
		return ErrClosed
	}
	return l.core.readRecords(from, l.committed.Load(), maxBytes, false, fn)
}

// ReadRaw is ReadRecords delivering every stored record as the log holds it,
// whatever its kind: offset, kind (KindData, KindGenerationStart,
// KindCommitMarker), timestamp (µs), publisher and payload — what replication
// ships and AppendAt stores verbatim. Same bounds (CommittedOffset), limits
// (maxBytes of payload, MaxRecordsPerRead) and errors as Read.
func (l *Log) ReadRaw(from uint64, maxBytes int, fn func(r *Record) bool) error {
	if l.closed {
		return ErrClosed
	}
	return l.core.readRecords(from, l.committed.Load(), maxBytes, true, fn)
}

// Reader reads a log from any goroutine, up to the log's CommittedOffset, with
// descriptors of its own (docs/architecture.md "History readers"). Its methods
// are goroutine-safe (serialized by a mutex). Close it when done.
type Reader struct {
	mu sync.Mutex
	c  *readCursor
}

// Reader returns a new Reader of l. Call from the core goroutine; use anywhere.
func (l *Log) Reader() *Reader { return &Reader{c: newReadCursor(l)} }

// Read is Log.Read for other goroutines: same bounds, limits, errors. fn runs
// on the caller; the payload slice is valid only during the call.
func (r *Reader) Read(from uint64, maxBytes int, fn func(off uint64, ts int64, payload []byte) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.read(from, r.c.l.committed.Load(), maxBytes, fn)
}

// ReadRecords is Log.ReadRecords for other goroutines.
func (r *Reader) ReadRecords(from uint64, maxBytes int, fn func(rec *Record) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.readRecords(from, r.c.l.committed.Load(), maxBytes, false, fn)
}

// ReadRaw is Log.ReadRaw for other goroutines.
func (r *Reader) ReadRaw(from uint64, maxBytes int, fn func(rec *Record) bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.c.readRecords(from, r.c.l.committed.Load(), maxBytes, true, fn)
}

// CommittedOffset is the log's committed offset (see Log.CommittedOffset).
func (r *Reader) CommittedOffset() uint64 { return r.c.l.committed.Load() }

// EarliestOffset is the log's earliest offset (see Log.EarliestOffset).
func (r *Reader) EarliestOffset() uint64 { return r.c.l.earliest.Load() }

// WaitCommitted blocks until the committed offset is above after (follow the
// tail), returning it; or returns ctx.Err().
func (r *Reader) WaitCommitted(ctx context.Context, after uint64) (uint64, error) {
	l := r.c.l
	for {
		if c := l.committed.Load(); c > after {
			return c, nil
		}
		l.notifyMu.Lock()
		if l.notify == nil {
			l.notify = make(chan struct{})
		}
		ch := l.notify
		l.notifyMu.Unlock()
		if c := l.committed.Load(); c > after {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// VerifySealed checksums every record of every sealed segment of the log
// (the active segment was scanned whole by the open), oldest first, through
// the Reader's own descriptors, and returns the first damage found: a
// *CorruptionError naming the log directory, the segment, the byte position
// and Offset (the first unreadable offset). Segments removed meanwhile
// (retention, compaction) are skipped. Other errors: ctx.Err() (checked
// between segments and every 4096 records), ErrStorageFailed. Any goroutine;
// reads of the same Reader wait while it runs.
func (r *Reader) VerifySealed(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.c
	for _, v := range c.l.sealedViews() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.verifySegment(ctx, v); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// sealedViews snapshots the log's sealed segments.
func (l *Log) sealedViews() []segView {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []segView
	for _, s := range l.segs {
		if s.sealed {
			out = append(out, segView{id: s.id, base: s.base, version: s.version, path: s.path})
		}
	}
	return out
}

// verifySegment scans one sealed segment whole, verifying every checksum.
func (c *readCursor) verifySegment(ctx context.Context, v segView) error {
	f, err := c.file(v.id, v.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	size, err := f.Size()
	if err != nil {
		return storageErr("stat", v.path, err)
	}
	sc := newScanner(f, size, v.version, c.buf)
	n := 0
	res := sc.scanRecords(SegmentHeaderLen, v.base, func(int64, *recordHeader, []byte) bool {
		n++
		return n%4096 != 0 || ctx.Err() == nil
	})
	c.buf = sc.buf
	if res.err != nil {
		return locateOffset(res.err, c.l.dir, v.id, res.next)
	}
	return nil
}

// locateOffset is locate for a read of segment id whose scan expected offset
// next at the damage: a *CorruptionError also gets Offset.
func locateOffset(err error, dir string, id uint64, next uint64) error {
	err = locate(err, dir, int64(id), 0)
	var ce *CorruptionError
	if errors.As(err, &ce) {
		ce.Offset = next
	}
	return err
}

// Close releases the Reader's descriptors.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.c.close()
	return nil
}

// wakeWaiters wakes WaitCommitted callers (no allocation when none waits).
func (l *Log) wakeWaiters() {
	l.notifyMu.Lock()
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
	l.notifyMu.Unlock()
}

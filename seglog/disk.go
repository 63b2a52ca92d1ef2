package seglog

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"felix/ring"

	"github.com/VictoriaMetrics/metrics"
)

// Disk drives every log of one core through one ring (docs/architecture.md,
// "seglog"). Only the goroutine that owns the ring calls its methods and the
// methods of its logs (Readers excepted). Append stages; Flush submits one write
// per log (plus, under on_commit, one linked fdatasync covering every append in
// it: group commit); Poll reaps completions and runs append callbacks.
//
// Files whose FS gives no descriptor (File.Fd() < 0, e.g. fault injection) are
// written synchronously through the File inside Flush, and their completions
// delivered by the next Poll.
type Disk struct {
	r      ring.Ring
	fs     FS
	logs   map[uint64]*Log
	nextID uint64
	// pending lists logs with unsubmitted units or a periodic sync to run.
	pending []*Log
	local   []localCompletion
	// localHead is the next d.local entry to deliver (runLocal may nest).
	localHead int
	comps     []ring.Completion
	inRing    int // ops submitted to the ring, not yet reaped
	prepared  int
	stats     diskStats
	// op is the one Op handed to Ring.Prepare (which copies it): a field, so
	// no per-write or per-fdatasync Op escapes to the heap.
	op ring.Op
}

type localCompletion struct {
	userData uint64
	res      int64
	err      error
}

type diskStats struct {
	appends      atomic.Uint64
	records      atomic.Uint64
	syncs        atomic.Uint64
	syncedAppend atomic.Uint64
	writes       atomic.Uint64
	writeBytes   atomic.Uint64
	writeNanos   atomic.Uint64
	syncNanos    atomic.Uint64
}

// Stats are cumulative counters of a Disk. Goroutine-safe to read via Disk.Stats.
type Stats struct {
	Appends       uint64        // Append calls that completed successfully
	Records       uint64        // records in them
	Writes        uint64        // write submissions
	WriteBytes    uint64        // bytes submitted for writing (O_DIRECT padding included)
	Fdatasyncs    uint64        // fdatasyncs completed
	SyncedAppends uint64        // appends completed by an on_commit fdatasync
	WriteTime     time.Duration // summed submit-to-completion time of writes
	FdatasyncTime time.Duration // summed submit-to-completion time of fdatasyncs
}

// GroupCommitFanIn is the mean number of appends one on_commit fdatasync
// completed (SyncedAppends / Fdatasyncs); 0 before the first.
func (s Stats) GroupCommitFanIn() float64 {
	if s.Fdatasyncs == 0 {
		return 0
	}
	return float64(s.SyncedAppends) / float64(s.Fdatasyncs)
}

// Stats returns the disk's counters. Goroutine-safe.
func (d *Disk) Stats() Stats {
	return Stats{Appends: d.stats.appends.Load(), Records: d.stats.records.Load(), Writes: d.stats.writes.Load(),
		WriteBytes: d.stats.writeBytes.Load(), Fdatasyncs: d.stats.syncs.Load(), SyncedAppends: d.stats.syncedAppend.Load(),
		WriteTime: time.Duration(d.stats.writeNanos.Load()), FdatasyncTime: time.Duration(d.stats.syncNanos.Load())}
}

// groupCommitFanIn is the histogram of appends completed per on_commit
// fdatasync, exported as felix_storage_group_commit_appends (issue 3 item 4).
var groupCommitFanIn = metrics.GetOrCreateHistogram("felix_storage_group_commit_appends")

// Operation tags in the low bits of a ring UserData; the log id is above them.
const (
	tagWrite    = 1
	tagSync     = 2 // on_commit fdatasync covering completed writes
	tagPeriodic = 3 // periodic fdatasync
	tagZero     = 4 // pre-zeroing write ahead of the data
	tagBits     = 3
)

// NewDisk returns a Disk using ring r (nil: every write is synchronous through
// the File, as with a descriptor-less FS) and file system fsys (nil: OSFS{}).
func NewDisk(r ring.Ring, fsys FS) *Disk {
	if fsys == nil {
		fsys = OSFS{}
	}
	return &Disk{r: r, fs: fsys, logs: map[uint64]*Log{}, comps: make([]ring.Completion, 256)}
}

// Backend names the write path: "uring" (O_DIRECT writes through io_uring),
// "syscall" (buffered writes through the ring's syscall backend) or "sync"
// (no ring).
func (d *Disk) Backend() string {
	if d.r == nil {
		return "sync"
	}
	return d.r.Backend()
}

// Open opens (recovering) or creates the log in opts.Dir (spec/storage-format.md §8).
// Errors: ErrBadOptions (also when this Disk already has the directory open), *CorruptionError (naming directory, segment and byte
// position; the log is not opened), ErrStorageFailed.
func (d *Disk) Open(opts Options) (*Log, error) {
	if err := opts.normalize(); err != nil {
		return nil, err
	}
	for _, o := range d.logs {
		if o.dir == opts.Dir {
			return nil, fmt.Errorf("%w: %s is already open", ErrBadOptions, opts.Dir)
		}
	}
	d.nextID++
	l := &Log{d: d, id: d.nextID, opts: opts, fs: d.fs, dir: opts.Dir, block: 4096}
	// O_DIRECT through io_uring only under on_commit: it wins when the device
	// must be reached anyway; periodic/none complete on a buffered pwrite
	// (docs/bench/seglog.md, "Write path choice").
	l.direct = d.r != nil && d.r.Backend() == ring.BackendUring && !opts.Buffered && opts.FsyncMode == FsyncOnCommit
	l.tail = make([]byte, l.block)
	l.core = newReadCursor(l)
	if err := l.openLog(); err != nil {
		l.freeAll()
		return nil, err
	}
	if err := l.loadEpochs(); err != nil {
		l.closeFiles()
		l.freeAll()
		return nil, err
	}
	l.syncDue = opts.Clock.MonoNanos() + int64(opts.FsyncInterval)
	d.logs[l.id] = l
	return l, nil
}

func (d *Disk) markPending(l *Log) {
	if !l.queued {
		l.queued = true
		d.pending = append(d.pending, l)
	}
}

// Flush submits, for every log with staged appends and no write in flight, one
// write of everything staged (one op; plus a linked fdatasync under on_commit),
// and the periodic fdatasyncs that are due. Errors: a ring submission failure
// (wrapped ErrStorageFailed); per-log I/O failures are reported to the appends'
// callbacks instead.
func (d *Disk) Flush() error {
	keep := d.pending[:0]
	for _, l := range d.pending {
		l.queued = false
		if l.closed || l.failed != nil {
			continue
		}
		if err := l.submit(); err != nil {
			return err
		}
		if l.hasWork() {
			l.queued = true
			keep = append(keep, l)
		}
	}
	clear(d.pending[len(keep):])
	d.pending = keep
	return d.submitRing()
}

func (d *Disk) submitRing() error {
	if d.prepared == 0 {
		return nil
	}
	d.inRing += d.prepared
	d.prepared = 0
	if err := d.r.Submit(); err != nil {
		return storageErr("submit", "ring", err)
	}
	return nil
}

// prepare queues op on the ring, submitting first when the queue is full.
// op is passed by value and copied into d.op, so callers' Ops stay on the stack.
func (d *Disk) prepare(op ring.Op) error {
	d.op = op
	err := d.r.Prepare(&d.op)
	if errors.Is(err, ring.ErrQueueFull) {
		if err = d.submitRing(); err == nil {
			err = d.r.Prepare(&d.op)
		}
	}
	d.op = ring.Op{} // drop the buffer reference
	if err != nil {
		return err
	}
	d.prepared++
	return nil
}

// Poll reaps completions and runs append callbacks on the caller, then
// submits the follow-up work they enable (the fdatasync after a write under
// on_commit, the next staged write). It waits up to block for a first
// completion when I/O is in flight on the ring (0: never waits). Errors: a
// ring failure (wrapped ErrStorageFailed); I/O failures go to the callbacks.
func (d *Disk) Poll(block time.Duration) error {
	progressed := d.runLocal()
	if d.r != nil && d.inRing > 0 {
		min := 0
		if block > 0 && !progressed {
			min = 1
		}
		n, err := d.r.Wait(d.comps, min, block)
		if err != nil {
			return storageErr("wait", "ring", err)
		}
		d.inRing -= n
		for _, c := range d.comps[:n] {
			d.complete(c.UserData, int64(c.Res), c.Err())
		}
	}
	d.checkPeriodic()
	for i := 0; i < 8 && len(d.pending) > 0; i++ {
		if err := d.Flush(); err != nil {
			return err
		}
		if !d.runLocal() {
			break
		}
	}
	return nil
}

// runLocal delivers the completions of synchronous (descriptor-less) I/O.
func (d *Disk) runLocal() bool {
	if len(d.local) == 0 {
		return false
	}
	for d.localHead < len(d.local) {
		c := d.local[d.localHead]
		d.local[d.localHead] = localCompletion{}
		d.localHead++
		d.complete(c.userData, c.res, c.err)
	}
	d.local, d.localHead = d.local[:0], 0 // keep the backing array
	return true
}

// Idle reports whether no write or fdatasync is staged or in flight on any log.
func (d *Disk) Idle() bool {
	if d.inRing > 0 || len(d.local) > d.localHead {
		return false
	}
	for _, l := range d.logs {
		if len(l.units) > 0 || l.syncInFlight || l.inflightWrite != nil || l.zeroing() || l.sealPending != nil {
			return false
		}
	}
	return true
}

func (d *Disk) checkPeriodic() {
	for _, l := range d.logs {
		if l.opts.FsyncMode != FsyncPeriodic {
			continue
		}
		if l.periodicOwed() {
			d.markPending(l)
		}
	}
}

func (d *Disk) complete(userData uint64, res int64, err error) {
	l := d.logs[userData>>tagBits]
	if l == nil {
		return
	}
	switch userData & (1<<tagBits - 1) {
	case tagWrite, tagSync:
		l.opDone(userData&(1<<tagBits-1), res, err)
	case tagZero:
		l.zeroDone(res, err)
	case tagPeriodic:
		l.periodicDone(err)
	}
	l.runSyncNow()
}

// drain runs Flush and Poll until l has nothing staged or in flight. Used by
// operations that need an idle log (Close); runs other logs' callbacks too.
func (d *Disk) drain(l *Log) error {
	for l.failed == nil && (len(l.units) > 0 || l.syncInFlight || l.zeroing() || l.sealPending != nil) {
		d.markPending(l)
		if err := d.Flush(); err != nil {
			return err
		}
		if err := d.Poll(time.Second); err != nil {
			return err
		}
	}
	return l.failed
}

// Close closes every open log (draining their appends).
func (d *Disk) Close() error {
	var first error
	for _, l := range d.logs {
		if err := l.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runWrite performs a write synchronously through the File (no ring fd).
func runWrite(f File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}

func (d *Disk) userData(l *Log, tag uint64) uint64 { return l.id<<tagBits | tag }

func shortErr(op string, got, want int) error {
	return fmt.Errorf("short %s: %d of %d bytes: %w", op, got, want, io.ErrShortWrite)
}

package core

import (
	"errors"
	"fmt"
	"time"

	"felix/ring"
	"felix/seglog"
)

// companionProducers is the sub-directory of a stream shard holding its
// idempotent-producer key log (producer.go; spec/storage-format.md §6
// companion logs).
const companionProducers seglog.Companion = "producers"

// seglogDisk is the production coreDisk: the core's ring and a seglog.Disk on
// it. Shard logs live at seglog.ShardDir(DataDir, {stream, tenant, ns,
// stream, shard}); the producer log in its "producers" companion directory.
type seglogDisk struct {
	root      string
	opts      seglog.Options
	retention seglog.Options // RetentionBytes and RetentionAge for record logs
	ring      ring.Ring
	disk      *seglog.Disk
	fs        seglog.FS
	reaps     [4]ring.Completion
	// optsFor and streamOpts: the stream whose shard is being opened and its
	// own log options (setStreamOptions); nil between opens.
	optsFor    StreamName
	streamOpts *streamLogOptions
}

// testIOBackend is the test seam of Config.IOBackend: the backend of an
// engine whose Config leaves IOBackend empty. Only core's own tests set it
// (from FELIX_IO_BACKEND, in a _test.go file, so the forced syscall and uring
// passes reach every ring); otherwise it is "" (auto).
var testIOBackend string

// newSeglogDisk creates the ring and disk of one core; call it on the core
// goroutine (the ring's owner).
func newSeglogDisk(cfg *Config, _ int) (coreDisk, error) {
	r, err := ring.New(ring.Options{Backend: cfg.IOBackend})
	if err != nil {
		return nil, fmt.Errorf("core: ring: %w", err)
	}
	mode := seglog.FsyncPeriodic
	switch cfg.Fsync {
	case FsyncOnCommit:
		mode = seglog.FsyncOnCommit
	case FsyncNone:
		mode = seglog.FsyncNone
	}
	var fs seglog.FS = seglog.OSFS{}
	if cfg.fs != nil {
		fs = cfg.fs
	}
	return &seglogDisk{
		root:      cfg.DataDir,
		opts:      seglog.Options{FsyncMode: mode, FsyncInterval: cfg.FsyncInterval, SegmentBytes: cfg.SegmentBytes},
		retention: seglog.Options{RetentionBytes: cfg.RetentionBytes, RetentionAge: cfg.RetentionAge},
		ring:      r,
		disk:      seglog.NewDisk(r, fs),
		fs:        fs,
	}, nil
}

func (d *seglogDisk) shardDir(name StreamName, shard int) string {
	return seglog.ShardDir(d.root, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: name.Tenant,
		Namespace: name.Namespace, Name: name.Stream, Shard: uint32(shard)})
}

// setStreamOptions sets (o != nil) or clears the options of the stream whose
// shard opens next (streamOptionsDisk).
func (d *seglogDisk) setStreamOptions(name StreamName, o *streamLogOptions) {
	d.optsFor, d.streamOpts = name, o
}

// OpenLog opens one log of a shard. A stream's record log takes the engine's
// retention unless the stream's own options (setStreamOptions) set a bound,
// which then wins, bound by bound; a stream with syncOnCommit opens its
// record and producer-key logs with fsync on_commit.
func (d *seglogDisk) OpenLog(kind logKind, name StreamName, shard int) (shardLog, error) {
	opts := d.opts
	opts.Dir = d.shardDir(name, shard)
	var own *streamLogOptions
	if d.streamOpts != nil && d.optsFor == name {
		own = d.streamOpts
	}
	switch kind {
	case logProducers: // bounded by compaction instead (producer.go)
		opts.Dir = seglog.CompanionDir(opts.Dir, companionProducers)
		// A plain pwrite: the record log's writes wait for this log's
		// (writeAfter), and a buffered write lands inside the same Flush.
		opts.Buffered = true
		if own != nil && own.syncOnCommit {
			opts.FsyncMode = seglog.FsyncOnCommit
		}
	case logRecords:
		opts.RetentionBytes, opts.RetentionAge = d.retention.RetentionBytes, d.retention.RetentionAge
		if own != nil {
			applyStreamOptions(&opts, own)
		}
	case logGroupCursors: // bounded by compaction (group_shard.go)
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionGroups)
	case logDeadLetters:
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionDeadLetters)
	}
	l, err := d.disk.Open(opts)
	if err != nil {
		return nil, err
	}
	return &seglogLog{log: l, reader: l.Reader()}, nil
}

// applyStreamOptions lays a stream's own record-log options over the
// engine's: each retention bound set (> 0) replaces the engine's, and
// syncOnCommit turns on fsync on_commit.
func applyStreamOptions(opts *seglog.Options, own *streamLogOptions) {
	if own.retentionBytes > 0 {
		opts.RetentionBytes = own.retentionBytes
	}
	if own.retentionAge > 0 {
		opts.RetentionAge = own.retentionAge
	}
	if own.syncOnCommit {
		opts.FsyncMode = seglog.FsyncOnCommit
	}
}

func (d *seglogDisk) RemoveLogs(name StreamName, shard int) error {
	return d.fs.RemoveAll(d.shardDir(name, shard))
}

func (d *seglogDisk) Flush() error { return d.disk.Flush() }

// Poll waits in the disk when I/O is in flight; when none is, it waits on
// the ring itself, where only a Wake can arrive.
func (d *seglogDisk) Poll(block time.Duration) error {
	if block > 0 && d.disk.Idle() {
		if _, err := d.ring.Wait(d.reaps[:], 1, block); err != nil {
			return err
		}
		block = 0
	}
	return d.disk.Poll(block)
}

// SyncAll is a no-op: seglog runs the periodic fdatasync itself inside Poll
// once FsyncInterval passed; the core's periodic timer only makes sure the
// core wakes to call Poll.
func (d *seglogDisk) SyncAll() error { return nil }
func (d *seglogDisk) Wake() error    { return d.ring.Wake() }
func (d *seglogDisk) Close() error   { return errors.Join(d.disk.Close(), d.ring.Close()) }

// seglogLog adapts a seglog.Log; ReadCommitted goes through a Reader so that
// subscribers can page history from their own goroutines.
type seglogLog struct {
	log    *seglog.Log
	reader *seglog.Reader
}

func (l *seglogLog) Append(payloads [][]byte, ts int64, done func(first, last uint64, err error)) error {
	return l.log.Append(payloads, ts, done)
}

// writeAfter orders this log's writes after dep's (seglog.Log.WriteAfter):
// a stream shard's records after its producer keys (producer.go).
func (l *seglogLog) writeAfter(dep shardLog) error {
	d, ok := dep.(*seglogLog)
	if !ok {
		return fmt.Errorf("core: write order across disks: %T", dep)
	}
	return l.log.WriteAfter(d.log)
}

// TruncateSuffix drops every record at or above off (seglog.Log.TruncateSuffix).
func (l *seglogLog) TruncateSuffix(off uint64) error { return l.log.TruncateSuffix(off) }

// EnforceRetention drops head segments per the log's retention options.
func (l *seglogLog) EnforceRetention(now time.Time) (int, error) { return l.log.EnforceRetention(now) }

func (l *seglogLog) NextOffset() uint64      { return l.log.NextOffset() }
func (l *seglogLog) EarliestOffset() uint64  { return l.log.EarliestOffset() }
func (l *seglogLog) CommittedOffset() uint64 { return l.log.CommittedOffset() }

func (l *seglogLog) ReadCommitted(from uint64, maxBytes int, fn func(uint64, int64, []byte) bool) error {
	err := l.reader.Read(from, maxBytes, fn)
	var trimmed *seglog.TrimmedError
	if errors.As(err, &trimmed) {
		return &trimmedError{requested: trimmed.Requested, oldest: trimmed.Oldest}
	}
	return err
}

// Compact appends live at the tail and, once that is durable, drops every
// older record (seglog.Log.Compact): the producer log (producer.go), cache
// logs (cache_shard.go) and group logs (group_shard.go) compact through it.
func (l *seglogLog) Compact(live [][]byte, ts int64, done func(first, last uint64, err error)) error {
	return l.log.Compact(live, ts, done)
}

// Every production log compacts and enforces retention, and the production
// disk takes per-stream log options.
var (
	_ logCompactor      = (*seglogLog)(nil)
	_ logRetainer       = (*seglogLog)(nil)
	_ streamOptionsDisk = (*seglogDisk)(nil)
)

func (l *seglogLog) Close() error {
	return errors.Join(l.reader.Close(), l.log.Close())
}

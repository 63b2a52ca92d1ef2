package core

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"felix/proto"
	"felix/ring"
	"felix/seglog"
)

// companionProducers is the sub-directory of a stream shard holding its
// idempotent-producer key log (producer.go; spec/storage-format.md §6
// companion logs).
const companionProducers seglog.Companion = "producers"

// seglogDisk is the production coreDisk: the core's ring and a seglog.Disk on
// it. A stream shard's logs live at seglog.ShardDir(DataDir, {stream, tenant,
// ns, stream, shard}) (the record log) and its companion directories
// "producers", "groups" and "dead-letters"; a cache shard's at
// seglog.ShardDir(DataDir, {cache, tenant, ns, cache, shard}) and its
// "counters" companion (spec/storage-format.md §6).
type seglogDisk struct {
	root      string
	opts      seglog.Options
	retention seglog.Options // RetentionBytes and RetentionAge for record logs
	ring      ring.Ring
	disk      *seglog.Disk
	fs        seglog.FS
	reaps     [4]ring.Completion
	clean     bool        // Config.PreviousRunClean
	cutTail   bool        // Config.RepairDamagedTail
	opened    *openedLogs // Config.opened, shared by every core's disk (runclean.go)
	log       *slog.Logger
	recovered recoveryMetrics
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
	set, logger := cfg.Metrics, cfg.Logger
	if set == nil { // a Config not normalized (tests open a disk alone)
		set = metrics.NewSet()
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &seglogDisk{
		root:      cfg.DataDir,
		opts:      seglog.Options{FsyncMode: mode, FsyncInterval: cfg.FsyncInterval, SegmentBytes: cfg.SegmentBytes, Clock: cfg.Clock},
		retention: seglog.Options{RetentionBytes: cfg.RetentionBytes, RetentionAge: cfg.RetentionAge},
		ring:      r,
		disk:      seglog.NewDisk(r, fs),
		fs:        fs,
		clean:     cfg.PreviousRunClean,
		cutTail:   cfg.RepairDamagedTail,
		opened:    cfg.opened,
		log:       logger,
		recovered: newRecoveryMetrics(set),
	}, nil
}

// shardDir is the directory of ref's shard: its main log's, under which the
// companion logs live.
func (d *seglogDisk) shardDir(ref ShardRef) string {
	kind := seglog.ShardStream
	if ref.Kind == ShardCache {
		kind = seglog.ShardCache
	}
	return seglog.ShardDir(d.root, seglog.ShardKey{Kind: kind, Tenant: ref.Name.Tenant,
		Namespace: ref.Name.Namespace, Name: ref.Name.Stream, Shard: uint32(ref.Shard)})
}

// OpenLog opens the log addr names. A stream's record log takes the engine's
// retention unless own sets a bound, which then wins, bound by bound; own's
// syncOnCommit opens the record and producer-key logs with fsync on_commit.
// The other logs take the engine's options. An invalid addr opens nothing.
func (d *seglogDisk) OpenLog(addr LogAddr, own logOptions) (shardLog, error) {
	if err := addr.Validate(); err != nil {
		return nil, err
	}
	opts := d.opts
	opts.Dir = d.shardDir(addr.Ref())
	switch addr.Log {
	case proto.LogStream:
		opts.RetentionBytes, opts.RetentionAge = d.retention.RetentionBytes, d.retention.RetentionAge
		applyStreamOptions(&opts, own)
	case proto.LogProducers: // bounded by compaction instead (producer.go)
		opts.Dir = seglog.CompanionDir(opts.Dir, companionProducers)
		// A plain pwrite: the record log's writes wait for this log's
		// (writeAfter), and a buffered write lands inside the same Flush.
		opts.Buffered = true
		if own.syncOnCommit {
			opts.FsyncMode = seglog.FsyncOnCommit
		}
	case proto.LogGroupCursors: // bounded by compaction (group_shard.go)
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionGroups)
	case proto.LogDeadLetters:
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionDeadLetters)
	case proto.LogCounters: // the cache log stays in the shard directory
		opts.Dir = seglog.CompanionDir(opts.Dir, seglog.CompanionCounters)
	}
	first := d.opened.first(opts.Dir)
	opts.PreviousRunClean = d.clean && first
	opts.RepairChecksumTail = d.cutTail && first && opts.FsyncMode != seglog.FsyncOnCommit
	l, err := d.disk.Open(opts)
	if err != nil {
		return nil, err
	}
	warnTornTail(d.log, d.recovered, opts.Dir, l.Recovery())
	return &seglogLog{log: l, reader: l.Reader(), fs: d.fs}, nil
}

// applyStreamOptions lays a stream's own record-log options over the
// engine's: each retention bound set (> 0) replaces the engine's, and
// syncOnCommit turns on fsync on_commit.
func applyStreamOptions(opts *seglog.Options, own logOptions) {
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

// RemoveLogs deletes the shard's directory, its companion logs with it.
func (d *seglogDisk) RemoveLogs(ref ShardRef) error {
	return d.fs.RemoveAll(d.shardDir(ref))
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
	fs     seglog.FS // the disk's file seam, for the state files beside the log
}

func (l *seglogLog) Append(payloads [][]byte, ts int64, done func(first, last uint64, err error)) error {
	return l.log.Append(payloads, ts, done)
}

// writeAfter orders this log's writes after dep's (seglog.Log.WriteAfter):
// a stream shard's records after its producer keys (producer.go).
func (l *seglogLog) writeAfter(dep shardLog) error {
	d := dep.seglog()
	if d == nil {
		return fmt.Errorf("core: write order across disks: %T", dep)
	}
	return l.log.WriteAfter(d)
}

func (l *seglogLog) seglog() *seglog.Log { return l.log }

func (l *seglogLog) stateFile(name string) (seglog.FS, string, bool) {
	return l.fs, filepath.Join(l.log.Dir(), name), true
}

// TruncateSuffix drops every record at or above off (seglog.Log.TruncateSuffix).
func (l *seglogLog) TruncateSuffix(off uint64) error { return l.log.TruncateSuffix(off) }

// Reset restarts the log empty at base (seglog.Log.Reset).
func (l *seglogLog) Reset(base uint64) error { return l.log.Reset(base) }

func (l *seglogLog) DurableOffset() uint64  { return l.log.DurableOffset() }
func (l *seglogLog) Epochs() []seglog.Epoch { return l.log.Epochs() }
func (l *seglogLog) AddEpoch(generation, start uint64) error {
	return l.log.AddEpoch(generation, start)
}

func (l *seglogLog) AppendRecord(r seglog.Record, done func(first, last uint64, err error)) error {
	return l.log.AppendRecord(r, done)
}

// AppendAt stores recs verbatim at the tail (seglog.Log.AppendAt).
func (l *seglogLog) AppendAt(first uint64, recs []seglog.Record, done func(first, last uint64, err error)) error {
	return l.log.AppendAt(first, recs, done)
}

// ReadRaw reads every stored record through the Reader (goroutine-safe, as
// ReadCommitted).
func (l *seglogLog) ReadRaw(from uint64, maxBytes int, fn func(r *seglog.Record) bool) error {
	return asTrimmedError(l.reader.ReadRaw(from, maxBytes, fn))
}

// EnforceRetention drops head segments per the log's retention options.
func (l *seglogLog) EnforceRetention(now time.Time) (int, error) { return l.log.EnforceRetention(now) }

func (l *seglogLog) NextOffset() uint64      { return l.log.NextOffset() }
func (l *seglogLog) EarliestOffset() uint64  { return l.log.EarliestOffset() }
func (l *seglogLog) CommittedOffset() uint64 { return l.log.CommittedOffset() }

func (l *seglogLog) ReadCommitted(from uint64, maxBytes int, fn func(uint64, int64, []byte) bool) error {
	return asTrimmedError(l.reader.Read(from, maxBytes, fn))
}

// asTrimmedError turns a seglog *TrimmedError into core's trimmedError.
func asTrimmedError(err error) error {
	var t *seglog.TrimmedError
	if errors.As(err, &t) {
		return &trimmedError{requested: t.Requested, oldest: t.Oldest}
	}
	return err
}

// Compact appends live at the tail and, once that is durable, drops every
// older record (seglog.Log.Compact): the producer log (producer.go), cache
// logs (cache_shard.go) and group logs (group_shard.go) compact through it.
func (l *seglogLog) Compact(live [][]byte, ts int64, done func(first, last uint64, err error)) error {
	return l.log.Compact(live, ts, done)
}

// Every production log enforces retention.
var _ logRetainer = (*seglogLog)(nil)

func (l *seglogLog) Close() error {
	return errors.Join(l.reader.Close(), l.log.Close())
}

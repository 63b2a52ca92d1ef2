package seglog

import (
	"fmt"
	"strings"
	"time"

	"felix/clock"
)

// FsyncMode is FELIX_DURABLE_FSYNC_MODE (spec/config.md; spec/storage-format.md §5).
type FsyncMode uint8

// Fsync modes.
const (
	// FsyncPeriodic (the config default): appends complete once written to the
	// file; an fdatasync runs every FsyncInterval while writes are unsynced.
	FsyncPeriodic FsyncMode = iota
	// FsyncOnCommit: an append completes only after the fdatasync covering it
	// completed; one fdatasync covers every append written before it (group commit).
	FsyncOnCommit
	// FsyncNone: appends complete once written; data reaches the disk when the
	// kernel writes it back, and at seal and Close.
	FsyncNone
)

// String returns "periodic", "on_commit" or "none".
func (m FsyncMode) String() string {
	switch m {
	case FsyncOnCommit:
		return "on_commit"
	case FsyncNone:
		return "none"
	}
	return "periodic"
}

// ParseFsyncMode parses FELIX_DURABLE_FSYNC_MODE: "none"/"off", "periodic",
// "on_commit"/"on-commit"/"commit" (spec/config.md). Other values: ErrBadOptions.
func ParseFsyncMode(s string) (FsyncMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "off":
		return FsyncNone, nil
	case "", "periodic":
		return FsyncPeriodic, nil
	case "on_commit", "on-commit", "commit":
		return FsyncOnCommit, nil
	}
	return 0, fmt.Errorf("%w: FELIX_DURABLE_FSYNC_MODE %q (want none, periodic or on_commit)", ErrBadOptions, s)
}

// Defaults (spec/config.md, FELIX_DURABLE_*).
const (
	DefaultSegmentBytes      = 256 << 20
	DefaultIndexSpacingBytes = 4096
	DefaultFsyncInterval     = 250 * time.Millisecond
	DefaultMaxRecordsPerRead = 10000
	// DefaultPreallocateStepBytes is how far ahead of the write position a
	// segment's blocks are reserved with fallocate(KEEP_SIZE): appends rarely
	// allocate, yet an idle log (a companion log holding a few records) costs
	// one step of disk, not a whole segment.
	DefaultPreallocateStepBytes = 8 << 20
)

// Options configure one log (Disk.Open). Zero fields take the defaults above.
type Options struct {
	Dir               string        // the log's directory (ShardDir or CompanionDir); created if missing
	FsyncMode         FsyncMode     // FELIX_DURABLE_FSYNC_MODE
	FsyncInterval     time.Duration // FELIX_DURABLE_FSYNC_INTERVAL_MS under periodic; default 250 ms
	SegmentBytes      int64         // rollover size in bytes (FELIX_DURABLE_SEGMENT_BYTES), ≥ 4096
	IndexSpacingBytes int64         // sparse index interval in bytes, > 0
	MaxRecordsPerRead int           // record cap per Read call
	NoPreallocate     bool          // FELIX_DURABLE_PREALLOCATE=false: skip fallocate(KEEP_SIZE)
	// PreallocateStepBytes is the reservation step in bytes (default
	// DefaultPreallocateStepBytes, capped at SegmentBytes): blocks are reserved
	// up to the next step boundary past the staged end, never past SegmentBytes
	// unless a single oversized batch needs it.
	PreallocateStepBytes int64
	VerifyAllOnOpen      bool // checksum every record of every segment at open
	// RepairChecksumTail allows open to truncate a damaged tail of the newest
	// segment that is not a provable torn write (spec §8 repair_checksum_tail).
	RepairChecksumTail bool
	// PreviousRunClean is the storage root's run-state verdict for this log's
	// files: the previous run stopped cleanly (ReadRunState CleanStop; spec §7)
	// and this is the log's first open in this run. Close truncates the newest
	// segment to its exact data, so a zero gap followed by data
	// (CorruptDataAfterEnd) cannot be a torn write: open refuses it instead of
	// truncating (docs/storage-format.md "Recovery"). Other torn verdicts are
	// still repaired (a log that failed mid-run closes without its trim).
	// False (a crash, no run-state, a reopen within the run) repairs the gap.
	PreviousRunClean bool
	RetentionBytes   int64         // 0 = off; keep at most this many bytes (whole sealed segments)
	RetentionAge     time.Duration // 0 = off; drop sealed segments whose newest record is older
	// BaseOffset places a new, empty log at this offset (replication bootstrap,
	// seeds/internal-protocol.txt "Bootstrapping a follower"). Ignored when the
	// directory already holds segments.
	BaseOffset uint64
	// PrezeroBytes, when > 0, writes zeros this far ahead of the data in the
	// active segment of an on_commit log (in chunks of at most 4 MiB), so that
	// fdatasync finds blocks already written instead of unwritten extents
	// (NOTES.md: ~90 µs instead of ~230 µs). Costs write bandwidth equal to
	// the data. 0 = off. See docs/bench/seglog.md for the measured choice.
	PrezeroBytes int64
	// Buffered forces buffered writes under on_commit on the io_uring backend
	// (whose default there is O_DIRECT). Periodic and none always write
	// buffered, with pwrite (docs/storage-format.md "Writes").
	Buffered bool
	// Clock is the log's time (felix/clock; wall time for record timestamps
	// is the caller's): it stamps segment headers, paces periodic fsync and
	// times writes and fdatasyncs for Stats. nil = clock.Real(). The engine
	// passes its Config.Clock; tests pass clock/clocktest.Fake.
	Clock clock.Clock
}

func (o *Options) normalize() error {
	if o.Dir == "" {
		return fmt.Errorf("%w: Dir is empty", ErrBadOptions)
	}
	if o.FsyncMode > FsyncNone {
		return fmt.Errorf("%w: FsyncMode %d", ErrBadOptions, o.FsyncMode)
	}
	if o.FsyncInterval == 0 {
		o.FsyncInterval = DefaultFsyncInterval
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.IndexSpacingBytes == 0 {
		o.IndexSpacingBytes = DefaultIndexSpacingBytes
	}
	if o.PreallocateStepBytes <= 0 {
		o.PreallocateStepBytes = DefaultPreallocateStepBytes
	}
	if o.MaxRecordsPerRead == 0 {
		o.MaxRecordsPerRead = DefaultMaxRecordsPerRead
	}
	switch {
	case o.FsyncInterval < 0:
		return fmt.Errorf("%w: FsyncInterval %v", ErrBadOptions, o.FsyncInterval)
	case o.SegmentBytes < 4096:
		return fmt.Errorf("%w: SegmentBytes %d < 4096", ErrBadOptions, o.SegmentBytes)
	case o.IndexSpacingBytes < 0 || o.MaxRecordsPerRead < 0 || o.RetentionBytes < 0 || o.RetentionAge < 0:
		return fmt.Errorf("%w: negative spacing, read cap or retention", ErrBadOptions)
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	return nil
}

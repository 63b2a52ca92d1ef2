package ring

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// DiskLimits are the limits of the disk under dir as seen through one Ring
// (design/NOTES.md, "Disk"): the ceilings seglog's figures are compared with.
type DiskLimits struct {
	Backend string // the Ring's backend
	Dir     string // directory measured
	Direct  bool   // writes used O_DIRECT (false: the filesystem refused it)
	Tmpfs   bool   // dir is on tmpfs: figures say nothing about a disk

	SeqWriteQD1 float64 // sequential 1 MiB writes, queue depth 1, bytes/s
	SeqWriteQD8 float64 // sequential 1 MiB writes, queue depth 8, bytes/s

	SyncPerSec   float64       // 4 KiB write then fdatasync at depth 1, rounds/s (blocks written before)
	FdatasyncP50 time.Duration // median of those write+fdatasync rounds
	FdatasyncP99 time.Duration // 99th percentile of those rounds
}

const (
	seqChunk      = 1 << 20   // bytes per sequential write
	seqRegion     = 256 << 20 // bytes the sequential writes cycle over
	syncChunk     = 4096      // bytes per synced write
	syncRegion    = 16 << 20  // bytes the synced writes cycle over
	maxSyncSample = 1 << 16   // latency samples kept
)

// MeasureDisk measures, with r, the disk limits of the filesystem holding
// dir, spending about d in total (half on sequential writes, half on
// write+fdatasync). It creates and removes a temporary file of up to 256 MiB
// in dir. r must have no ops in flight and Entries >= 8; it is left the same.
// Call it from the goroutine that owns r. Errors: a failed file or ring
// operation, wrapped.
func MeasureDisk(r Ring, dir string, d time.Duration) (DiskLimits, error) {
	lim := DiskLimits{Backend: r.Backend(), Dir: dir, Tmpfs: IsTmpfs(dir)}
	f, direct, err := openScratch(dir)
	if err != nil {
		return lim, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	lim.Direct = direct
	buf, err := AlignedBuffer(8 * seqChunk)
	if err != nil {
		return lim, err
	}
	defer FreeAligned(buf)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	fd := int32(f.Fd())
	if lim.SeqWriteQD1, err = seqWrite(r, fd, buf, 1, d/4, 0, seqRegion); err != nil {
		return lim, err
	}
	if lim.SeqWriteQD8, err = seqWrite(r, fd, buf, 8, d/4, 0, seqRegion); err != nil {
		return lim, err
	}
	if err := prewrite(r, fd, buf[:seqChunk]); err != nil {
		return lim, err
	}
	samples := make([]time.Duration, 0, maxSyncSample)
	if samples, err = syncWrites(r, fd, buf[:syncChunk], d/2, samples); err != nil {
		return lim, err
	}
	lim.SyncPerSec, lim.FdatasyncP50, lim.FdatasyncP99 = syncStats(samples)
	return lim, nil
}

// syncStats returns rounds per second, p50 and p99 of samples (sorted here).
func syncStats(samples []time.Duration) (float64, time.Duration, time.Duration) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	slices.Sort(samples)
	var total time.Duration
	for _, s := range samples {
		total += s
	}
	return float64(len(samples)) / total.Seconds(), samples[len(samples)/2], samples[len(samples)*99/100]
}

// prewrite writes the first 16 MiB of fd once and syncs it, so later synced
// writes land on blocks written before (design/NOTES.md: half the flush cost
// of fresh, unwritten extents).
func prewrite(r Ring, fd int32, chunk []byte) error {
	for off := int64(0); off < syncRegion; off += int64(len(chunk)) {
		if err := runOne(r, &Op{Code: OpWrite, FD: fd, Buf: chunk, Off: off}); err != nil {
			return err
		}
	}
	return runOne(r, &Op{Code: OpFdatasync, FD: fd})
}

// runOne prepares op, waits for its completion and returns its error.
func runOne(r Ring, op *Op) error {
	if err := r.Prepare(op); err != nil {
		return err
	}
	var dst [1]Completion
	for {
		n, err := r.Wait(dst[:], 1, 0)
		if err != nil {
			return err
		}
		if n == 1 {
			if dst[0].Res < 0 || ((op.Code == OpWrite || op.Code == OpRead) && int(dst[0].Res) != len(op.Buf)) {
				return fmt.Errorf("ring: measure disk: %s: %w", op.Code, resultErr(dst[0]))
			}
			return nil
		}
	}
}

// openScratch creates a temporary file in dir, with O_DIRECT when the
// filesystem accepts it.
func openScratch(dir string) (*os.File, bool, error) {
	f, err := os.CreateTemp(dir, "felix-disk-*")
	if err != nil {
		return nil, false, fmt.Errorf("ring: measure disk: %w", err)
	}
	name := f.Name()
	f.Close()
	direct, err := os.OpenFile(name, os.O_RDWR|unix.O_DIRECT, 0)
	if err == nil {
		return direct, true, nil
	}
	plain, perr := os.OpenFile(name, os.O_RDWR, 0)
	if perr != nil {
		os.Remove(name)
		return nil, false, fmt.Errorf("ring: measure disk: %w", perr)
	}
	return plain, false, nil
}

// seqWrite keeps depth 1 MiB writes (from buf, 1 MiB per depth slot) in
// flight for about d, or until maxWrites were issued when maxWrites > 0,
// cycling over the first region bytes of the file, and returns bytes per
// second.
func seqWrite(r Ring, fd int32, buf []byte, depth int, d time.Duration, maxWrites int, region int64) (float64, error) {
	var off int64
	issued := 0
	var op Op // one Op reused: &op passed through the interface escapes
	issue := func(slotIndex int) error {
		op = Op{Code: OpWrite, FD: fd, Buf: buf[slotIndex*seqChunk : (slotIndex+1)*seqChunk], Off: off, UserData: uint64(slotIndex)}
		off = (off + seqChunk) % region
		issued++
		return r.Prepare(&op)
	}
	initial := depth
	if maxWrites > 0 {
		initial = min(depth, maxWrites)
	}
	for i := range initial {
		if err := issue(i); err != nil {
			return 0, err
		}
	}
	var done int64
	dst := make([]Completion, depth)
	start := time.Now()
	stopAt := start.Add(d)
	inFlight := initial
	for inFlight > 0 {
		n, err := r.Wait(dst, 1, 0)
		if err != nil {
			return 0, err
		}
		for _, c := range dst[:n] {
			inFlight--
			if c.Res != seqChunk {
				return 0, fmt.Errorf("ring: measure disk: 1 MiB write returned %d: %w", c.Res, resultErr(c))
			}
			done += seqChunk
			more := maxWrites == 0 && time.Now().Before(stopAt) || maxWrites > 0 && issued < maxWrites
			if more {
				if err := issue(int(c.UserData)); err != nil {
					return 0, err
				}
				inFlight++
			}
		}
	}
	return float64(done) / time.Since(start).Seconds(), nil
}

// CommitStyle is how one durable commit reaches the disk: the three ways
// measured side by side by BenchmarkWriteFdatasync4KiB (docs/bench/ring.md).
type CommitStyle uint8

const (
	// CommitLinked: one submission of a write linked (Op.Link) to an fdatasync.
	CommitLinked CommitStyle = iota
	// CommitSeparate: the write, its completion, then the fdatasync and its
	// completion (two round trips through the ring: seglog's path before issue 22).
	CommitSeparate
	// CommitDSync: one RWF_DSYNC write (Op.DSync), no fdatasync.
	CommitDSync
)

// syncWrites runs 4 KiB write + fdatasync rounds (linked, depth 1) for about
// d (or until samples is full) over the 16 MiB region prewrite wrote,
// appending each round's latency to samples.
func syncWrites(r Ring, fd int32, block []byte, d time.Duration, samples []time.Duration) ([]time.Duration, error) {
	return commitRounds(r, fd, block, CommitLinked, d, samples)
}

// commitRounds is syncWrites with the commit style chosen.
func commitRounds(r Ring, fd int32, block []byte, style CommitStyle, d time.Duration, samples []time.Duration) ([]time.Duration, error) {
	dst := make([]Completion, 2)
	var ops [2]Op // reused: passed through the interface they escape
	run := func(ops []Op) error {
		for i := range ops {
			if err := r.Prepare(&ops[i]); err != nil {
				return err
			}
		}
		for got := 0; got < len(ops); {
			n, err := r.Wait(dst[got:], len(ops)-got, 0)
			if err != nil {
				return err
			}
			for _, c := range dst[got : got+n] {
				if c.Res < 0 {
					return fmt.Errorf("ring: measure disk: write+fdatasync: %w", resultErr(c))
				}
			}
			got += n
		}
		return nil
	}
	round := func(off int64) error {
		ops = [2]Op{
			{Code: OpWrite, FD: fd, Buf: block, Off: off, Link: style == CommitLinked, DSync: style == CommitDSync, UserData: 1},
			{Code: OpFdatasync, FD: fd, UserData: 2},
		}
		switch style {
		case CommitDSync:
			return run(ops[:1])
		case CommitSeparate:
			if err := run(ops[:1]); err != nil {
				return err
			}
			return run(ops[1:])
		}
		return run(ops[:])
	}
	stopAt := time.Now().Add(d)
	for off := int64(0); len(samples) < cap(samples); off = (off + syncChunk) % syncRegion {
		start := time.Now()
		if err := round(off); err != nil {
			return samples, err
		}
		end := time.Now()
		samples = append(samples, end.Sub(start))
		if end.After(stopAt) {
			break
		}
	}
	return samples, nil
}

func resultErr(c Completion) error {
	if err := c.Err(); err != nil {
		return err
	}
	return errors.New("short write")
}

// IsTmpfs reports whether dir is on tmpfs (statfs f_type TMPFS_MAGIC), where
// disk figures are meaningless. False when statfs fails.
func IsTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

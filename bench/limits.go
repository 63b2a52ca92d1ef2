package bench

// The limits of this machine that compare measures before its Felix rows (MeasureLimits):
// write+fdatasync, sequential disk writes and a QUIC echo over loopback, the denominators
// of the report's "share of the limit" column.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/sys/unix"

	"felix/netq"
	"felix/ring"
)

// Limits are this machine's own ceilings, measured by the harness in the same run, before
// the Felix rows: the denominators of the "share of the limit" figures. A zero figure was
// not measured (Errors says why) and gives no share.
type Limits struct {
	// Dir is where the disk figures were measured (the brokers' work directory).
	Dir string `json:"dir"`
	// FdatasyncPerSec is 64 KiB appends, each followed by fdatasync, per second at depth 1
	// on freshly allocated blocks of a file in Dir (a group commit of 64 records of 1 KiB).
	FdatasyncPerSec float64 `json:"fdatasync_per_sec"`
	// DiskBytesPerSec is sequential 1 MiB writes in Dir (ring.MeasureDisk, O_DIRECT when
	// the filesystem accepts it), the better of queue depth 1 and 8, in bytes/s.
	DiskBytesPerSec float64 `json:"disk_bytes_per_sec"`
	// QUICEchoBytesPerSec is bytes/s echoed back through one QUIC stream over loopback
	// (netq's listener and TLS, 64 KiB writes): every byte crosses QUIC twice, as a
	// published record does on its way to a subscriber.
	QUICEchoBytesPerSec float64 `json:"quic_echo_bytes_per_sec"`
	// SyncWriteP50 is the median of one 4 KiB write + fdatasync at depth 1 in Dir, on blocks
	// written once before (as a pre-zeroed segment), O_DIRECT when the filesystem accepts
	// it (SyncWriteDirect): the disk's part of the durable floor.
	SyncWriteP50    time.Duration `json:"sync_write_p50_ns"`
	SyncWriteDirect bool          `json:"sync_write_direct"`
	// Tmpfs says Dir is on tmpfs: the disk figures say nothing about a disk.
	Tmpfs bool `json:"tmpfs,omitempty"`
	// Errors lists the limits that could not be measured, and why.
	Errors []string `json:"errors,omitempty"`
}

// GroupCommit1KiB is 1 KiB records per second when every fdatasync covers a 64 KiB group
// commit: FdatasyncPerSec × 64.
func (l Limits) GroupCommit1KiB() float64 { return l.FdatasyncPerSec * 64 }

// MeasureLimits measures the Limits, spending about d on each of the four (disk
// bandwidth, write+fdatasync rate, write+fdatasync latency, QUIC echo). A limit that fails is listed in Errors; only a
// cancelled ctx stops the rest early.
func MeasureLimits(ctx context.Context, dir string, d time.Duration) Limits {
	lim := Limits{Dir: dir, Tmpfs: ring.IsTmpfs(dir)}
	measure := func(what string, fn func() error) {
		err := ctx.Err()
		if err == nil {
			err = fn()
		}
		if err != nil {
			lim.Errors = append(lim.Errors, what+": "+err.Error())
		}
	}
	measure("disk bandwidth", func() error {
		// The backend the measured brokers use (ring reads no environment itself).
		r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend), Entries: 16})
		if err != nil {
			return err
		}
		defer r.Close()
		dl, err := ring.MeasureDisk(r, dir, d)
		if err == nil {
			lim.DiskBytesPerSec = max(dl.SeqWriteQD1, dl.SeqWriteQD8)
		}
		return err
	})
	measure("write+fdatasync", func() (err error) {
		lim.FdatasyncPerSec, err = measureFdatasync(ctx, dir, d)
		return err
	})
	measure("write+fdatasync latency", func() (err error) {
		lim.SyncWriteP50, lim.SyncWriteDirect, err = measureSyncWrite(ctx, dir, d)
		return err
	})
	measure("QUIC echo", func() (err error) {
		lim.QUICEchoBytesPerSec, err = measureQUICEcho(ctx, d)
		return err
	})
	return lim
}

// MeasureDiskLimits measures only the two write+fdatasync limits (FdatasyncPerSec,
// SyncWriteP50), about d each: compare takes them again before each round after the
// first, so the durable rows of a round divide by the disk of that round.
func MeasureDiskLimits(ctx context.Context, dir string, d time.Duration) Limits {
	lim := Limits{Dir: dir, Tmpfs: ring.IsTmpfs(dir)}
	var err error
	if lim.FdatasyncPerSec, err = measureFdatasync(ctx, dir, d); err != nil {
		lim.Errors = append(lim.Errors, "write+fdatasync: "+err.Error())
	}
	if lim.SyncWriteP50, lim.SyncWriteDirect, err = measureSyncWrite(ctx, dir, d); err != nil {
		lim.Errors = append(lim.Errors, "write+fdatasync latency: "+err.Error())
	}
	return lim
}

// fdatasyncChunk is the group commit measureFdatasync writes: 64 records of 1 KiB.
const fdatasyncChunk = 64 << 10

// measureFdatasync appends 64 KiB then fdatasyncs, at depth 1, for about d into a
// preallocated scratch file in dir (as a log appends to its preallocated segment), and
// returns rounds per second.
func measureFdatasync(ctx context.Context, dir string, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "felix-bench-sync-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	const region = 256 << 20
	if err := unix.Fallocate(int(f.Fd()), 0, 0, region); err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		return 0, fmt.Errorf("fallocate: %w", err)
	}
	chunk := make([]byte, fdatasyncChunk)
	for i := range chunk {
		chunk[i] = byte(i*7 + 1)
	}
	rounds, off := 0, int64(0)
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if _, err := f.WriteAt(chunk, off); err != nil {
			return 0, err
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			return 0, fmt.Errorf("fdatasync: %w", err)
		}
		rounds++
		off = (off + fdatasyncChunk) % region
	}
	return float64(rounds) / time.Since(start).Seconds(), ctx.Err()
}

// syncWriteRegion is the file region measureSyncWrite cycles through (written once first).
const syncWriteRegion = 4 << 20

// measureSyncWrite times 4 KiB pwrite + fdatasync at depth 1 for about d on a scratch
// file in dir whose blocks were written and synced once first, and returns the median
// and whether the writes were O_DIRECT (from page-aligned anonymous memory).
func measureSyncWrite(ctx context.Context, dir string, d time.Duration) (time.Duration, bool, error) {
	name := filepath.Join(dir, fmt.Sprintf("felix-bench-syncwrite-%d", os.Getpid()))
	defer os.Remove(name)
	if err := os.WriteFile(name, make([]byte, syncWriteRegion), 0o600); err != nil {
		return 0, false, err
	}
	direct := true
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_DIRECT, 0)
	if err != nil {
		direct = false
		if fd, err = unix.Open(name, unix.O_WRONLY, 0); err != nil {
			return 0, false, err
		}
	}
	defer unix.Close(fd)
	if err := unix.Fdatasync(fd); err != nil {
		return 0, direct, fmt.Errorf("fdatasync: %w", err)
	}
	buf, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return 0, direct, err
	}
	defer unix.Munmap(buf)
	lat := NewLatency()
	off := int64(0)
	for start := time.Now(); time.Since(start) < d && ctx.Err() == nil; off = (off + 4096) % syncWriteRegion {
		buf[0]++
		t := time.Now()
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			return 0, direct, fmt.Errorf("pwrite: %w", err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			return 0, direct, fmt.Errorf("fdatasync: %w", err)
		}
		lat.Record(time.Since(t))
	}
	return lat.Summary().P50, direct, ctx.Err()
}

// measureQUICEcho echoes 64 KiB writes through one QUIC stream on 127.0.0.1 for d/4 of
// warm-up, then returns the bytes/s echoed back over the next d.
func measureQUICEcho(ctx context.Context, d time.Duration) (float64, error) {
	cert, err := netq.SelfSigned([]string{"localhost"}, time.Now())
	if err != nil {
		return 0, err
	}
	l, err := netq.Listen("127.0.0.1:0", cert, netq.Options{})
	if err != nil {
		return 0, err
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go echoOne(ctx, l)
	conn, err := quic.DialAddr(ctx, l.Addr().String(), netq.PinnedClientTLS(netq.Fingerprint(cert.Certificate[0])), netq.Options{}.QUICConfig())
	if err != nil {
		return 0, err
	}
	defer conn.CloseWithError(0, "")
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return 0, err
	}
	var echoed atomic.Int64
	readErr := make(chan error, 1)
	first := make(chan struct{})
	go func() { readErr <- countInto(s, &echoed, first) }()
	go func() {
		chunk := make([]byte, 64<<10)
		for ctx.Err() == nil {
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
	}()
	select { // the warm-up starts once bytes come back (a loaded machine can take longer than d)
	case <-first:
	case err := <-readErr:
		return 0, fmt.Errorf("echo stream ended before any byte came back: %w", err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return windowRate(ctx, &echoed, d/4, d, readErr)
}

// echoOne accepts one connection and one stream on l and writes back what it reads.
func echoOne(ctx context.Context, l *netq.Listener) {
	c, err := l.Accept(ctx)
	if err != nil {
		return
	}
	defer c.Release()
	s, err := c.AcceptStream(ctx)
	if err != nil {
		return
	}
	_, _ = io.Copy(s, s)
	s.Close()
}

// countInto reads r until it fails, adding every byte to n; first is closed at the first byte.
func countInto(r io.Reader, n *atomic.Int64, first chan<- struct{}) error {
	buf := make([]byte, 64<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 && n.Add(int64(k)) == int64(k) {
			close(first)
		}
		if err != nil {
			return err
		}
	}
}

// windowRate returns the growth of n per second over d, after warm (the window grows by
// d until n grew at all); a read that ends before the window does is an error.
func windowRate(ctx context.Context, n *atomic.Int64, warm, d time.Duration, readErr <-chan error) (float64, error) {
	sample := func(after time.Duration) (int64, time.Time, error) {
		select {
		case <-time.After(after):
			return n.Load(), time.Now(), nil
		case err := <-readErr:
			return 0, time.Time{}, fmt.Errorf("echo stream ended: %w", err)
		case <-ctx.Done():
			return 0, time.Time{}, ctx.Err()
		}
	}
	n0, t0, err := sample(warm)
	if err != nil {
		return 0, err
	}
	n1, t1, err := sample(d)
	for err == nil && n1 == n0 { // a stall longer than the window (a loaded machine): widen it
		n1, t1, err = sample(d)
	}
	if err != nil {
		return 0, err
	}
	return float64(n1-n0) / t1.Sub(t0).Seconds(), nil
}

package seglog

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"felix/ring"
)

// BenchmarkDiskLimits measures the disk's own limits through the same ring
// (ring.MeasureDisk): sequential write bandwidth and write+fdatasync at QD1.
func BenchmarkDiskLimits(b *testing.B) {
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var lim ring.DiskLimits
	for i := 0; i < b.N; i++ {
		if lim, err = ring.MeasureDisk(r, b.TempDir(), time.Second); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(lim.SeqWriteQD1/1e6, "seqQD1-MB/s")
	b.ReportMetric(lim.SeqWriteQD8/1e6, "seqQD8-MB/s")
	b.ReportMetric(float64(lim.FdatasyncP50.Microseconds()), "fdatasync-p50-µs")
	b.ReportMetric(float64(lim.FdatasyncP99.Microseconds()), "fdatasync-p99-µs")
}

// BenchmarkAppend runs the append matrix: fsync mode × payload × batch ×
// concurrency (closed-loop clients, each with one batch in flight, re-appending
// from its completion callback on the core goroutine). b.N counts batches.
// Reports records/s, MB/s, append latency p50/p99/p999 (Append call to
// callback) and the group-commit fan-in. SEGLOG_BENCH_FULL=1 runs every cell;
// the default is a subset that covers each target.
func BenchmarkAppend(b *testing.B) {
	type cell struct {
		mode           FsyncMode
		size, batch, c int
	}
	var cells []cell
	full := os.Getenv("SEGLOG_BENCH_FULL") == "1"
	for _, mode := range []FsyncMode{FsyncOnCommit, FsyncPeriodic, FsyncNone} {
		for _, size := range []int{128, 1024} {
			for _, batch := range []int{1, 16, 64} {
				for _, c := range []int{1, 8, 64} {
					keep := full ||
						(mode == FsyncOnCommit && ((size == 1024 && batch == 64 && c == 64) || (c == 1 && batch == 1) || (size == 128 && batch == 16 && c == 8))) ||
						(mode == FsyncNone && size == 128 && batch == 16) ||
						(mode == FsyncPeriodic && size == 1024 && batch == 64 && c == 8)
					if keep {
						cells = append(cells, cell{mode, size, batch, c})
					}
				}
			}
		}
	}
	for _, x := range cells {
		prezeros := []int64{0}
		if x.mode == FsyncOnCommit {
			prezeros = append(prezeros, 8<<20)
		}
		for _, pz := range prezeros {
			b.Run(fmt.Sprintf("%s/%dB/batch%d/conc%d/prezero%dM", x.mode, x.size, x.batch, x.c, pz>>20), func(b *testing.B) {
				runAppendBench(b, x.mode, x.size, x.batch, x.c, pz)
			})
		}
	}
}

func runAppendBench(b *testing.B, mode FsyncMode, size, batch, conc int, prezero int64) {
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	d := NewDisk(r, nil)
	l, err := d.Open(Options{Dir: b.TempDir(), FsyncMode: mode, PrezeroBytes: prezero})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = make([]byte, size)
		for j := range payloads[i] {
			payloads[i][j] = byte(i + j)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	started := make([]time.Time, conc)
	issued, completed := 0, 0
	var failure error
	cbs := make([]func(uint64, uint64, error), conc)
	var issue func(k int)
	for k := range cbs {
		k := k
		cbs[k] = func(_, _ uint64, err error) {
			if err != nil && failure == nil {
				failure = err
			}
			lat = append(lat, time.Since(started[k]))
			completed++
			if issued < b.N {
				issue(k)
			}
		}
	}
	issue = func(k int) {
		issued++
		started[k] = time.Now()
		if err := l.Append(payloads, 1, cbs[k]); err != nil && failure == nil {
			failure = err
		}
	}
	s0 := d.Stats()
	b.ReportAllocs()
	b.ResetTimer()
	t0 := time.Now()
	for k := 0; k < conc && issued < b.N; k++ {
		issue(k)
	}
	for completed < issued && failure == nil {
		if err := d.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := d.Poll(time.Second); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(t0)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	s := d.Stats()
	recs := float64(completed * batch)
	b.ReportMetric(recs/el.Seconds(), "records/s")
	b.ReportMetric(recs*float64(size)/el.Seconds()/1e6, "payload-MB/s")
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(pct(0.999), "p999-µs")
	if syncs := s.Fdatasyncs - s0.Fdatasyncs; syncs > 0 && mode == FsyncOnCommit {
		b.ReportMetric(float64(s.SyncedAppends-s0.SyncedAppends)/float64(syncs), "appends/fdatasync")
		b.ReportMetric(float64((s.FdatasyncTime-s0.FdatasyncTime).Microseconds())/float64(syncs), "µs/fdatasync")
	}
	if w := s.Writes - s0.Writes; w > 0 {
		b.ReportMetric(float64((s.WriteTime-s0.WriteTime).Microseconds())/float64(w), "µs/write")
		b.ReportMetric(float64(s.WriteBytes-s0.WriteBytes)/float64(w)/1024, "KiB/write")
	}
}

// BenchmarkEncode measures staging alone (no I/O): the per-record cost of
// encoding into the staging buffer, to show it allocates nothing.
func BenchmarkEncode(b *testing.B) {
	buf := make([]byte, 64<<10)
	p := make([]byte, 128)
	b.ReportAllocs()
	b.SetBytes(int64(len(p)))
	for i := 0; i < b.N; i++ {
		putRecordV3(buf[(i%256)*160:], uint64(i), 1, p)
	}
}

// BenchmarkRead reads 1 KiB records back through the sparse index (pread path).
func BenchmarkRead(b *testing.B) {
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	d := NewDisk(r, nil)
	l, err := d.Open(Options{Dir: b.TempDir(), FsyncMode: FsyncNone})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	p := make([][]byte, 64)
	for i := range p {
		p[i] = make([]byte, 1024)
	}
	done := 0
	for i := 0; i < 100; i++ {
		l.Append(p, 1, func(uint64, uint64, error) { done++ })
	}
	waitFor(b, d, func() bool { return done == 100 })
	n := l.NextOffset()
	b.ReportAllocs()
	b.SetBytes(1024)
	b.ResetTimer()
	from := uint64(0)
	got := 0
	fn := func(off uint64, _ int64, _ []byte) bool { from = off + 1; got++; return got < b.N }
	for got < b.N {
		if from >= n {
			from = 0
		}
		if err := l.Read(from, 1<<20, fn); err != nil {
			b.Fatal(err)
		}
	}
}

package seglog

import (
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"felix/ring"
)

// BenchmarkInterleaved is an A/B in one process (issue 22): the write-path choices of
// commit.go take turns in phases of phaseAppends appends on one log (each phase drains
// before the next starts), so every choice sees the same disk and the same load from the
// rest of the machine. Reported per choice: records/s over its phases and p50/p99 append
// latency (µs), and the ratio of each choice's records/s to the first one's.
//   - commit/...: on_commit, the old path (fdatasync after the write's completion) against
//     a write linked to its fdatasync and an RWF_DSYNC write;
//   - buffered/...: periodic and none, a pwrite on the caller's thread against a buffered
//     write through io_uring.
func BenchmarkInterleaved(b *testing.B) {
	commit := []choice{{"after", func() { commitStyle = commitAfter }}, {"linked", func() { commitStyle = commitLinked }},
		{"dsync", func() { commitStyle = commitDSync }}}
	buffered := []choice{{"pwrite", func() { bufferedViaRing, bufferedRingMinBytes = false, 64<<10 }},
		{"ring", func() { bufferedViaRing, bufferedRingMinBytes = true, 0 }},
		{"ring64k", func() { bufferedViaRing, bufferedRingMinBytes = true, 64<<10 }}}
	for _, c := range []struct {
		mode              FsyncMode
		size, batch, conc int
		choices           []choice
		group             string
	}{
		{FsyncOnCommit, 1024, 1, 1, commit, "commit"},
		{FsyncOnCommit, 128, 16, 8, commit, "commit"},
		{FsyncOnCommit, 1024, 64, 64, commit, "commit"},
		{FsyncNone, 128, 16, 1, buffered, "buffered"},
		{FsyncNone, 128, 16, 8, buffered, "buffered"},
		{FsyncNone, 1024, 64, 1, buffered, "buffered"},
		{FsyncNone, 1024, 64, 8, buffered, "buffered"},
		{FsyncPeriodic, 1024, 64, 8, buffered, "buffered"},
	} {
		name := fmt.Sprintf("%s/%s/%dB/batch%d/conc%d", c.group, c.mode, c.size, c.batch, c.conc)
		b.Run(name, func(b *testing.B) { runPhased(b, Options{FsyncMode: c.mode}, c.size, c.batch, c.conc, c.choices) })
	}
	for _, c := range []struct{ size, batch, conc int }{{128, 1, 1}, {128, 16, 8}} {
		name := fmt.Sprintf("commit/on_commit/%dB/batch%d/conc%d/prezero8M", c.size, c.batch, c.conc)
		b.Run(name, func(b *testing.B) {
			runPhased(b, Options{FsyncMode: FsyncOnCommit, PrezeroBytes: 8 << 20}, c.size, c.batch, c.conc, commit)
		})
	}
}

// choice is one side of an interleaved A/B: set switches the package to it.
type choice struct {
	name string
	set  func()
}

const phaseAppends = 64

func runPhased(b *testing.B, opts Options, size, batch, conc int, choices []choice) {
	defer func(c int, v bool, m int) {
		commitStyle, bufferedViaRing, bufferedRingMinBytes = c, v, m
	}(commitStyle, bufferedViaRing, bufferedRingMinBytes)
	r, err := ring.New(ring.Options{Backend: os.Getenv(ring.EnvBackend)})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	d := NewDisk(r, nil)
	opts.Dir = b.TempDir()
	l, err := d.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payloads := make([][]byte, batch)
	for i := range payloads {
		payloads[i] = make([]byte, size)
	}
	lat := make([][]time.Duration, len(choices))
	spent := make([]time.Duration, len(choices))
	done := make([]int, len(choices))
	b.ResetTimer()
	for left, k := b.N, 0; left > 0; k = (k + 1) % len(choices) {
		n := min(left, phaseAppends)
		left -= n
		choices[k].set()
		el, samples := runPhase(b, d, l, payloads, conc, n)
		spent[k] += el
		done[k] += n
		lat[k] = append(lat[k], samples...)
	}
	b.StopTimer()
	var base float64
	for k, c := range choices {
		if spent[k] == 0 {
			continue
		}
		rate := float64(done[k]*batch) / spent[k].Seconds()
		if k == 0 {
			base = rate
		}
		sort.Slice(lat[k], func(i, j int) bool { return lat[k][i] < lat[k][j] })
		b.ReportMetric(rate, c.name+"-records/s")
		b.ReportMetric(float64(lat[k][len(lat[k])/2].Microseconds()), c.name+"-p50-µs")
		b.ReportMetric(float64(lat[k][len(lat[k])*99/100].Microseconds()), c.name+"-p99-µs")
		if k > 0 && base > 0 {
			b.ReportMetric(rate/base, c.name+"/"+choices[0].name)
		}
	}
}

// runPhase runs n appends with up to conc in flight and waits for all of them.
func runPhase(b *testing.B, d *Disk, l *Log, payloads [][]byte, conc, n int) (time.Duration, []time.Duration) {
	samples := make([]time.Duration, 0, n)
	issued, completed := 0, 0
	var failure error
	var issue func()
	issue = func() {
		issued++
		start := time.Now()
		err := l.Append(payloads, 1, func(_, _ uint64, err error) {
			if err != nil && failure == nil {
				failure = err
			}
			samples = append(samples, time.Since(start))
			if completed++; issued < n {
				issue()
			}
		})
		if err != nil && failure == nil {
			failure = err
		}
	}
	t0 := time.Now()
	for issued < min(conc, n) {
		issue()
	}
	for completed < issued && failure == nil {
		if err := d.Flush(); err != nil {
			b.Fatal(err)
		}
		if err := d.Poll(time.Second); err != nil {
			b.Fatal(err)
		}
	}
	if failure != nil {
		b.Fatal(failure)
	}
	return time.Since(t0), samples
}

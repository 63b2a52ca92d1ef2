package ring

import (
	"errors"
	"os"
	"runtime"
	"testing"
	"time"
)

// benchDir is FELIX_BENCH_DIR, else os.TempDir(), else /var/tmp when the
// temp dir is tmpfs (figures from tmpfs say nothing about the disk).
func benchDir(b *testing.B) string {
	if dir := os.Getenv("FELIX_BENCH_DIR"); dir != "" {
		return dir
	}
	if dir := os.TempDir(); !IsTmpfs(dir) {
		return dir
	}
	return "/var/tmp"
}

// forEachBackendB runs fn as a sub-benchmark per backend (honouring
// FELIX_IO_BACKEND), each with its own ring on a locked thread.
func forEachBackendB(b *testing.B, fn func(b *testing.B, r Ring)) {
	only := os.Getenv(EnvBackend)
	for _, c := range allCases {
		if c.threadLocked != (c.backend == BackendUring) || (only != "" && only != "auto" && only != c.backend) {
			continue // uring runs once, thread-locked, as the core runs it
		}
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			r, err := New(Options{Backend: c.backend, Entries: 64, ThreadLocked: c.threadLocked})
			if errors.Is(err, ErrUnsupported) {
				b.Skipf("io_uring refused: %v", err)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			fn(b, r)
		})
	}
}

// benchRegion is the file region the write benchmarks cycle over, written
// once before timing (smaller than MeasureDisk's to spare the shared disk).
const benchRegion = 64 << 20

// BenchmarkSeqWrite1MiB measures O_DIRECT sequential 1 MiB writes at queue
// depth 1 and 8 over a written-once 64 MiB region
// (design/NOTES.md: fio sees 2.2-2.35 GB/s).
func BenchmarkSeqWrite1MiB(b *testing.B) {
	for _, depth := range []int{1, 8} {
		b.Run(map[int]string{1: "qd1", 8: "qd8"}[depth], func(b *testing.B) {
			forEachBackendB(b, func(b *testing.B, r Ring) {
				f, direct, err := openScratch(benchDir(b))
				if err != nil {
					b.Fatal(err)
				}
				defer os.Remove(f.Name())
				defer f.Close()
				if !direct {
					b.Log("O_DIRECT refused: buffered writes")
				}
				buf, err := AlignedBuffer(8 * seqChunk)
				if err != nil {
					b.Fatal(err)
				}
				defer FreeAligned(buf)
				if _, err := seqWrite(r, int32(f.Fd()), buf, 8, time.Hour, benchRegion/seqChunk, benchRegion); err != nil {
					b.Fatal(err) // the region exists and was written once
				}
				b.SetBytes(seqChunk)
				b.ReportAllocs()
				b.ResetTimer()
				if _, err := seqWrite(r, int32(f.Fd()), buf, depth, time.Hour, b.N, benchRegion); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkWriteFdatasync4KiB measures one durable 4 KiB O_DIRECT commit at
// depth 1 on blocks written before, reporting p50/p99 in µs, three ways
// (CommitStyle): a write linked to an fdatasync in one submission, the write
// then the fdatasync as two round trips, and one RWF_DSYNC write
// (design/NOTES.md: fio sees p50 90 µs, p99 183 µs for the fdatasync).
func BenchmarkWriteFdatasync4KiB(b *testing.B) {
	for _, c := range []struct {
		name  string
		style CommitStyle
	}{{"linked", CommitLinked}, {"separate", CommitSeparate}, {"dsync", CommitDSync}} {
		b.Run(c.name, func(b *testing.B) { benchCommit(b, c.style) })
	}
}

func benchCommit(b *testing.B, style CommitStyle) {
	forEachBackendB(b, func(b *testing.B, r Ring) {
		f, _, err := openScratch(benchDir(b))
		if err != nil {
			b.Fatal(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		buf, err := AlignedBuffer(seqChunk)
		if err != nil {
			b.Fatal(err)
		}
		defer FreeAligned(buf)
		if err := prewrite(r, int32(f.Fd()), buf); err != nil {
			b.Fatal(err)
		}
		samples := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		samples, err = commitRounds(r, int32(f.Fd()), buf[:syncChunk], style, time.Hour, samples)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_, p50, p99 := syncStats(samples)
		b.ReportMetric(float64(p50.Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(p99.Nanoseconds())/1e3, "p99-µs")
	})
}

// BenchmarkOpOverhead measures the ring's own cost per op: batches of 8
// 512-byte writes from Go-heap buffers (pinned per op on uring) into the page
// cache, submitted together and reaped together. Reported per op.
func BenchmarkOpOverhead(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, r Ring) {
		f, err := os.CreateTemp(benchDir(b), "felix-ops-*")
		if err != nil {
			b.Fatal(err)
		}
		defer os.Remove(f.Name())
		defer f.Close()
		const batch = 8
		bufs := make([][]byte, batch)
		for i := range bufs {
			bufs[i] = make([]byte, 512)
		}
		dst := make([]Completion, batch)
		var op Op // long-lived: &op through the interface would escape per call
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			for i := range batch {
				op = Op{Code: OpWrite, FD: int32(f.Fd()), Buf: bufs[i], Off: int64(i * 512), UserData: uint64(i)}
				if err := r.Prepare(&op); err != nil {
					b.Fatal(err)
				}
			}
			for got := 0; got < batch; {
				n, err := r.Wait(dst[got:], batch-got, 0)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
		}
	})
}

// BenchmarkNop measures the ring machinery alone: batches of 8 NOPs. The
// syscall backend does no syscall for a NOP; uring does one io_uring_enter
// per batch (Wait submits and waits in the same call).
func BenchmarkNop(b *testing.B) {
	forEachBackendB(b, func(b *testing.B, r Ring) {
		const batch = 8
		dst := make([]Completion, batch)
		var op Op
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			for i := range batch {
				op = Op{Code: OpNop, UserData: uint64(i)}
				if err := r.Prepare(&op); err != nil {
					b.Fatal(err)
				}
			}
			for got := 0; got < batch; {
				n, err := r.Wait(dst[got:], batch-got, 0)
				if err != nil {
					b.Fatal(err)
				}
				got += n
			}
		}
	})
}

// BenchmarkRegistered compares, on the same ring, O_DIRECT writes with a
// plain descriptor and Go-visible buffer, with a registered file, and with a
// registered file and buffer (OpWriteFixed): does registration pay?
func BenchmarkRegistered(b *testing.B) {
	for _, size := range []int{4096, seqChunk} {
		for _, mode := range []string{"plain", "fixed-file", "fixed-file+buf"} {
			name := map[int]string{4096: "4KiB-qd16", seqChunk: "1MiB-qd8"}[size] + "/" + mode
			b.Run(name, func(b *testing.B) {
				forEachBackendB(b, func(b *testing.B, r Ring) {
					benchRegistered(b, r, size, mode)
				})
			})
		}
	}
}

func benchRegistered(b *testing.B, r Ring, size int, mode string) {
	depth := 16
	if size == seqChunk {
		depth = 8
	}
	f, _, err := openScratch(benchDir(b))
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf, err := AlignedBuffer(depth * size)
	if err != nil {
		b.Fatal(err)
	}
	defer FreeAligned(buf)
	region := int64(benchRegion)
	if _, err := seqWrite(r, int32(f.Fd()), make8MiB(b), 8, time.Hour, int(region/seqChunk), region); err != nil {
		b.Fatal(err)
	}
	reg := r.(Registrar)
	template := Op{Code: OpWrite, FD: int32(f.Fd())}
	if mode != "plain" {
		if err := reg.RegisterFiles([]int32{int32(f.Fd())}); err != nil {
			b.Fatal(err)
		}
		defer reg.UnregisterFiles()
		template.FD, template.Fixed = 0, true
	}
	if mode == "fixed-file+buf" {
		if err := reg.RegisterBuffers([][]byte{buf}); err != nil {
			b.Fatal(err)
		}
		defer reg.UnregisterBuffers()
		template.Code = OpWriteFixed
	}
	var off int64
	var op Op
	issue := func(slot int) {
		op = template
		op.Buf, op.Off, op.UserData = buf[slot*size:(slot+1)*size], off, uint64(slot)
		off = (off + int64(size)) % region
		if err := r.Prepare(&op); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]Completion, depth)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	issued, inFlight := 0, 0
	for ; issued < min(depth, b.N); issued++ {
		issue(issued)
		inFlight++
	}
	for inFlight > 0 {
		n, err := r.Wait(dst, 1, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range dst[:n] {
			inFlight--
			if c.Res != int32(size) {
				b.Fatalf("write returned %d", c.Res)
			}
			if issued < b.N {
				issue(int(c.UserData))
				issued++
				inFlight++
			}
		}
	}
}

// make8MiB returns an 8 MiB aligned buffer freed at the end of the benchmark.
func make8MiB(b *testing.B) []byte {
	buf, err := AlignedBuffer(8 * seqChunk)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { FreeAligned(buf) })
	return buf
}

package ring

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWriteReadRoundTrip(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		data := []byte("hello, felix ring")
		got := run(t, r, Op{Code: OpWrite, FD: int32(f.Fd()), Buf: data, Off: 100, UserData: 1})
		if got[1].Res != int32(len(data)) {
			t.Fatalf("write Res = %d, want %d", got[1].Res, len(data))
		}
		back := make([]byte, len(data))
		got = run(t, r, Op{Code: OpRead, FD: int32(f.Fd()), Buf: back, Off: 100, UserData: 2})
		if got[2].Res != int32(len(data)) || !bytes.Equal(back, data) {
			t.Fatalf("read Res = %d data %q, want %q", got[2].Res, back, data)
		}
	})
}

func TestWritevReadv(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		parts := [][]byte{[]byte("alpha-"), []byte("beta-"), {}, []byte("gamma")}
		got := run(t, r, Op{Code: OpWritev, FD: int32(f.Fd()), Iov: parts, Off: 7, UserData: 9})
		if got[9].Res != 16 {
			t.Fatalf("writev Res = %d, want 16", got[9].Res)
		}
		a, b := make([]byte, 10), make([]byte, 6)
		got = run(t, r, Op{Code: OpReadv, FD: int32(f.Fd()), Iov: [][]byte{a, b}, Off: 7, UserData: 10})
		if got[10].Res != 16 || string(a)+string(b) != "alpha-beta-gamma" {
			t.Fatalf("readv Res = %d, got %q %q", got[10].Res, a, b)
		}
	})
}

func TestLinkedWriteThenFdatasync(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		data := bytes.Repeat([]byte{0xab}, 4096)
		got := run(t, r,
			Op{Code: OpWrite, FD: int32(f.Fd()), Buf: data, Link: true, UserData: 1},
			Op{Code: OpFdatasync, FD: int32(f.Fd()), UserData: 2},
			Op{Code: OpFsync, FD: int32(f.Fd()), UserData: 3})
		if got[1].Res != 4096 || got[2].Res != 0 || got[3].Res != 0 {
			t.Fatalf("completions %+v", got)
		}
		onDisk, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(onDisk, data) {
			t.Fatalf("file holds %d bytes (err %v), want the 4096 written", len(onDisk), err)
		}
	})
}

func TestFailedLinkCancelsRestOfChain(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		got := run(t, r,
			Op{Code: OpWrite, FD: 1 << 20, Buf: []byte("x"), Link: true, UserData: 1}, // bad fd
			Op{Code: OpFdatasync, FD: int32(f.Fd()), Link: true, UserData: 2},
			Op{Code: OpWrite, FD: int32(f.Fd()), Buf: []byte("never"), UserData: 3},
			Op{Code: OpWrite, FD: int32(f.Fd()), Buf: []byte("after"), UserData: 4}) // next chain
		if !errors.Is(got[1].Err(), unix.EBADF) {
			t.Fatalf("bad-fd write: Res %d, want -EBADF", got[1].Res)
		}
		for _, ud := range []uint64{2, 3} {
			if !errors.Is(got[ud].Err(), unix.ECANCELED) {
				t.Fatalf("op %d: Res %d, want -ECANCELED", ud, got[ud].Res)
			}
		}
		if got[4].Res != 5 {
			t.Fatalf("op after the chain: Res %d, want 5", got[4].Res)
		}
		if b, _ := os.ReadFile(f.Name()); string(b) != "after" {
			t.Fatalf("file = %q, want only the unlinked write", b)
		}
	})
}

func TestShortReadBreaksChain(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		buf := make([]byte, 64) // file is empty: the read returns 0 bytes
		got := run(t, r,
			Op{Code: OpRead, FD: int32(f.Fd()), Buf: buf, Link: true, UserData: 1},
			Op{Code: OpNop, UserData: 2})
		if got[1].Res != 0 || !errors.Is(got[2].Err(), unix.ECANCELED) {
			t.Fatalf("completions %+v: want short read then -ECANCELED", got)
		}
	})
}

func TestFallocate(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		got := run(t, r,
			Op{Code: OpFallocate, FD: int32(f.Fd()), Off: 0, Len: 1 << 20, UserData: 1},
			Op{Code: OpFallocate, FD: int32(f.Fd()), Mode: unix.FALLOC_FL_KEEP_SIZE, Off: 1 << 20, Len: 1 << 20, UserData: 2})
		if got[1].Res != 0 || got[2].Res != 0 {
			if errors.Is(got[1].Err(), unix.EOPNOTSUPP) {
				t.Skip("filesystem does not support fallocate")
			}
			t.Fatalf("fallocate completions %+v", got)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		if st.Size != 1<<20 || st.Blocks*512 < 2<<20 {
			t.Fatalf("size %d blocks %d: want size 1 MiB and 2 MiB allocated", st.Size, st.Blocks)
		}
	})
}

func TestTimeoutOp(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		got := run(t, r,
			Op{Code: OpTimeout, Timeout: time.Millisecond, UserData: 7},
			Op{Code: OpNop, UserData: 8})
		if !errors.Is(got[7].Err(), unix.ETIME) || got[8].Res != 0 {
			t.Fatalf("completions %+v: want timeout -ETIME and nop 0", got)
		}
	})
}

func TestPollOnPipe(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		if err := r.Prepare(&Op{Code: OpPoll, FD: int32(p[0]), Mode: unix.POLLIN, UserData: 5}); err != nil {
			t.Fatal(err)
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		dst := make([]Completion, 4)
		if n, err := r.Wait(dst, 0, 0); err != nil || n != 0 {
			t.Fatalf("Wait before data: n=%d err=%v, want nothing", n, err)
		}
		if _, err := unix.Write(p[1], []byte("!")); err != nil {
			t.Fatal(err)
		}
		got := reap(t, r, 1)
		if got[5].Res&unix.POLLIN == 0 {
			t.Fatalf("poll Res = %#x, want POLLIN", got[5].Res)
		}
	})
}

func TestWakeFromAnotherGoroutine(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		dst := make([]Completion, 4)
		for round := range 3 {
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := r.Wake(); err != nil {
					t.Errorf("Wake: %v", err)
				}
			}()
			n, err := r.Wait(dst, 1, 0) // no timeout: only the Wake can end it
			wg.Wait()
			if err != nil || n != 0 {
				t.Fatalf("round %d: Wait = %d, %v; want 0 completions (wake is internal)", round, n, err)
			}
		}
		// A wake never leaks into later waits as a completion.
		if n, err := r.Wait(dst, 0, 0); err != nil || n != 0 {
			t.Fatalf("Wait after wakes = %d, %v", n, err)
		}
	})
}

func TestWaitTimeoutReturnsEmpty(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		dst := make([]Completion, 4)
		n, err := r.Wait(dst, 1, time.Millisecond)
		if err != nil || n != 0 {
			t.Fatalf("Wait = %d, %v; want 0, nil after the timeout", n, err)
		}
	})
}

func TestQueueFullThenSubmitAndRetry(t *testing.T) {
	forEachBackend(t, 4, func(t *testing.T, r Ring) {
		for i := range 4 {
			if err := r.Prepare(&Op{Code: OpNop, UserData: uint64(i)}); err != nil {
				t.Fatalf("Prepare %d: %v", i, err)
			}
		}
		op := Op{Code: OpNop, UserData: 4}
		if err := r.Prepare(&op); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("5th Prepare: %v, want ErrQueueFull", err)
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := r.Prepare(&op); err != nil {
			t.Fatalf("Prepare after Submit: %v", err)
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		// 5 of 8 in-flight slots are taken; fill the rest, then the limit.
		for i := 5; i < 8; i++ {
			if err := r.Prepare(&Op{Code: OpNop, UserData: uint64(i)}); err != nil {
				t.Fatalf("Prepare %d: %v", i, err)
			}
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := r.Prepare(&Op{Code: OpNop, UserData: 8}); !errors.Is(err, ErrTooManyInFlight) {
			t.Fatalf("9th in-flight Prepare: %v, want ErrTooManyInFlight", err)
		}
		got := reap(t, r, 8)
		for i := range uint64(8) {
			if c, ok := got[i]; !ok || c.Res != 0 {
				t.Fatalf("nop %d: %+v present=%v", i, c, ok)
			}
		}
		if err := r.Prepare(&Op{Code: OpNop, UserData: 8}); err != nil {
			t.Fatalf("Prepare after reaping: %v", err)
		}
	})
}

func TestManyOpsInFlight(t *testing.T) {
	forEachBackend(t, 32, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		const ops, size = 1000, 512
		bufs := make([][]byte, ops)
		dst := make([]Completion, 64)
		done := 0
		next := 0
		for done < ops {
			for next < ops {
				bufs[next] = bytes.Repeat([]byte{byte(next)}, size)
				err := r.Prepare(&Op{Code: OpWrite, FD: int32(f.Fd()), Buf: bufs[next], Off: int64(next * size), UserData: uint64(next)})
				if errors.Is(err, ErrQueueFull) || errors.Is(err, ErrTooManyInFlight) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				next++
			}
			n, err := r.Wait(dst, 1, 10*time.Second)
			if err != nil || n == 0 {
				t.Fatalf("Wait = %d, %v", n, err)
			}
			for _, c := range dst[:n] {
				if c.Res != size {
					t.Fatalf("write %d: Res %d", c.UserData, c.Res)
				}
			}
			done += n
		}
		onDisk, err := os.ReadFile(f.Name())
		if err != nil || len(onDisk) != ops*size {
			t.Fatalf("file %d bytes, err %v", len(onDisk), err)
		}
		for i := range ops {
			if !bytes.Equal(onDisk[i*size:(i+1)*size], bufs[i]) {
				t.Fatalf("block %d differs", i)
			}
		}
	})
}

func TestUserDataRoundTrips(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		values := []uint64{0, 1, tagWake, tagCancel, tagInternal, ^uint64(0), 0xdeadbeefcafef00d}
		ops := make([]Op, len(values))
		for i, v := range values {
			ops[i] = Op{Code: OpNop, UserData: v}
		}
		got := run(t, r, ops...)
		for _, v := range values {
			if c, ok := got[v]; !ok || c.Res != 0 {
				t.Fatalf("UserData %#x: %+v present=%v", v, c, ok)
			}
		}
	})
}

func TestODirectWriteFromAlignedBuffer(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f, err := os.OpenFile(t.TempDir()+"/direct", os.O_CREATE|os.O_RDWR|unix.O_DIRECT, 0o600)
		if errors.Is(err, unix.EINVAL) {
			t.Skip("filesystem refuses O_DIRECT")
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		bs := BlockSize(int(f.Fd()))
		buf, err := AlignedBuffer(4 * bs)
		if err != nil {
			t.Fatal(err)
		}
		defer FreeAligned(buf)
		for i := range buf {
			buf[i] = byte(i % 251)
		}
		got := run(t, r,
			Op{Code: OpWrite, FD: int32(f.Fd()), Buf: buf, Off: int64(bs), Link: true, UserData: 1},
			Op{Code: OpFdatasync, FD: int32(f.Fd()), UserData: 2})
		if got[1].Res != int32(len(buf)) || got[2].Res != 0 {
			t.Fatalf("O_DIRECT write+fdatasync: %+v", got)
		}
		onDisk, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(onDisk[bs:], buf) {
			t.Fatalf("read back %d bytes, err %v", len(onDisk), err)
		}
	})
}

func TestCloseWithOpsInFlight(t *testing.T) {
	forEachBackend(t, 16, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		ops := []Op{
			{Code: OpPoll, FD: int32(p[0]), Mode: unix.POLLIN, UserData: 1},
			{Code: OpRead, FD: int32(p[0]), Buf: make([]byte, 16), UserData: 2}, // blocks on the pipe
			{Code: OpTimeout, Timeout: time.Hour, UserData: 3},
		}
		for i := range 8 {
			ops = append(ops, Op{Code: OpWrite, FD: int32(f.Fd()), Buf: make([]byte, 4096), Off: int64(i * 4096), UserData: uint64(10 + i)})
		}
		for i := range ops {
			if err := r.Prepare(&ops[i]); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Submit(); err != nil {
			t.Fatal(err)
		}
		if err := r.Prepare(&Op{Code: OpNop}); err != nil { // prepared, never submitted
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := r.Close(); !errors.Is(err, ErrClosed) {
			t.Fatalf("second Close: %v", err)
		}
		if err := r.Prepare(&Op{Code: OpNop}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Prepare after Close: %v", err)
		}
		if _, err := r.Wait(make([]Completion, 1), 0, 0); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wait after Close: %v", err)
		}
		if err := r.Wake(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Wake after Close: %v", err)
		}
	})
}

func TestInvalidOps(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		bad := []Op{
			{Code: opCodeCount},
			{Code: OpWritev},
			{Code: OpReadv, Iov: make([][]byte, MaxIov+1)},
			{Code: OpFallocate, Len: 0},
			{Code: OpTimeout},
			{Code: OpTimeout, Timeout: time.Second, Link: true},
			{Code: OpPoll, Link: true},
			{Code: OpWrite, Off: -1},
		}
		for i := range bad {
			if err := r.Prepare(&bad[i]); !errors.Is(err, ErrInvalidOp) {
				t.Errorf("Prepare(%+v) = %v, want ErrInvalidOp", bad[i], err)
			}
		}
		// Nothing was queued by the failures.
		if n, err := r.Wait(make([]Completion, 4), 0, 0); err != nil || n != 0 {
			t.Fatalf("Wait = %d, %v", n, err)
		}
	})
}

func TestPollBadDescriptor(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		got := run(t, r, Op{Code: OpPoll, FD: 1 << 20, Mode: unix.POLLIN, UserData: 3})
		if !errors.Is(got[3].Err(), unix.EBADF) {
			t.Fatalf("poll on a bad fd: Res %#x, want -EBADF", got[3].Res)
		}
	})
}

func TestWakeBeforeWaitEndsNextWaitOnly(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		if err := r.Wake(); err != nil {
			t.Fatal(err)
		}
		dst := make([]Completion, 2)
		if n, err := r.Wait(dst, 1, 0); n != 0 || err != nil { // returns: the wake is pending
			t.Fatalf("Wait = %d, %v", n, err)
		}
		// The wake was consumed: a bounded Wait now runs to its timeout.
		if n, err := r.Wait(dst, 1, time.Millisecond); n != 0 || err != nil {
			t.Fatalf("second Wait = %d, %v", n, err)
		}
	})
}

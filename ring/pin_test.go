package ring

import (
	"errors"
	"runtime"
	"testing"
	"weak"

	"golang.org/x/sys/unix"
)

// TestInFlightBufferStaysReachable hands the kernel the only reference to a
// Go-heap buffer (a read from an empty pipe stays in flight), runs the GC,
// and checks the buffer survived and received the data: the ring kept it
// reachable and pinned until the completion was reaped. uring only: the
// syscall backend never leaves a buffer with the kernel after Submit.
func TestInFlightBufferStaysReachable(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		if r.Backend() != BackendUring {
			t.Skip("syscall backend runs reads inside Submit")
		}
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		ref := prepareHeapRead(t, r, p[0])
		for range 3 {
			runtime.GC()
		}
		if ref.Value() == nil {
			t.Fatal("in-flight buffer was collected")
		}
		if _, err := unix.Write(p[1], []byte("pinned")); err != nil {
			t.Fatal(err)
		}
		got := reap(t, r, 1)
		buf := ref.Value()
		if got[1].Res != 6 || buf == nil || string(buf[:6]) != "pinned" {
			t.Fatalf("read Res %d, buffer %v", got[1].Res, buf)
		}
		runtime.GC() // an unpinned-too-early or leaked Pinner would panic here
	})
}

// prepareHeapRead submits a read into a fresh heap buffer and returns only a
// weak pointer to it.
func prepareHeapRead(t *testing.T, r Ring, fd int) weak.Pointer[[64]byte] {
	buf := new([64]byte)
	if err := r.Prepare(&Op{Code: OpRead, FD: int32(fd), Buf: buf[:], UserData: 1}); err != nil {
		t.Fatal(err)
	}
	if err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	return weak.Make(buf)
}

func TestAlignedBufferAndBlockSize(t *testing.T) {
	if _, err := AlignedBuffer(0); !errors.Is(err, ErrInvalidOp) {
		t.Fatalf("AlignedBuffer(0) = %v", err)
	}
	b, err := AlignedBuffer(5000)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 5000 || cap(b)%4096 != 0 {
		t.Fatalf("len %d cap %d", len(b), cap(b))
	}
	if addr := uintptr(unsafePointer(b)); addr%4096 != 0 {
		t.Fatalf("buffer at %#x is not page-aligned", addr)
	}
	b[4999] = 1
	if err := FreeAligned(b); err != nil {
		t.Fatal(err)
	}
	if err := FreeAligned(make([]byte, 10)); err == nil {
		t.Fatal("FreeAligned accepted a heap slice")
	}
	f := tempFile(t, 0)
	if bs := BlockSize(int(f.Fd())); bs < 512 || bs&(bs-1) != 0 {
		t.Fatalf("BlockSize = %d", bs)
	}
	if bs := BlockSize(-1); bs != DefaultBlockSize {
		t.Fatalf("BlockSize(-1) = %d, want the default", bs)
	}
}

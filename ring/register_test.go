package ring

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestRegisteredFilesAndBuffers(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		reg, ok := r.(Registrar)
		if !ok {
			t.Fatalf("%s backend does not implement Registrar", r.Backend())
		}
		f := tempFile(t, 0)
		mapped, err := AlignedBuffer(8192)
		if err != nil {
			t.Fatal(err)
		}
		defer FreeAligned(mapped)
		heap := make([]byte, 4096)
		if err := reg.RegisterFiles([]int32{-1, int32(f.Fd())}); err != nil {
			t.Fatal(err)
		}
		if err := reg.RegisterBuffers([][]byte{mapped, heap}); err != nil {
			t.Fatal(err)
		}
		if err := reg.RegisterFiles([]int32{int32(f.Fd())}); !errors.Is(err, ErrInvalidOp) {
			t.Fatalf("second RegisterFiles: %v", err)
		}
		copy(mapped[4096:], "fixed-buffer-data")
		got := run(t, r,
			Op{Code: OpWriteFixed, FD: 1, Fixed: true, Buf: mapped[4096:4113], BufIndex: 0, Off: 10, UserData: 1},
			Op{Code: OpWrite, FD: 1, Fixed: true, Buf: []byte("plain"), Off: 0, UserData: 2},
			Op{Code: OpFdatasync, FD: 1, Fixed: true, UserData: 3})
		if got[1].Res != 17 || got[2].Res != 5 || got[3].Res != 0 {
			t.Fatalf("fixed writes: %+v", got)
		}
		got = run(t, r, Op{Code: OpReadFixed, FD: 1, Fixed: true, Buf: heap[:27], BufIndex: 1, UserData: 4})
		if got[4].Res != 27 || !bytes.Equal(heap[:27], []byte("plain\x00\x00\x00\x00\x00fixed-buffer-data")) {
			t.Fatalf("fixed read: Res %d data %q", got[4].Res, heap[:27])
		}
		got = run(t, r,
			Op{Code: OpWriteFixed, FD: 1, Fixed: true, Buf: make([]byte, 16), BufIndex: 0, UserData: 5}, // outside buffer 0
			Op{Code: OpWrite, FD: 7, Fixed: true, Buf: []byte("x"), UserData: 6})                        // no such index
		if !errors.Is(got[5].Err(), unix.EFAULT) || !errors.Is(got[6].Err(), unix.EBADF) {
			t.Fatalf("bad fixed ops: %+v, want -EFAULT and -EBADF", got)
		}
		if err := r.Prepare(&Op{Code: OpNop}); err != nil {
			t.Fatal(err)
		}
		if err := reg.UnregisterBuffers(); !errors.Is(err, ErrInvalidOp) {
			t.Fatalf("UnregisterBuffers with an op prepared: %v", err)
		}
		reap(t, r, 1)
		if err := reg.UnregisterBuffers(); err != nil {
			t.Fatal(err)
		}
		if err := reg.UnregisterFiles(); err != nil {
			t.Fatal(err)
		}
		if err := reg.UnregisterFiles(); !errors.Is(err, ErrInvalidOp) {
			t.Fatalf("second UnregisterFiles: %v", err)
		}
		for _, bad := range [][][]byte{nil, {{}}} {
			if err := reg.RegisterBuffers(bad); !errors.Is(err, ErrInvalidOp) {
				t.Fatalf("RegisterBuffers(%v): %v", bad, err)
			}
		}
	})
}

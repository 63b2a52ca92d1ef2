package ring

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

// TestDSyncWrite: an RWF_DSYNC write (Op.DSync) of one buffer, of an iovec list and from
// an O_DIRECT aligned buffer completes with its full length and leaves the bytes in the
// file, on both backends; DSync on an op that is not a write is ErrInvalidOp.
func TestDSyncWrite(t *testing.T) {
	forEachBackend(t, 8, func(t *testing.T, r Ring) {
		f := tempFile(t, 0)
		data := bytes.Repeat([]byte{0x5a}, 4096)
		got := run(t, r,
			Op{Code: OpWrite, FD: int32(f.Fd()), Buf: data, DSync: true, UserData: 1},
			Op{Code: OpWritev, FD: int32(f.Fd()), Iov: [][]byte{[]byte("ab"), []byte("cd")}, Off: 4096, DSync: true, UserData: 2})
		if got[1].Res != 4096 || got[2].Res != 4 {
			t.Fatalf("completions %+v", got)
		}
		onDisk, err := os.ReadFile(f.Name())
		if err != nil || !bytes.Equal(onDisk, append(data, "abcd"...)) {
			t.Fatalf("file holds %d bytes (err %v), want the 4100 written", len(onDisk), err)
		}
		for _, code := range []OpCode{OpFdatasync, OpRead, OpNop} {
			op := Op{Code: code, FD: int32(f.Fd()), Buf: data, DSync: true}
			if err := r.Prepare(&op); !errors.Is(err, ErrInvalidOp) {
				t.Errorf("Prepare(%s with DSync) = %v, want ErrInvalidOp", code, err)
			}
		}
	})
}

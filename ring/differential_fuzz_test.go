package ring

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzBackendsAgree runs one op script on the syscall and the uring backend
// and requires identical completions, read data and file contents. The
// script is a list of 4-byte steps: kind, flags (bit 0: link to the next
// step, unless bit 1 cuts the chain), length, offset. Each chain is
// submitted and reaped alone: unlinked ops of one submission may run in any
// order on io_uring, so only chains are comparable.
func FuzzBackendsAgree(f *testing.F) {
	f.Add([]byte{0, 1, 10, 0, 3, 2, 0, 0})                            // write linked to fdatasync
	f.Add([]byte{5, 1, 1, 0, 0, 1, 8, 0, 2, 2, 4, 0})                 // bad fd breaks a chain
	f.Add([]byte{0, 2, 100, 3, 1, 2, 200, 0, 4, 2, 50, 50})           // write, short read, fallocate
	f.Add([]byte{0, 0, 32, 1, 0, 0, 32, 2, 6, 2, 0, 0, 1, 2, 255, 0}) // unlinked ops, one chain each
	if _, err := newUringProbeOnly(); errors.Is(err, ErrUnsupported) {
		skipRefused(f, err)
	} else if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 4*64 {
			script = script[:4*64]
		}
		want, err := runScript(t, BackendSyscall, script)
		if err != nil {
			t.Fatal(err)
		}
		got, err := runScript(t, BackendUring, script)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("backends disagree on %x:\nsyscall: %s\nuring:   %s", script, want, got)
		}
	})
}

// runScript runs script on a fresh ring of backend and file and returns a
// transcript of completions, read data and the final file.
func runScript(t *testing.T, backend string, script []byte) (string, error) {
	r, err := New(Options{Backend: backend, Entries: 64})
	if err != nil {
		return "", err
	}
	defer r.Close()
	file, err := os.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer file.Close()
	var out bytes.Buffer
	reads := make(map[uint64][]byte)
	pending := 0
	flush := func() error {
		if pending == 0 {
			return nil
		}
		dst := make([]Completion, pending)
		n, err := r.Wait(dst, pending, 0)
		if err != nil || n != pending {
			return fmt.Errorf("Wait = %d of %d: %w", n, pending, err)
		}
		sortByUserData(dst)
		for _, c := range dst {
			fmt.Fprintf(&out, "%d:%d ", c.UserData, c.Res)
			if b, ok := reads[c.UserData]; ok && c.Res > 0 {
				fmt.Fprintf(&out, "[%x] ", b[:c.Res])
			}
		}
		pending = 0
		return nil
	}
	for i := 0; i+4 <= len(script); i += 4 {
		op := scriptOp(script[i:i+4], int32(file.Fd()), uint64(i/4))
		if op.Code == OpRead {
			reads[op.UserData] = op.Buf
		}
		if err := r.Prepare(&op); err != nil {
			if errors.Is(err, ErrInvalidOp) {
				continue
			}
			return "", err
		}
		pending++
		if !op.Link || pending == 64 {
			if err := flush(); err != nil {
				return "", err
			}
		}
	}
	if err := flush(); err != nil {
		return "", err
	}
	data, err := os.ReadFile(file.Name())
	fmt.Fprintf(&out, "| file %x", data)
	return out.String(), err
}

// scriptOp decodes one 4-byte step into an op on fd.
func scriptOp(step []byte, fd int32, userData uint64) Op {
	kind, flags, length, off := step[0]%7, step[1], int(step[2]), int64(step[3])
	op := Op{FD: fd, Off: off, Link: flags&1 != 0 && flags&2 == 0, UserData: userData}
	switch kind {
	case 0:
		op.Code, op.Buf = OpWrite, bytes.Repeat([]byte{byte(userData + 1)}, length)
	case 1:
		op.Code, op.Buf = OpRead, make([]byte, length)
	case 2:
		op.Code = OpNop
	case 3:
		op.Code = OpFdatasync
	case 4:
		op.Code, op.Len, op.Mode = OpFallocate, int64(length), unix.FALLOC_FL_KEEP_SIZE
	case 5:
		op.Code, op.FD, op.Buf = OpWrite, 1<<20, []byte{1} // bad descriptor
	case 6:
		op.Code, op.Iov = OpWritev, [][]byte{bytes.Repeat([]byte{0xee}, length), {0xdd}}
	}
	return op
}

func sortByUserData(cs []Completion) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].UserData < cs[j-1].UserData; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

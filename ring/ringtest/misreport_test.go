package ringtest

import (
	"os"
	"syscall"
	"testing"

	"felix/ring"
)

// TestMisreportRunsTheOpAndReportsTheResultPicked: the chosen write reaches the file, yet
// its completion says EIO; an op not chosen keeps its real result; after SetFault(nil)
// nothing is misreported.
func TestMisreportRunsTheOpAndReportsTheResultPicked(t *testing.T) {
	for _, backend := range []string{ring.BackendSyscall, ring.BackendUring} {
		t.Run(backend, func(t *testing.T) {
			fr, f := newFaulty(t, backend, func(*ring.Op) (int32, bool) { return 0, false }) // its ring and file; it injects nothing
			m := NewMisreport(fr, func(op *ring.Op) (int32, bool) {
				return -int32(syscall.EIO), op.Code == ring.OpWrite && op.Off == 0
			})
			fd := int32(f.Fd())
			got := runAll(t, m,
				ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("abcd"), Off: 0, UserData: 1},
				ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("efgh"), Off: 4, UserData: 2})
			if got[1] != -int32(syscall.EIO) || got[2] != 4 {
				t.Fatalf("completions %v, want 1: -EIO, 2: 4", got)
			}
			data, err := os.ReadFile(f.Name())
			if err != nil || string(data) != "abcdefgh" {
				t.Fatalf("file %q, %v: the misreported write must have run", data, err)
			}
			m.SetFault(nil)
			if got := runAll(t, m, ring.Op{Code: ring.OpWrite, FD: fd, Buf: []byte("ijkl"), Off: 0, UserData: 3}); got[3] != 4 {
				t.Fatalf("after SetFault(nil): %v", got)
			}
		})
	}
}

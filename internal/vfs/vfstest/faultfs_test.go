package vfstest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFailAfterAndHeal(t *testing.T) {
	fs := &FaultFS{}
	f, err := fs.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Fd() != -1 {
		t.Fatalf("Fd %d, want -1", f.Fd())
	}
	fs.FailAfter(OpWrite, 1, unix.EIO)
	if _, err := f.WriteAt([]byte("a"), 0); err != nil {
		t.Fatalf("first write: %v", err)
	}
	for range 2 {
		if _, err := f.WriteAt([]byte("b"), 1); !errors.Is(err, unix.EIO) {
			t.Fatalf("write after the allowance: %v", err)
		}
	}
	fs.Fail(OpAllocate, unix.ENOSPC)
	if err := f.Allocate(0, 4096); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("allocate: %v", err)
	}
	fs.Heal()
	if _, err := f.WriteAt([]byte("b"), 1); err != nil {
		t.Fatalf("write after Heal: %v", err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
}

func TestCrashAfterWritesCutsTheLast(t *testing.T) {
	dir := t.TempDir()
	fs := &FaultFS{NoDirect: true}
	if _, err := fs.OpenFile(filepath.Join(dir, "d"), os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("O_DIRECT open: %v", err)
	}
	path := filepath.Join(dir, "f")
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fs.CrashAfterWrites(2, 3)
	if _, err := f.WriteAt([]byte("first"), 0); err != nil || fs.Crashed() {
		t.Fatalf("first write: %v (crashed %v)", err, fs.Crashed())
	}
	if n, err := f.WriteAt([]byte("second"), 5); n != 3 || !errors.Is(err, ErrCrashed) {
		t.Fatalf("last write: %d, %v; want 3 bytes and ErrCrashed", n, err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write after the crash: %v", err)
	}
	for name, err := range map[string]error{
		"fdatasync": f.Datasync(), "rename": fs.Rename(path, path+"2"), "mkdir": fs.MkdirAll(filepath.Join(dir, "m"), 0o755),
		"remove": fs.Remove(path), "fsync-dir": fs.SyncDir(dir),
	} {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s after the crash: %v", name, err)
		}
	}
	if _, err := fs.OpenFile(path, os.O_WRONLY, 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("writable open after the crash: %v", err)
	}
	b, _ := os.ReadFile(path)
	if string(b) != "firstsec" || fs.Writes() != 2 {
		t.Fatalf("file %q after %d writes", b, fs.Writes())
	}
}

func TestPowerLossRevertsUnsyncedWrites(t *testing.T) {
	dir := t.TempDir()
	fs := &FaultFS{TrackSyncs: true}
	path := filepath.Join(dir, "f")
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("durable"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("-lost"), 7); err != nil {
		t.Fatal(err)
	}
	if err := fs.PowerLoss(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "durable" {
		t.Fatalf("after the power loss: %q", b)
	}
}

// FailNth fails exactly one call, counting every FS and File call; a write
// failed so lands half its bytes.
func TestFailNthTearsTheWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	fs := &FaultFS{}
	fs.FailNth(1, unix.EIO) // call 0: OpenFile, call 1: WriteAt
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.WriteAt([]byte("abcd"), 0); n != 2 || !errors.Is(err, unix.EIO) {
		t.Fatalf("torn write: %d, %v", n, err)
	}
	if _, err := f.WriteAt([]byte("abcd"), 0); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	if err := f.Close(); err != nil || fs.Calls() != 4 {
		t.Fatalf("close: %v after %d calls", err, fs.Calls())
	}
}

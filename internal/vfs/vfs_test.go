package vfs_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"felix/internal/vfs"
	"felix/internal/vfs/vfstest"

	"golang.org/x/sys/unix"
)

func TestWriteFileAtomicReplaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	for _, data := range []string{"old", "new contents"} {
		if err := vfs.WriteFileAtomic(vfs.OSFS{}, path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != data {
			t.Fatalf("read %q, %v; want %q", b, err, data)
		}
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
}

// Every failing step leaves the old file and no temp file behind (but the
// directory fsync, which comes after the rename), naming the step.
func TestWriteFileAtomicFailures(t *testing.T) {
	for op, step := range map[vfstest.Op]string{
		vfstest.OpOpen: vfs.StepOpen, vfstest.OpWrite: vfs.StepWrite, vfstest.OpDatasync: vfs.StepWrite,
		vfstest.OpRename: vfs.StepRename, vfstest.OpSyncDir: vfs.StepSyncDir,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		fs := &vfstest.FaultFS{}
		fs.Fail(op, unix.ENOSPC)
		err := vfs.WriteFileAtomic(fs, path, []byte("new"), 0o600)
		var ae *vfs.AtomicError
		if !errors.Is(err, unix.ENOSPC) || !errors.As(err, &ae) || ae.Op != step {
			t.Fatalf("%s: %v, want step %s wrapping ENOSPC", op, err, step)
		}
		b, _ := os.ReadFile(path)
		if want := map[bool]string{true: "new", false: "old"}[op == vfstest.OpSyncDir]; string(b) != want {
			t.Fatalf("%s: file holds %q, want %q", op, b, want)
		}
		if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
			t.Fatalf("%s: temp file left: %v", op, err)
		}
	}
}

// A stale temp file with a wider mode is replaced, not reused.
func TestWriteFileAtomicReplacesAStaleTemp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path+".tmp", []byte("stale and longer"), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path+".tmp", 0o666); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(vfs.OSFS{}, path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if b, _ := os.ReadFile(path); err != nil || string(b) != "new" || st.Mode().Perm() != 0o600 {
		t.Fatalf("file %q mode %v, %v", b, st.Mode(), err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := vfs.ReadFile(vfs.OSFS{}, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := vfs.ReadFile(vfs.OSFS{}, path); err != nil || string(b) != "content" {
		t.Fatalf("ReadFile: %q, %v", b, err)
	}
}

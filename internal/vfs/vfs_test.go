package vfs_test

import (
	"errors"
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

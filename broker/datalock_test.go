package broker

import (
	"errors"
	"testing"
)

// TestDataDirLockIsExclusive: a second holder of one data dir is refused with
// ErrDataDirLocked, and the dir can be locked again once the first lets go
// (found by a two-broker test that lost acknowledged records).
func TestDataDirLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDataDir(dir); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second lock of %s: %v, want ErrDataDirLocked", dir, err)
	}
	first.Close()
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}

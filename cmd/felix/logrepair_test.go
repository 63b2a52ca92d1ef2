package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"felix/seglog"
)

// `felix log repair --stream S` (issue 23 item 2): refused while the data dir's LOCK is
// held (a broker); then it cuts the bad last record of the shard's records log, saves
// the dropped bytes beside it and exits 0; verify then finds the log whole.
func TestLogRepairCutsBadTailRefusedWhileLocked(t *testing.T) {
	data := t.TempDir()
	dir := seglog.ShardDir(data, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: defaultTenant, Namespace: defaultNamespace, Name: "s"})
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(writeLog(t, 5), dir); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, seglog.SegmentFileName(0))
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, st.Size()-2); err != nil { // the last record's payload
		t.Fatal(err)
	}
	f.Close()
	lock, err := os.OpenFile(filepath.Join(data, dataDirLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "", "log", "repair", "--data-dir", data, "--stream", "s"); code != ExitFailure || !strings.Contains(errs, "in use by a broker") {
		t.Fatalf("repair while locked: exit %d %s", code, errs)
	}
	lock.Close()
	if after, _ := os.Stat(seg); after.Size() != st.Size() {
		t.Fatalf("the refused repair changed the segment")
	}
	code, out, errs := runCLI(t, "", "log", "repair", "--data-dir", data, "--stream", "s")
	if code != ExitOK || !strings.Contains(out, "cut at byte") || !strings.Contains(out, "(1 records) dropped") {
		t.Fatalf("repair: exit %d\n%s%s", code, out, errs)
	}
	side, _ := filepath.Glob(filepath.Join(dir, "repair-*.dropped"))
	if len(side) != 1 {
		t.Fatalf("side files %v", side)
	}
	if code, out, errs := runCLI(t, "", "log", "verify", dir); code != ExitOK || !strings.Contains(out, "verified 4 records") {
		t.Fatalf("verify after the repair: exit %d\n%s%s", code, out, errs)
	}
}

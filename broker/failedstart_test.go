package broker

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"felix/seglog"
)

// A start that fails after the run-state was marked running (here: an unreadable key
// store) puts the clean stop back, so the next start is not reported unclean and keeps
// its storage identity (issue 23 item 10). After a crash it stays running: that run's
// recovery must still happen.
func TestFailedStartLeavesTheRunStateClean(t *testing.T) {
	for _, crashedBefore := range []bool{false, true} {
		dir := t.TempDir()
		if crashedBefore {
			if _, _, err := seglog.BeginRun(seglog.OSFS{}, dir, seglog.FsyncOnCommit, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(dir, "auth"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "auth", "keys.json"), []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, dir, nil)
		cfg.Auth = true
		if _, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil {
			t.Fatal("a start with a damaged key store succeeded")
		}
		st, err := seglog.ReadRunState(seglog.OSFS{}, dir)
		if err != nil || !st.Found || st.CleanStop == crashedBefore {
			t.Fatalf("crashed before %v: run-state after a failed start %+v %v", crashedBefore, st, err)
		}
	}
}

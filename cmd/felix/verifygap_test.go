package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"felix/seglog"
)

// The issue-23 repro: one 512-byte sector zeroed mid-segment (dd seek=N
// conv=notrunc). verify must not call the log whole: it reports DataAfterEnd
// with the byte positions and exits 7 (docs/cli.md).
func TestLogVerifyReportsZeroGapFollowedByData(t *testing.T) {
	dir := writeLog(t, 400)
	seg := filepath.Join(dir, seglog.SegmentFileName(0))
	st, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt(make([]byte, 512), st.Size()/2&^511)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "", "log", "verify", dir)
	if code != ExitCorrupt || !strings.Contains(out, "problem: seglog: DataAfterEnd in ") ||
		!strings.Contains(out, "non-zero data at byte ") || !strings.Contains(errs, "problems found") {
		t.Fatalf("verify a log with a zeroed sector: exit %d, want %d\n%s%s", code, ExitCorrupt, out, errs)
	}
}

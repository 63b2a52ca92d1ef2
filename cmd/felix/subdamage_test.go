package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"felix/seglog"
)

// `felix sub --from earliest` over a damaged sealed segment (issue 23 item 1): it prints
// the records below the damage, then the broker's storage_failed naming the stream, shard,
// segment and byte, and exits 8 instead of stopping silently or re-subscribing; `stream
// describe` shows the damage.
func TestSubStopsAtDamageWithExit8(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"FELIX_DURABLE_SEGMENT_BYTES=65536", "FELIX_DURABLE_FSYNC_MODE=on_commit", "FELIX_CORE_SHARDS=1"}
	logPath := filepath.Join(t.TempDir(), "broker.log")
	info, stop, err := startBroker(data, logPath, env...)
	if err != nil {
		t.Fatal(err)
	}
	cli := func(stdin string, args ...string) (int, string, string) {
		flags := []string{"--server", info.QUICAddr, "--admin", "http://" + info.HTTPAddr, "--fingerprint", info.Fingerprint,
			"--token-file", filepath.Join(data, "admin.token")}
		return runCLI(t, stdin, append(flags, args...)...)
	}
	if code, _, errs := cli("", "stream", "create", "damaged"); code != ExitOK {
		t.Fatalf("stream create: %d %s", code, errs)
	}
	for batch := range 10 { // 10 batches of 60 records: segment 0 (64 KiB) is sealed
		var lines strings.Builder
		for i := range 60 {
			fmt.Fprintf(&lines, "%03d%s\n", batch*60+i, strings.Repeat("p", 197))
		}
		if code, _, errs := cli(lines.String(), "pub", "damaged"); code != ExitOK {
			t.Fatalf("pub: %d %s", code, errs)
		}
	}
	stop()
	segs, _ := filepath.Glob(filepath.Join(data, "streams", "*_damaged_0-*", seglog.SegmentFileName(0)))
	if len(segs) != 1 {
		t.Fatalf("segment: %v", segs)
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{0xff}, 32+4*232+32+100) // offset 4's payload
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if info, stop, err = startBroker(data, logPath, env...); err != nil {
		t.Fatal(err)
	}
	defer stop()
	code, out, errs := cli("", "sub", "damaged", "--from", "earliest")
	if code != ExitStorageFailed || strings.Count(out, "\n") != 4 || !strings.Contains(errs, "storage_failed") ||
		!strings.Contains(errs, "segment 00000000000000000000.log at byte 960") || strings.Contains(errs, data) {
		logs, _ := os.ReadFile(logPath)
		t.Fatalf("sub over the damage: exit %d\nstdout:\n%s\nstderr:\n%s\nbroker:\n%s", code, out, errs, logs)
	}
	if code, out, _ := cli("", "stream", "describe", "damaged"); code != ExitOK || !strings.Contains(out, "shard 0: RecordChecksum in segment 00000000000000000000.log at byte 960") {
		t.Fatalf("describe: exit %d\n%s", code, out)
	}
}

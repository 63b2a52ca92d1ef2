package supervisor

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/client"
	"felix/seglog"
)

// getStatus is one GET bounded by d; it returns the status code or the error.
func getStatus(url string, d time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := readyClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

func TestBrokerPauseResumeTerminateKillRestart(t *testing.T) {
	s := NewForTest(t)
	n := startBroker(t, s)
	ctx := testCtx(t, 3*time.Minute)
	n.createStream(ctx, t)
	n.publish(ctx, t, 0, 5)
	ready := "http://" + n.ready.HTTPAddr + "/ready"
	if err := n.p.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	// A stopped broker accepts TCP connections (the kernel does) but answers nothing.
	if code, err := getStatus(ready, 300*time.Millisecond); err == nil {
		t.Fatalf("paused broker answered /ready: %d", code)
	}
	if err := n.p.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := getStatus(ready, 10*time.Second); err != nil || code != http.StatusOK {
		t.Fatalf("resumed broker /ready: %d, %v", code, err)
	}
	n.stop(t) // SIGTERM: a clean drain exits 0
	n = n.restart(t)
	if got := n.readUntil(ctx, t, payload(4)); len(got) != 5 {
		t.Fatalf("after a clean restart: %q", got)
	}
	st, err := n.p.Kill(ctx)
	if err != nil || st.Signal != syscall.SIGKILL {
		t.Fatalf("Kill = %v, %v", st, err)
	}
	if n.p.PeakRSS() < 1<<20 {
		t.Errorf("broker peak RSS %d bytes", n.p.PeakRSS())
	}
	n = n.restart(t)
	if n.p.Run() != 3 {
		t.Fatalf("run %d", n.p.Run())
	}
	if got := n.readUntil(ctx, t, payload(4)); len(got) != 5 {
		t.Fatalf("after SIGKILL and restart: %q", got)
	}
}

// A torn last record is cut off at the next start (docs/storage-format.md, "Torn tails");
// every earlier record stays and the next publish takes the freed offset.
func TestTruncateNewestSegmentIsRepaired(t *testing.T) {
	_, n := prepared(t, 30)
	dir := n.shardDir(t)
	if c := segmentCount(t, dir); c < 2 {
		t.Fatalf("%d segments; want several (4 KiB segments)", c)
	}
	res, err := TruncateNewestSegment(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("truncated %+v", res)
	if res.RecordOffset != 29 || res.NewSize <= res.RecordStart || res.NewSize >= res.RecordEnd {
		t.Fatalf("cut %+v: want inside the record at offset 29", res)
	}
	ins, err := seglog.Inspect(dir, io.Discard, seglog.ToolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newest := ins.Segments[len(ins.Segments)-1]
	var ce *seglog.CorruptionError
	if !errors.As(newest.Err, &ce) || ce.Kind != seglog.CorruptTruncated || newest.NextOffset != 29 {
		t.Fatalf("newest segment before restart: next %d, err %v", newest.NextOffset, newest.Err)
	}
	ctx := testCtx(t, 2*time.Minute)
	n = n.restart(t)
	n.publish(ctx, t, 100, 1)
	got := n.readUntil(ctx, t, payload(100))
	if len(got) != 30 || got[28] != "record 0028" || got[29] != "record 0100" {
		t.Fatalf("after the repair: %d records, last %q", len(got), got[max(0, len(got)-3):])
	}
	n.stop(t)
	if vr, err := seglog.Verify(dir, io.Discard, seglog.ToolOptions{}); err != nil || vr.Records != 30 {
		t.Fatalf("verify after the repair: %d records, %v", vr.Records, err)
	}
}

// One inverted byte in a sealed segment: `felix log verify` finds it (exit 7) at that segment.
func TestFlipSealedByteIsFoundByVerify(t *testing.T) {
	_, n := prepared(t, 30)
	dir := n.shardDir(t)
	if out, code := felixCLI(t, "log", "verify", dir); code != 0 {
		t.Fatalf("verify before the flip: exit %d\n%s", code, out)
	}
	res, err := FlipSealedByte(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flipped %+v", res)
	segs, _ := segments(dir)
	if res.Segment == segs[len(segs)-1] || res.Old == res.New {
		t.Fatalf("flip %+v: want a sealed segment, a changed byte", res)
	}
	out, code := felixCLI(t, "log", "verify", dir)
	id := strings.TrimSuffix(filepath.Base(res.Segment), ".log")
	if code != 7 || !strings.Contains(out, "1 problems") {
		t.Fatalf("verify after the flip: exit %d, want 7 and one problem\n%s", code, out)
	}
	vr, _ := seglog.Verify(dir, io.Discard, seglog.ToolOptions{})
	if len(vr.Problems) != 1 || strconv.FormatInt(vr.Problems[0].Segment, 10) != strings.TrimLeft(id, "0") {
		t.Fatalf("problems %v, want one in segment %s", vr.Problems, id)
	}
	if vr.Records != 29 {
		t.Errorf("%d good records, want 29 (one damaged)", vr.Records)
	}
	// Damage in a sealed segment takes down only that shard (issue 23 items 1 and 2): the
	// broker starts and serves, and reports the damage once at error level naming the
	// stream's segment and the checksum that failed.
	ctx := testCtx(t, 2*time.Minute)
	p, err := n.p.Restart(ctx, nil)
	if err != nil {
		t.Fatalf("restart on the flipped byte: %v (a damaged shard must not stop the broker)", err)
	}
	if err := p.WaitOutput(ctx, "shard log damaged"); err != nil {
		t.Fatalf("no damage report after the restart: %v\n%s", err, p.Tail())
	}
	if tail := p.Tail(); !strings.Contains(tail, "RecordChecksum") || !strings.Contains(tail, "segment="+id+".log") {
		t.Fatalf("the damage report does not name the segment %s and the checksum:\n%s", id, tail)
	}
}

// Deleting the epochs file loses only the derived epoch history, never a record.
func TestDeleteEpochs(t *testing.T) {
	_, n := prepared(t, 10)
	dir := n.shardDir(t)
	withLog(t, dir, func(l *seglog.Log) {
		if err := l.AddEpoch(1, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.AddEpoch(2, 5); err != nil {
			t.Fatal(err)
		}
	})
	existed, err := DeleteEpochs(dir)
	if err != nil || !existed {
		t.Fatalf("DeleteEpochs = %v, %v", existed, err)
	}
	if existed, err := DeleteEpochs(dir); err != nil || existed {
		t.Fatalf("second DeleteEpochs = %v, %v", existed, err)
	}
	withLog(t, dir, func(l *seglog.Log) {
		if eps := l.Epochs(); len(eps) != 0 || l.NextOffset() != 10 {
			t.Fatalf("after the delete: epochs %v, next offset %d", eps, l.NextOffset())
		}
	})
	ctx := testCtx(t, 2*time.Minute)
	n = n.restart(t)
	if got := n.readUntil(ctx, t, payload(9)); len(got) != 10 {
		t.Fatalf("records after the delete: %q", got)
	}
}

// withLog opens the stopped broker's log offline (synchronous I/O), runs fn, closes it.
func withLog(t *testing.T, dir string, fn func(*seglog.Log)) {
	t.Helper()
	l, err := seglog.NewDisk(nil, nil).Open(seglog.Options{Dir: dir, SegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	fn(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// A wiped data dir starts as a new broker (no stream), keeping only the node id.
func TestWipeDataDirKeepsNodeID(t *testing.T) {
	_, n := prepared(t, 3)
	idFile := filepath.Join(n.dataDir, "node-id")
	if err := os.WriteFile(idFile, []byte("node-7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removed, err := WipeDataDir(n.dataDir, "node-id")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(removed, "streams") || !slices.Contains(removed, "catalog.json") {
		t.Errorf("removed %q", removed)
	}
	left, _ := os.ReadDir(n.dataDir)
	if len(left) != 1 || left[0].Name() != "node-id" {
		t.Fatalf("left after the wipe: %v", left)
	}
	n = n.restart(t)
	adm, err := client.NewAdmin(n.ready.HTTPAddr, client.AdminToken(n.token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DescribeStream(testCtx(t, time.Minute), streamName); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("stream after the wipe: %v, want not found", err)
	}
	if b, _ := os.ReadFile(idFile); string(b) != "node-7\n" {
		t.Fatalf("node id after the wipe: %q", b)
	}
}

func TestWipeDataDirKeepRules(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a/keep", "a/drop", "b/c", "top"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755)
		os.WriteFile(filepath.Join(dir, f), []byte(f), 0o644)
	}
	if _, err := WipeDataDir(dir, "missing"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing keep: %v", err)
	}
	for _, bad := range []string{"../x", "/etc/passwd", "a", "."} {
		if _, err := WipeDataDir(dir, bad); err == nil {
			t.Errorf("keep %q accepted", bad)
		}
	}
	removed, err := WipeDataDir(dir, "a/keep")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if strings.Join(removed, " ") != "a/drop b top" {
		t.Fatalf("removed %q", removed)
	}
	if _, err := os.Stat(filepath.Join(dir, "a/keep")); err != nil {
		t.Fatal(err)
	}
}

func TestFaultsNeedSegments(t *testing.T) {
	dir := t.TempDir()
	if _, err := TruncateNewestSegment(dir); !errors.Is(err, ErrNoSegment) {
		t.Errorf("truncate in an empty dir: %v", err)
	}
	h := seglog.AppendSegmentHeader(nil, seglog.SegmentHeader{Version: 3, BaseOffset: 0, CreatedAtMicros: 1})
	os.WriteFile(filepath.Join(dir, seglog.SegmentFileName(0)), h, 0o644)
	if _, err := TruncateNewestSegment(dir); !errors.Is(err, ErrNoRecord) {
		t.Errorf("truncate of a header-only segment: %v", err)
	}
	if _, err := FlipSealedByte(dir); !errors.Is(err, ErrNoSealedSegment) {
		t.Errorf("flip with one segment: %v", err)
	}
}

func TestTmpfsGivesENOSPC(t *testing.T) {
	dir := MountTmpfsForTest(t, 1<<20)
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil || st.Type != 0x01021994 { // TMPFS_MAGIC
		t.Fatalf("statfs %s: type %#x, %v", dir, st.Type, err)
	}
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	var werr error
	for i := 0; i < 64 && werr == nil; i++ { // at most 4 MiB into 1 MiB
		_, werr = f.Write(chunk)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 4 MiB into a 1 MiB tmpfs: %v, want ENOSPC", werr)
	}
}

func TestMountTmpfsUnmounts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	unmount, err := MountTmpfs(dir, 64<<10)
	if errors.Is(err, ErrMountRefused) {
		SkipOrFail(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(t, dir) {
		t.Fatal("not in /proc/self/mounts after MountTmpfs")
	}
	if err := unmount(); err != nil {
		t.Fatal(err)
	}
	if err := unmount(); err != nil {
		t.Fatalf("second unmount: %v", err)
	}
	if mounted(t, dir) {
		t.Fatal("still mounted after unmount")
	}
	if _, err := MountTmpfs(dir, 100); err == nil {
		t.Fatal("a 100-byte tmpfs was accepted")
	}
}

func mounted(t *testing.T, dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == dir && f[2] == "tmpfs" {
			return true
		}
	}
	return false
}

package upgrade

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"felix/seglog"
	"felix/testbed/supervisor"
)

// TestStorageFormat (seed "Storage format: the one that does not roll back"): the current
// build reads a log the previous release wrote, writes it at a version the previous release
// reads (so the upgrade is reversible and the old build reads it back), and both builds
// refuse a segment at a version newer than they read, naming it, with no record served.
func TestStorageFormat(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRig(t)
	oldRead, oldWrite := releaseVersions(t)
	t.Logf("segment versions: %s reads %d..%d and writes %d; the current build reads %d..%d and writes %d",
		from.tag, seglog.MinReadVersion, oldRead, oldWrite, seglog.MinReadVersion, seglog.MaxReadVersion, seglog.WriteVersion)
	bp := r.startBroker(ctx, oldBuild, "broker")
	r.mustFelix(ctx, oldBuild, bp, "stream", "create", "orders")
	r.publishN(ctx, oldBuild, bp, "orders", "old", 4)
	r.swap(ctx, bp, newBuild)
	want := "old-0\nold-1\nold-2\nold-3\n"
	if got := r.mustFelix(ctx, newBuild, bp, "sub", "orders", "--from", "earliest", "--count", "4"); got != want {
		t.Fatalf("the current build reading %s's log: %q, want %q", from.tag, got, want)
	}
	r.publishN(ctx, newBuild, bp, "orders", "new", 2)
	seg := streamSegment(t, bp.data, "orders")
	if v := segmentVersion(t, seg); v > oldRead {
		t.Fatalf("the current build wrote %s at version %d, above %s's %d: the upgrade is not reversible", seg, v, from.tag, oldRead)
	} else {
		t.Logf("the current build appended at version %d: %s reads it", v, from.tag)
	}
	r.swap(ctx, bp, oldBuild)
	want += "new-0\nnew-1\n"
	if got := r.mustFelix(ctx, oldBuild, bp, "sub", "orders", "--from", "earliest", "--count", "6"); got != want {
		t.Fatalf("%s reading the log back after the current build wrote to it: %q, want %q", from.tag, got, want)
	}
	if _, err := bp.proc.Terminate(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	// The knob: both builds read up to the same version, so a segment from a newer build is
	// played by rewriting the header's version to one past the current build's (CRC recomputed).
	newer := max(seglog.MaxReadVersion, oldRead) + 1
	setSegmentVersion(t, seg, newer)
	for _, b := range []build{oldBuild, newBuild} {
		refusesNewer(ctx, r, bp, b, newer)
	}
}

// refusesNewer starts bp on build b over a log whose segment is at version newer and checks
// the refusal: the broker does not start, or it starts with that shard down and a read of it
// fails naming the version (seed: "one newer than the build knows is a Corruption").
func refusesNewer(ctx context.Context, r *rig, bp *brokerProc, b build, newer uint16) {
	r.t.Helper()
	p, err := r.sup.Restart(ctx, bp.proc, func(s *supervisor.Spec) { s.Path = b.broker })
	if err != nil {
		r.t.Logf("%s refused to start over a version %d segment: %v", b.name, newer, err)
		return
	}
	bp.proc, bp.built = p, b
	out, errOut, code := r.felix(ctx, b, bp, "sub", "orders", "--from", "earliest", "--count", "1")
	logs := p.Tail()
	if code == 0 || out != "" || !strings.Contains(logs, "SegmentVersion") || !strings.Contains(logs, fmt.Sprintf("version %d", newer)) {
		r.t.Fatalf("%s over a version %d segment: sub exit %d stdout %q stderr %q; want a refusal naming the version", b.name,
			newer, code, out, errOut)
	}
	r.t.Logf("%s started with the shard down: sub exit %d (%s); its log names SegmentVersion, version %d", b.name, code,
		strings.TrimSpace(errOut), newer)
	if _, err := p.Terminate(ctx, 15*time.Second); err != nil {
		r.t.Fatal(err)
	}
}

// releaseVersions reads MaxReadVersion and WriteVersion from the release's seglog/format.go.
func releaseVersions(t *testing.T) (maxRead, write uint16) {
	t.Helper()
	src, err := git(repoRoot, "show", from.commit+":seglog/format.go")
	if err != nil {
		t.Fatal(err)
	}
	num := func(name string) uint16 {
		m := regexp.MustCompile(name + `\s+uint16 = (\d+)`).FindStringSubmatch(src)
		if m == nil {
			t.Fatalf("%s's seglog/format.go: no %s", from.tag, name)
		}
		n, _ := strconv.Atoi(m[1])
		return uint16(n)
	}
	return num("MaxReadVersion"), num("WriteVersion")
}

// streamSegment is the first segment file of shard 0 of stream name under a data dir.
func streamSegment(t *testing.T, data, name string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(data, "streams", "default_default_"+name+"_0-*", "00000000000000000000.log"))
	if err != nil || len(m) != 1 {
		t.Fatalf("the segment of %s under %s: %v %v", name, data, m, err)
	}
	return m[0]
}

// segmentVersion decodes the header of the segment file at path.
func segmentVersion(t *testing.T, path string) uint16 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := seglog.DecodeSegmentHeader(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return h.Version
}

// setSegmentVersion rewrites the header of the segment at path to version v, with a header
// checksum that matches (so only the version is wrong for a reader).
func setSegmentVersion(t *testing.T, path string, v uint16) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := seglog.DecodeSegmentHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	h.Version = v
	hdr := seglog.AppendSegmentHeader(nil, h)
	if binary.BigEndian.Uint16(hdr[4:]) != v {
		t.Fatalf("header not rewritten")
	}
	copy(b, hdr)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestMeasureLimits: every limit is measured (briefly) in a temp dir, with no error.
func TestMeasureLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("writes to the disk and runs a QUIC echo")
	}
	dir := t.TempDir()
	lim := MeasureLimits(context.Background(), dir, 40*time.Millisecond)
	t.Logf("%+v", lim)
	if len(lim.Errors) > 0 || lim.Dir != dir {
		t.Fatalf("limits: %+v", lim)
	}
	if lim.FdatasyncPerSec <= 0 || lim.DiskBytesPerSec <= 0 || lim.QUICEchoBytesPerSec <= 0 || lim.SyncWriteP50 <= 0 {
		t.Fatalf("a limit was not measured: %+v", lim)
	}
	if lim.GroupCommit1KiB() != 64*lim.FdatasyncPerSec {
		t.Fatalf("group commit %v", lim.GroupCommit1KiB())
	}
	if d := MeasureDiskLimits(context.Background(), dir, 40*time.Millisecond); len(d.Errors) > 0 || d.FdatasyncPerSec <= 0 || d.SyncWriteP50 <= 0 {
		t.Fatalf("disk limits: %+v", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if lim := MeasureLimits(ctx, dir, time.Second); lim.DiskBytesPerSec != 0 || lim.FdatasyncPerSec != 0 || lim.QUICEchoBytesPerSec != 0 || lim.SyncWriteP50 != 0 || len(lim.Errors) != 4 {
		t.Fatalf("a cancelled measurement reported %+v", lim)
	}
}

// TestLimitShare: each kind of shape is set against the limit of the same run that
// bounds it, and a limit not measured gives no share.
func TestLimitShare(t *testing.T) {
	lim := Limits{FdatasyncPerSec: 1000, DiskBytesPerSec: 2e9, QUICEchoBytesPerSec: 1e8}
	for _, c := range []struct {
		r    *Result
		lim  Limits
		want string
	}{
		{res("felix", "durable-1k-on_commit", KindDurable, 32000, 32e6, 0, 0), lim,
			"50.0 % of the group-commit limit (64 k 1 KiB records/s); 1.6 % of disk bandwidth (2000.0 MB/s)"},
		{res("felix", "pubsub-1k", KindPubSub, 1, 25e6, 0, 0), lim, "25.0 % of the QUIC echo ceiling (100.0 MB/s)"},
		{res("felix", "replay-1k", KindReplay, 1, 2e8, 0, 0), lim, "200.0 % of the QUIC echo ceiling (100.0 MB/s)"},
		{res("felix", "durable-1k-none", KindDurable, 1, 1, 0, 0), Limits{}, "the group-commit limit not measured; disk bandwidth not measured"},
		{res("felix", "cache-256-c50", KindCache, 1, 1, 0, 0), Limits{}, "the QUIC echo ceiling not measured"},
	} {
		if got := LimitShare(*c.r, c.lim); got != c.want {
			t.Errorf("%s: %q, want %q", c.r.Shape.Name, got, c.want)
		}
	}
	_, ts := judge(map[string]*Result{"durable-1k-on_commit": res("felix", "d", KindDurable, 1, 0, 0, 0)},
		map[string]*Result{"js-always-8pub-1k": res("js", "d", KindDurable, 1, 0, 0, 0)}, Limits{})
	if len(ts) == 0 || !strings.Contains(ts[0].Got, "group-commit limit not measured") {
		t.Fatalf("durable target without a measured limit: %+v", ts)
	}
}

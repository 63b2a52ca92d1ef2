package core

import (
	"log/slog"
	"sync"

	"felix/seglog"
)

// openedLogs records the log directories opened in this run, so that only a
// log's first open trusts the previous run's clean stop
// (Config.PreviousRunClean; docs/storage-format.md "Recovery"): a log closed
// and reopened within the run (a shard moved, a failed log reopened) holds
// this run's writes, which a crash of this run may have torn.
type openedLogs struct {
	mu   sync.Mutex
	dirs map[string]bool
}

// first reports whether dir is opened for the first time in this run, and
// marks it opened. Goroutine-safe (every core's disk shares one set).
func (o *openedLogs) first(dir string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.dirs[dir]
	o.dirs[dir] = true
	return !seen
}

// warnTornTail logs at WARN the tail an open truncated after an unclean stop
// (seglog.RecoveryInfo TornTail*, DataAfterGapAt: the first non-zero byte
// found past a zero gap): never silent (issue 23). No-op when nothing was cut.
func warnTornTail(dir string, ri seglog.RecoveryInfo) {
	if ri.TornTailBytes == 0 {
		return
	}
	slog.Warn("core: log opened after an unclean stop: torn tail truncated", "dir", dir,
		"segment", seglog.SegmentFileName(ri.TornTailSegment), "at_byte", ri.TornTailAt,
		"bytes_dropped", ri.TornTailBytes, "data_after_gap_at", ri.DataAfterGapAt)
}

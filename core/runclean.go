package core

import (
	"log/slog"
	"sync"

	"github.com/VictoriaMetrics/metrics"

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
// marks it opened. Goroutine-safe (every core's disk shares one set). A nil
// set (a disk opened without an engine's Config) treats every open as first.
func (o *openedLogs) first(dir string) bool {
	if o == nil {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := o.dirs[dir]
	o.dirs[dir] = true
	return !seen
}

// recoveryMetrics count what opens repaired (in Config.Metrics):
//
//	felix_storage_recovery_truncated_bytes   counter: torn-tail bytes truncated at open
//	felix_storage_recovery_truncated_records counter: records those bytes held (RecoveryInfo.TornTailRecords)
type recoveryMetrics struct {
	bytes, records *metrics.Counter
}

func newRecoveryMetrics(set *metrics.Set) recoveryMetrics {
	return recoveryMetrics{bytes: set.GetOrCreateCounter("felix_storage_recovery_truncated_bytes"),
		records: set.GetOrCreateCounter("felix_storage_recovery_truncated_records")}
}

// warnTornTail logs at WARN the tail an open of the log in dir truncated
// (seglog.RecoveryInfo TornTail*, DataAfterGapAt: the first non-zero byte
// found past a zero gap) and counts its bytes and records: never silent
// (issue 23 item 3). No-op when nothing was cut.
func warnTornTail(log *slog.Logger, m recoveryMetrics, dir string, ri seglog.RecoveryInfo) {
	if ri.TornTailBytes == 0 {
		return
	}
	m.bytes.AddInt64(ri.TornTailBytes)
	m.records.AddInt64(ri.TornTailRecords)
	log.Warn("core: log opened after an unclean stop: torn tail truncated", "log", dir,
		"segment", seglog.SegmentFileName(ri.TornTailSegment), "at_byte", ri.TornTailAt,
		"bytes_dropped", ri.TornTailBytes, "records_dropped", ri.TornTailRecords,
		"data_after_gap_at", ri.DataAfterGapAt)
}

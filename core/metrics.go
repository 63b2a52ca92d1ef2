package core

import (
	"fmt"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// Metrics (VictoriaMetrics, in Config.Metrics):
//
//	felix_core_inbox_depth{core}                   gauge: messages waiting in the inbox
//	felix_core_drain_batch_size{core}              histogram: messages taken per loop turn
//	felix_core_pinned{core}                        gauge: 1 when sched_setaffinity succeeded
//	felix_stream_publish_batch_records{stream,shard} histogram: records per publish
//	felix_stream_append_wait_seconds{stream,shard} histogram: enqueue → staged in the log
//	felix_stream_commit_seconds{stream,shard}      histogram: staged → append completed (fsync per mode)
//	felix_subscribe_dropped_total{stream,shard}    counter: records dropped by DropNew subscribers
//	felix_subscribe_slow_ended_total{stream,shard} counter: Block subscribers ended by their timeout
//	felix_subscribe_catchup_total{stream,shard}    counter: episodes of a full durable subscriber reading from the log (catchup.go)
//	felix_subscribe_catchup_records_total{stream,shard} counter: records those episodes read from the log
//	felix_stream_subscriber_lag_records{stream,shard} gauge: most records queued for one subscriber
//	felix_stream_failed{stream,shard}              gauge: 1 once the shard's storage failed
//	felix_stream_damaged{stream,shard}             gauge: 1 once damage was found in the shard's log (damage.go)
//	felix_storage_recovery_truncated_bytes         counter: torn-tail bytes cut at open (runclean.go)
//	felix_storage_recovery_truncated_records       counter: records those bytes held
//	felix_storage_write_retries_total              counter: retries of shard logs whose writes failed (storage_retry.go)
type coreMetrics struct {
	drainBatch *metrics.Histogram
	pinned     atomic.Bool
}

func newCoreMetrics(set *metrics.Set, c *core) *coreMetrics {
	m := &coreMetrics{}
	label := fmt.Sprintf(`{core="%d"}`, c.id)
	m.drainBatch = set.GetOrCreateHistogram("felix_core_drain_batch_size" + label)
	set.GetOrCreateGauge("felix_core_inbox_depth"+label, func() float64 { return float64(c.inbox.depth()) })
	set.GetOrCreateGauge("felix_core_pinned"+label, func() float64 {
		if m.pinned.Load() {
			return 1
		}
		return 0
	})
	return m
}

type shardMetrics struct {
	set        *metrics.Set
	names      []string
	batch      *metrics.Histogram
	appendWait *metrics.Histogram
	commit     *metrics.Histogram
	drops      *metrics.Counter
	slowEnded  *metrics.Counter
	catchUps   *metrics.Counter
	// catchUpRecords is added to by subscribers' goroutines (catchup.go).
	catchUpRecords *metrics.Counter
	lag            atomic.Uint64
	failed         atomic.Int64
}

func newShardMetrics(set *metrics.Set, s *streamShard) *shardMetrics {
	m := &shardMetrics{set: set}
	label := fmt.Sprintf(`{tenant=%q,namespace=%q,stream=%q,shard="%d"}`, s.name.Tenant, s.name.Namespace, s.name.Stream, s.index)
	name := func(base string) string {
		m.names = append(m.names, base+label)
		return base + label
	}
	m.batch = set.GetOrCreateHistogram(name("felix_stream_publish_batch_records"))
	m.appendWait = set.GetOrCreateHistogram(name("felix_stream_append_wait_seconds"))
	m.commit = set.GetOrCreateHistogram(name("felix_stream_commit_seconds"))
	m.drops = set.GetOrCreateCounter(name("felix_subscribe_dropped_total"))
	m.slowEnded = set.GetOrCreateCounter(name("felix_subscribe_slow_ended_total"))
	m.catchUps = set.GetOrCreateCounter(name("felix_subscribe_catchup_total"))
	m.catchUpRecords = set.GetOrCreateCounter(name("felix_subscribe_catchup_records_total"))
	set.GetOrCreateGauge(name("felix_stream_subscriber_lag_records"), func() float64 { return float64(m.lag.Load()) })
	set.GetOrCreateGauge(name("felix_stream_failed"), func() float64 { return float64(m.failed.Load()) })
	set.GetOrCreateGauge(name("felix_stream_damaged"), func() float64 {
		if s.damage.Load() != nil {
			return 1
		}
		return 0
	})
	return m
}

func (m *shardMetrics) unregister() {
	for _, n := range m.names {
		m.set.UnregisterMetric(n)
	}
}

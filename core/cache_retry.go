package core

import (
	"errors"

	"felix/core/cache"
	"felix/proto"
	"felix/seglog"
)

// The cache half of the storage retry (storage_retry.go; issue 23 item 4): a
// durable cache shard whose cache or counter log failed with an I/O error
// (ENOSPC, EIO) answers writes storage_failed (a *WriteError naming the cache
// and shard, never the path), keeps answering gets and counter reads from
// memory, and retries by itself: a probe write, then its logs are cut back to
// what was committed (writes answered storage_failed were not applied),
// reopened and replayed into a fresh state machine, and it serves writes again.

// readsFromMemory reports whether a read on cs may be answered from memory
// although cs refuses writes: its failure is a retried write failure.
func (cs *cacheShard) readsFromMemory(err error) bool {
	return err != nil && err == cs.failed && cs.retryable(err)
}

// retryable reports whether cs's failure err is cured by a retry.
func (cs *cacheShard) retryable(err error) bool {
	return cs.durable && !cs.closed && errors.Is(err, seglog.ErrStorageFailed) && !errors.Is(err, seglog.ErrCorruption)
}

// writeFailed is the error of a failed append of cs's logs (a *WriteError for an I/O failure).
func (cs *cacheShard) writeFailed(op string, err error) error {
	return writeFailed(ShardRef{Kind: ShardCache, Name: cs.name.asStream(), Shard: cs.index}, cs.durable, op, err)
}

// startRetry begins a storage episode of cs (its first failure): one ERROR
// line with the path, then retries (retryStorage).
func (cs *cacheShard) startRetry(err error) {
	if !cs.retryable(err) {
		return
	}
	cs.c.engine.cfg.Logger.Error("core: cache shard log write failed: writes answer storage_failed, reads are served from memory; retrying until the disk takes writes",
		"cache", cs.name.asStream().String(), "shard", cs.index, "err", logCause(err))
	cs.retryDelay = retryFirst
	cs.c.timers.schedule(&cs.retryTimer, cs.c.clock.MonoNanos()+int64(cs.retryDelay))
}

// retryStorage is one retry of cs (core timer).
func (cs *cacheShard) retryStorage(now int64) {
	if cs.closed || !cs.retryable(cs.failed) {
		return
	}
	cs.c.engine.cfg.Metrics.GetOrCreateCounter("felix_storage_write_retries_total").Inc()
	if err := cs.reopenAfterFailure(); err != nil {
		cs.retryDelay = nextRetry(cs.retryDelay)
		cs.c.timers.schedule(&cs.retryTimer, now+int64(cs.retryDelay))
		return
	}
	cs.c.engine.cfg.Logger.Info("core: cache shard log writes again: storage failure over",
		"cache", cs.name.asStream().String(), "shard", cs.index)
}

// reopenAfterFailure probes, cuts both logs to their committed offsets,
// reopens and replays them into a fresh state machine.
func (cs *cacheShard) reopenAfterFailure() error {
	if !cs.idleNow() {
		return ErrOverloaded
	}
	if err := probeWrite(cs.log); err != nil {
		return err
	}
	cs.closeLogs()
	err := cs.trimLog(proto.LogCache, cs.cacheCommitted)
	if err == nil {
		err = cs.trimLog(proto.LogCounters, cs.counterCommitted)
	}
	if err == nil {
		cs.sm = cache.New(cs.limits)
		err = cs.openLogs()
	}
	if err != nil {
		cs.log, cs.counters = damagedLog{cs.failed}, damagedLog{cs.failed}
		return err
	}
	cs.durableLog = cs.log
	cs.failed = nil
	cs.reportStats()
	return nil
}

// trimLog cuts cs's log of kind log back to committed.
func (cs *cacheShard) trimLog(log proto.ReplicaLog, committed uint64) error {
	l, err := cs.c.disk.OpenLog(cs.logAddr(log), logOptions{})
	if err != nil {
		return err
	}
	if l.NextOffset() > committed {
		err = l.TruncateSuffix(committed)
	}
	return errors.Join(err, l.Close())
}

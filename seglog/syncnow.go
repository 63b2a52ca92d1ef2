package seglog

// SyncNow: an fdatasync of one log on demand, whatever its fsync mode (issue 18's
// decision, docs/replication.md: "replicated batches are group-committed with fdatasync
// whatever the broker's fsync mode"). A follower's replicated batches complete once
// written under fsync periodic and none, as every append does; it then asks SyncNow for
// the fdatasync its acknowledgement needs. One fdatasync covers every batch written
// before it (group commit): the batches staged by every SyncNow call made while one is
// in flight share the next.

// syncNowWaiter is one SyncNow call: done runs once durable_offset reaches want.
type syncNowWaiter struct {
	want uint64
	done func(durable uint64, err error)
}

// SyncNow runs done with the log's durable_offset once an fdatasync covers every record
// staged before the call (want = NextOffset now): at once when DurableOffset is there
// already; under on_commit after the fdatasync its appends wait for anyway; under
// periodic and none it starts one as soon as those records are written (the next
// Disk.Flush), without waiting for the periodic interval. done runs on the Disk's
// poller (inside Poll, as append callbacks) and must not block. A log that fails first
// runs done with the failure (wrapping ErrStorageFailed); a log that closes first never
// runs it. Errors (done not called): ErrClosed, the log's failure.
func (l *Log) SyncNow(done func(durable uint64, err error)) error {
	switch {
	case l.closed:
		return ErrClosed
	case l.failed != nil:
		return l.failed
	}
	want := l.next
	if d := l.durable.Load(); d >= want {
		done(d, nil)
		return nil
	}
	l.syncWaiters = append(l.syncWaiters, syncNowWaiter{want: want, done: done})
	if l.syncNowOwed() {
		l.d.markPending(l)
	}
	return nil
}

// syncNowOwed reports whether a SyncNow caller waits for records already written (under
// periodic and none; on_commit's own fdatasync covers its appends), so an fdatasync
// started now covers it.
func (l *Log) syncNowOwed() bool {
	if l.opts.FsyncMode == FsyncOnCommit || l.written <= l.durable.Load() {
		return false
	}
	for _, w := range l.syncWaiters {
		if w.want <= l.written {
			return true
		}
	}
	return false
}

// runSyncNow runs, after a completion, the SyncNow waiters the durable offset reached
// (every one with the error once the log failed) and queues the fdatasync the others
// owe.
func (l *Log) runSyncNow() {
	if len(l.syncWaiters) == 0 || l.closed {
		return
	}
	durable := l.durable.Load()
	var ready []syncNowWaiter
	kept := l.syncWaiters[:0]
	for _, w := range l.syncWaiters {
		if l.failed != nil || w.want <= durable {
			ready = append(ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(l.syncWaiters[len(kept):])
	l.syncWaiters = kept
	for _, w := range ready {
		w.done(durable, l.failed)
	}
	if l.failed == nil && l.syncNowOwed() {
		l.d.markPending(l)
	}
}

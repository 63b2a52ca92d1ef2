package core

import (
	"errors"
	"fmt"
)

// Errors returned by the engine. Every error the engine hands back either is
// one of these sentinels (test with errors.Is) or wraps one of them, or is a
// *CursorError (test with errors.As). The mapping to client error codes is
// spec/client-protocol.md §8.7.
var (
	// ErrOverloaded means a bounded queue was full: a core's inbox, or a
	// shard's queue of publishes held while a Block subscriber catches up.
	// Client code "overloaded" (retry with backoff).
	ErrOverloaded = errors.New("core: overloaded")
	// ErrNotFound means the stream (or the shard number) does not exist, or
	// the stream was deleted while the call was in flight. Client code
	// "not_found".
	ErrNotFound = errors.New("core: stream not found")
	// ErrExists is returned by CreateStream when a stream of that name exists
	// with a different spec (same spec: CreateStream succeeds, idempotent).
	ErrExists = errors.New("core: stream exists with a different spec")
	// ErrStorageFailed wraps an error from the shard's log (open, append,
	// fsync or read). The shard refuses further publishes until reopened.
	// Client code "storage_failed".
	ErrStorageFailed = errors.New("core: storage failed")
	// ErrClosed means the engine or the subscription is closed.
	ErrClosed = errors.New("core: closed")
	// ErrInvalid means a request is malformed: no payloads, an unknown ack
	// mode or policy, a bad stream spec. Client code "malformed".
	ErrInvalid = errors.New("core: invalid request")
	// ErrSlowSubscriber ends a Block subscription whose queue stayed full for
	// longer than its BlockTimeout. Its records were not lost from the log:
	// the client resumes with start = {offset: last handled + 1}.
	ErrSlowSubscriber = errors.New("core: subscriber too slow")
	// ErrNoDurableStorage is returned by CreateStream for a durable stream
	// when the engine has no Config.DataDir (spec/config.md §2,
	// FELIX_DURABLE_STORAGE_DIR unset ⇒ durable streams rejected).
	ErrNoDurableStorage = errors.New("core: durable streams need a data directory")
	// ErrNotHere means the shard a call names is not served by this engine:
	// it is not open here (OpenShard never ran for it, or CloseShard closed
	// it), or it is open as a follower, which refuses client publishes,
	// subscriptions, cache operations, watches and group operations
	// (docs/architecture.md, "Shards, roles and generations"). The stream or
	// cache exists in the catalog (that is ErrNotFound). The broker answers
	// it with not_leader once the cluster knows the leader.
	ErrNotHere = errors.New("core: shard not served here")
	// ErrMoved ends a subscription, a cache watch or a parked group poll
	// whose shard changed role (SetRole: leader to follower, follower to
	// leader, or a new generation) or was closed (CloseShard); publishes and
	// cache operations still waiting for their commit when CloseShard closed
	// the shard fail with it too. The client subscribes again, where the
	// shard is led now.
	ErrMoved = errors.New("core: shard moved")
	// ErrStaleGeneration refuses an OpenShard or SetRole whose generation is
	// below the one the shard is open at here (generations never go back).
	ErrStaleGeneration = errors.New("core: stale shard generation")
)

// CursorReason is the reason of a *CursorError, spelled as on the wire
// (spec/client-protocol.md §6 subscribe_cursor_error, §7).
type CursorReason string

// Cursor error reasons (spec/client-protocol.md §7).
const (
	// CursorTooOld: the requested offset was discarded by retention, or has
	// left an in-memory stream's replay ring. Available = oldest retained.
	CursorTooOld CursorReason = "too_old"
	// CursorInFuture: the requested offset is past the end of the shard.
	// Available = the shard's next offset (its current tail).
	CursorInFuture CursorReason = "in_future"
)

// CursorError answers a subscribe whose start offset cannot be served
// (spec/client-protocol.md §7). The broker sends it as
// subscribe_cursor_error {reason, requested, available}; it never restarts
// a subscription silently at the tail.
type CursorError struct {
	Reason    CursorReason
	Requested uint64 // the offset the client asked for
	Available uint64 // oldest retained (too_old) or current tail (in_future)
}

// Error implements error.
func (e *CursorError) Error() string {
	return fmt.Sprintf("core: cursor %s: requested %d, available %d", e.Reason, e.Requested, e.Available)
}

// storageError wraps err from the log layer so that errors.Is(result,
// ErrStorageFailed) holds and errors.Is(result, err) still finds the cause.
func storageError(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrStorageFailed) {
		return err
	}
	return fmt.Errorf("%w: %s: %w", ErrStorageFailed, op, err)
}

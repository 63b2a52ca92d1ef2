package core

// The ballot of a replicated log (spec/storage-format.md §7 "ballot"; issue 18 item 3):
// the generation a follower accepted (by a fence, or the roll-forward of an older
// build's ballot) and the leader it accepted it from, kept in the seglog ballot file
// beside the log's segments so that a restarted follower still refuses the leaders it
// fenced out (seeds/internal-protocol.txt "Replication", FencedEpoch).

import (
	"fmt"

	"felix/seglog"
)

// ballotLog is a shardLog that keeps a ballot file (the seglog disk's logs).
type ballotLog interface {
	ReadBallot() seglog.Ballot
	WriteBallot(b seglog.Ballot) error
}

// ReadBallot reads the log's ballot file (seglog.Log.ReadBallot).
func (l *seglogLog) ReadBallot() seglog.Ballot { return l.log.ReadBallot() }

// WriteBallot replaces the log's ballot file (seglog.Log.WriteBallot).
func (l *seglogLog) WriteBallot(b seglog.Ballot) error { return l.log.WriteBallot(b) }

// ReplicaBallot returns the ballot stored for addr's log, read on the owning core: the
// empty ballot when none was written, or the file is short or fails its checksum (a
// lost ballot costs a fence, never a record). Errors: replicaLogOf's, ErrNotHere (not
// open here), ErrInvalid (a log kept by a disk without ballot files: the in-memory test
// disks), ErrOverloaded, ErrClosed.
func (e *Engine) ReplicaBallot(addr LogAddr) (seglog.Ballot, error) {
	var b seglog.Ballot
	err := e.onBallot(addr, func(bl ballotLog) error {
		b = bl.ReadBallot()
		return nil
	})
	return b, err
}

// SetReplicaBallot replaces the ballot of addr's log with b, durably (temp file,
// fdatasync, rename, directory fsync) before it returns, on the owning core, whatever
// the shard's role: a follower persists a fence it accepts before answering FenceOk.
// Errors: ReplicaBallot's; seglog.ErrBadOptions (a leader id over 65535 bytes); a
// storage failure (wrapping ErrStorageFailed; the log keeps serving, the fence is
// refused).
func (e *Engine) SetReplicaBallot(addr LogAddr, b seglog.Ballot) error {
	return e.onBallot(addr, func(bl ballotLog) error {
		if err := bl.WriteBallot(b); err != nil {
			return storageError("ballot", err)
		}
		return nil
	})
}

// onBallot runs fn on the core of addr's open shard with its ballot-keeping log (each
// of the six logs keeps its own ballot file).
func (e *Engine) onBallot(addr LogAddr, fn func(ballotLog) error) error {
	return e.onReplicaLog(addr, func(_ replicaLog, _ *placement, l shardLog, _ *logOwner) error {
		bl, ok := l.(ballotLog)
		if !ok {
			return fmt.Errorf("%w: %v keeps no ballot file (%T)", ErrInvalid, addr, l)
		}
		return fn(bl)
	})
}

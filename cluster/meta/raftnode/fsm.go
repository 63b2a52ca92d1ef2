// Package raftnode runs the control plane's state machine (cluster/meta) on
// hashicorp/raft v1.8.0 with a hashicorp/raft-wal v0.4.1 log store
// (docs/controlplane.md, "Raft"; issue 17 item 1). It is not pure: raft runs
// goroutines, the WAL and the snapshot store do I/O.
//
// A committed entry this build cannot read (meta.FatalError: an unknown
// kind or metadata level) is logged and stops the member: the FSM applies
// nothing after it, and the Node shuts its Raft down (Node.Stopped, Node.Err);
// cmd/felix-controlplane exits non-zero on it.
//
// Membership (issue 17 items 1 and 6): a member's Raft server id is
// NODE_ID/STORAGE_ID (ServerID; the storage id is created once in its data
// dir, LoadOrCreateStorageID), so a member that lost its disk comes back as
// a new server; every node sends through a HoldTransport, which refuses
// answers from another server id than the one asked and holds a voter that
// reported a metadata level below the group's floor; AddMember (after
// meta.CheckAddMember), RemoveMember and TransferLeadership change the group.
package raftnode

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// FSM adapts *meta.FSM to raft.FSM. Raft calls Apply, Snapshot and Restore
// from its FSM goroutine; State may be called from any goroutine.
type FSM struct {
	mu    sync.Mutex
	m     *meta.FSM
	log   hclog.Logger
	fatal error
	// fatalCh is closed once, on the first fatal entry.
	fatalCh chan struct{}
}

// NewFSM wraps a new meta.FSM with cfg; log receives the fatal entry's line.
func NewFSM(cfg meta.Config, log hclog.Logger) *FSM {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &FSM{m: meta.New(cfg), log: log, fatalCh: make(chan struct{})}
}

// Apply applies one committed command entry at its Raft index and returns
// the meta.Result (raft.ApplyFuture.Response). A *meta.FatalError is logged,
// stops every later Apply (each returns the same error, applying nothing)
// and closes Fatal(); Apply then returns the error.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return f.fatal
	}
	res, err := f.m.Apply(l.Index, l.Data)
	if err != nil {
		f.fatal = err
		f.log.Error("committed entry this build cannot apply; stopping the member", "index", l.Index, "error", err)
		close(f.fatalCh)
		return err
	}
	return res
}

// Fatal is closed once a committed entry could not be applied; Err gives it.
func (f *FSM) Fatal() <-chan struct{} { return f.fatalCh }

// Err gives the fatal entry's error, or nil.
func (f *FSM) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

// State gives the current point-in-time state.
func (f *FSM) State() *meta.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.State()
}

// Changes reads the change feed (meta.FSM.Changes; *meta.GoneError = 410).
func (f *FSM) Changes(after uint64, max int) (meta.Page, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Changes(after, max)
}

// encode builds an entry for cmd against the current state and voters
// (meta.FSM.Propose).
func (f *FSM) encode(cmd meta.Command, voters []string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Propose(cmd, voters)
}

// liveness gives the state machine's broker liveness timeout.
func (f *FSM) liveness() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Config().LivenessTimeout
}

// ErrStopped is Snapshot's error once the member met a fatal entry.
var ErrStopped = errors.New("raftnode: member stopped on an entry it cannot apply")

// Snapshot takes a point-in-time snapshot (O(1)); Persist encodes it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return nil, ErrStopped
	}
	return &snapshot{s: f.m.Snapshot()}, nil
}

// Restore replaces the state with a snapshot's (meta.FSM.Restore: a bad
// checksum or unknown record type is refused and the state kept).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Restore(data)
}

type snapshot struct{ s *meta.Snapshot }

// Persist writes the snapshot's bytes (docs/controlplane.md, "Snapshot
// format") to sink, cancelling it on error.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	data, err := s.s.Encode()
	if err == nil {
		_, err = sink.Write(data)
	}
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release does nothing: the snapshot holds an immutable state.
func (s *snapshot) Release() {}

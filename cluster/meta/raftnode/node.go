package raftnode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"

	"felix/clock"
	"felix/cluster/meta"
)

// DefaultHeartbeatTimeout is the members' Raft heartbeat and election timeout (a
// follower hearing no leader this long starts a pre-vote); the leader lease is half of it.
// Config.Tune may change all three.
const DefaultHeartbeatTimeout = 500 * time.Millisecond

// Config configures one member.
type Config struct {
	// ID is the member's Raft server id (issue 17: it includes the member's
	// storage identity, so a member that lost its disk rejoins as a new
	// server).
	ID raft.ServerID
	// Dir holds the WAL (Dir/wal) and the file snapshots (Dir/snapshots).
	Dir string
	// Transport is the Raft transport (raft.NewInmemTransport in tests).
	Transport raft.Transport
	// Bootstrap, when not empty, bootstraps a new group with these voters
	// (ignored when Dir already holds state).
	Bootstrap []raft.Server
	// Meta configures the state machine; every member must agree.
	Meta meta.Config
	// Logger receives raft's and the node's lines (hclog; nil = discard).
	Logger hclog.Logger
	// Tune adjusts the raft.Config (timeouts in tests) before start.
	Tune func(*raft.Config)
	// Level is the metadata level this member reports (0 = this build's
	// meta.BuildMaxLevel; tests set a lower one to play an older build).
	Level meta.Level
	// Clock times the hold transport's rechecks (nil = clock.Real()).
	Clock clock.Clock
	// HoldRecheck is how often a held member is looked at again
	// (0 = DefaultHoldRecheck).
	HoldRecheck time.Duration
}

// Node is one running member: its server id, Raft, FSM, log store and the
// hold transport its Raft sends through.
type Node struct {
	ID      raft.ServerID
	Raft    *raft.Raft
	FSM     *FSM
	Hold    *HoldTransport
	level   meta.Level
	wal     *wal.WAL
	metaDB  *metadb.BoltMetaDB
	mu      sync.Mutex // guards Raft while Start sets it (standing may run first)
	stopped chan struct{}
	done    chan struct{} // closed by Close: ends watchFatal
	watched chan struct{} // closed when watchFatal returns
}

// Start opens the WAL and snapshots under cfg.Dir, bootstraps when asked,
// and starts Raft. A fatal entry later shuts Raft down (Stopped).
func Start(cfg Config) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "wal"), 0o700); err != nil {
		return nil, fmt.Errorf("raftnode: %w", err)
	}
	// raft-wal v0.4.x's WAL.Close leaves its meta DB (a bbolt file, locked)
	// open: the node keeps it and closes it itself, so a restart in the same
	// process can open the directory again.
	mdb := &metadb.BoltMetaDB{}
	store, err := wal.Open(filepath.Join(cfg.Dir, "wal"), wal.WithLogger(log.Named("wal")), wal.WithMetaStore(mdb))
	if err != nil {
		_ = mdb.Close()
		return nil, fmt.Errorf("raftnode: open wal: %w", err)
	}
	closeStores := func() { _ = store.Close(); _ = mdb.Close() }
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(cfg.Dir, "snapshots"), 2, log.Named("snapshots"))
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = cfg.ID
	// Half of raft's defaults (1 s, 1 s, 500 ms): the election pause after a leader's
	// SIGKILL is one follower timeout plus, with pre-vote, often a second one (the other
	// survivor still hears no one only after its own timeout); at 1 s it measured p50
	// 2.3 s / max 3.1 s over 100 kills (docs/bench/controlplane.md), against the seed's
	// ~1.2 s. Heartbeats go out every HeartbeatTimeout/10 (50 ms).
	rc.HeartbeatTimeout, rc.ElectionTimeout = DefaultHeartbeatTimeout, DefaultHeartbeatTimeout
	rc.LeaderLeaseTimeout = DefaultHeartbeatTimeout / 2
	rc.Logger = log.Named("raft")
	if cfg.Tune != nil {
		cfg.Tune(rc)
	}
	fsm := NewFSM(cfg.Meta, log.Named("fsm"))
	hold := NewHoldTransport(cfg.Transport, cfg.Clock, cfg.HoldRecheck, log.Named("hold"))
	if len(cfg.Bootstrap) > 0 {
		has, err := raft.HasExistingState(store, store, snaps)
		if err == nil && !has {
			err = raft.BootstrapCluster(rc, store, store, snaps, hold, raft.Configuration{Servers: cfg.Bootstrap})
		}
		if err != nil {
			closeStores()
			return nil, fmt.Errorf("raftnode: bootstrap: %w", err)
		}
	}
	n := &Node{ID: cfg.ID, FSM: fsm, Hold: hold, level: cfg.Level, wal: store, metaDB: mdb, stopped: make(chan struct{}),
		done: make(chan struct{}), watched: make(chan struct{})}
	if n.level == 0 {
		n.level = meta.BuildMaxLevel
	}
	hold.SetStanding(n.standing)
	r, err := raft.NewRaft(rc, fsm, store, store, snaps, hold)
	if err != nil {
		closeStores()
		return nil, fmt.Errorf("raftnode: start raft: %w", err)
	}
	n.mu.Lock()
	n.Raft = r
	n.mu.Unlock()
	go n.watchFatal()
	return n, nil
}

// watchFatal shuts Raft down once the FSM met a fatal entry (Shutdown
// cannot run on the FSM goroutine itself).
func (n *Node) watchFatal() {
	defer close(n.watched)
	select {
	case <-n.FSM.Fatal():
		n.Hold.Stop()
		_ = n.Raft.Shutdown().Error()
		close(n.stopped)
	case <-n.done:
	}
}

// Stopped is closed once the member stopped on a fatal entry; Err gives it.
func (n *Node) Stopped() <-chan struct{} { return n.stopped }

// Err gives the fatal entry's error, or nil.
func (n *Node) Err() error { return n.FSM.Err() }

// Voters gives the current configuration's voter ids.
func (n *Node) Voters() ([]string, error) {
	f := n.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	return out, nil
}

// Propose encodes cmd for the current voters (meta.FSM.Propose: a
// *meta.LevelError when a voter is below the level it needs) and applies it
// through Raft, waiting up to timeout. Errors: raft.ErrNotLeader on a
// follower, raft's errors, the entry's *meta.FatalError; a refusal is in
// the Result's Err.
func (n *Node) Propose(cmd meta.Command, timeout time.Duration) (meta.Result, error) {
	voters, err := n.Voters()
	if err != nil {
		return meta.Result{}, err
	}
	entry, err := n.FSM.encode(cmd, voters)
	if err != nil {
		return meta.Result{}, err
	}
	return n.ApplyEntry(entry, timeout)
}

// ApplyEntry applies raw entry bytes through Raft (Propose without the
// encoding; tests use it for an entry of an unknown kind).
func (n *Node) ApplyEntry(entry []byte, timeout time.Duration) (meta.Result, error) {
	f := n.Raft.Apply(entry, timeout)
	if err := f.Error(); err != nil {
		return meta.Result{}, err
	}
	switch v := f.Response().(type) {
	case meta.Result:
		return v, nil
	case error:
		return meta.Result{}, v
	}
	return meta.Result{}, errors.New("raftnode: no result")
}

// Close shuts Raft down, ends the node's goroutine and closes the WAL; a
// second Close returns nil.
func (n *Node) Close() error {
	select {
	case <-n.done:
		return nil
	default:
	}
	close(n.done)
	<-n.watched
	n.Hold.Stop()
	err := n.Raft.Shutdown().Error()
	return errors.Join(err, n.wal.Close(), n.metaDB.Close())
}

var _ io.Closer = (*Node)(nil)

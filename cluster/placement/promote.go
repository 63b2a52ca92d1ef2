package placement

import (
	"fmt"
	"slices"
	"time"
)

// DefaultReportWindow is how old a leader's replica report may be and still be believed
// for a follower (docs/failover.md, "Promotion"): four report intervals of 250 ms, so a
// report taken while the leader was still live is believed for a detection window.
const DefaultReportWindow = time.Second

// Replica is one member of a shard's replica set as the control plane knows it from the
// broker's registration and heartbeats (cluster/meta.Broker and the generations it
// reported).
type Replica struct {
	NodeID string
	// StorageID is the identity of its data directory at its latest registration ("" for
	// a broker, or an older control-plane instance, that records none).
	StorageID string
	// Incarnation counts its registrations (cluster/meta.Broker.Incarnation).
	Incarnation uint64
	// Liveness is the failure detector's state of the broker now.
	Liveness Liveness
	// HighestGeneration is the highest generation it reported for the shard (its ballot
	// file), at registration or in a heartbeat.
	HighestGeneration uint64
	// RebuildIncarnation is the per-replica incarnation of its copy of the shard: the
	// follower bumps it (kept beside its ballot) each time it executes a ReplicateRebuild,
	// and reports it with its generations.
	RebuildIncarnation uint64
	// Restarted says it came back under a new storage id after a crash under fsync mode
	// periodic or none (the run-state rule); Kept is then the durable_offset of the
	// shard's log it kept.
	Restarted bool
	Kept      uint64
}

// ReportEntry is one replica named in a leader's replica report.
type ReportEntry struct {
	NodeID string
	// StorageID is the identity the leader counted the follower under ("" when unknown).
	StorageID string
	// Durable is the offset the follower acknowledged (its fsynced offset).
	Durable uint64
	// Incarnation is the control plane's stamp: the node's registration incarnation when
	// the report was applied (only in a stamped report).
	Incarnation uint64
	// RebuildIncarnation is the replica's rebuild incarnation the leader counted it at.
	RebuildIncarnation uint64
	// Halted is the reason its replication halted ("diverged", "needs_bootstrap", ...), ""
	// when it runs; Corrupt says its copy failed verification.
	Halted  string
	Corrupt bool
}

// Report is the shard leader's latest replica report (cluster/meta.Report).
type Report struct {
	Leader     string
	Generation uint64
	// AtNanos is when the control plane applied it, on its monotonic clock.
	AtNanos int64
	// Stamped says the control plane stamped each entry's Incarnation.
	Stamped bool
	// ServesByRound says the leader confirms reads by fence rounds (lease_free_reads with
	// majority_ack and generation_start): placement need not wait out its lease.
	ServesByRound bool
	Entries       []ReportEntry
}

// FenceRefusal is a promoted broker's report that its fence round found a replica ahead
// of itself (FenceOutcome with FenceRefused): it did not open.
type FenceRefusal struct {
	Generation uint64
	By         string
	Ahead      string
	AheadAt    Position
}

// Shard is one shard's state as placement sees it.
type Shard struct {
	// Generation, Leader and Followers are the current assignment.
	Generation uint64
	Leader     string
	Followers  []string
	// HighestGeneration is the highest generation the control plane noted for the shard
	// (assignments and reports); generations are issued above it and above every
	// replica's HighestGeneration, so they never go back, even after a restore.
	HighestGeneration uint64
	// Replicas describes every member of the replica set, the leader included.
	Replicas []Replica
	// Report is the leader's latest replica report; HasReport says there is one.
	Report    Report
	HasReport bool
	// LeaseUntil is when the leader's lease is certainly over on the control plane's
	// clock (LeaseConfig.GrantorExpiry of its latest grant); 0 when none was granted.
	LeaseUntil int64
	// Refusal, when set, is the promoted leader's fence refusal at Generation.
	Refusal *FenceRefusal
}

// Config are promotion's parameters; a zero field takes its default.
type Config struct {
	// ReportWindow is how old a report may be for its entries to be believed; past it, a
	// dead leader's last report is believed only for followers whose identities match.
	ReportWindow time.Duration
	// without turns a gap's fix off (tests only, to show each fix failing without it).
	without gaps
}

// gaps are the switches that turn a fix off, for the tests with teeth.
type gaps struct {
	furthestAhead    bool // promote the first caught-up follower, not the furthest ahead
	rebuildIncarnate bool // believe a report taken before the follower was rebuilt
	generationFloor  bool // issue sh.Generation+1 whatever was reported
	fenceBeforeOpen  bool // open without a fence majority (FenceRound)
	aheadRefusal     bool // open even when a fenced replica is ahead (FenceRound)
	lateRound        bool // reads taken after a round started share it (ReadConfirmer)
	markWait         bool // answer a read before the mark passed its write (ReadConfirmer)
}

// Action is what Decide decided.
type Action uint8

// Actions of Decide.
const (
	// Keep: the leader serves; nothing to do.
	Keep Action = iota + 1
	// Promote: assign Decision.Leader at Decision.Generation with Decision.Followers.
	Promote
	// Wait: not yet (a suspect leader, a lease that may still be valid); decide again
	// on the next pass.
	Wait
	// Unplaceable: no replica may lead; Decision.Rejected says why for each.
	Unplaceable
)

var actionNames = [...]string{"", "keep", "promote", "wait", "unplaceable"}

// String returns "keep", "promote", "wait" or "unplaceable".
func (a Action) String() string {
	if a >= Keep && a <= Unplaceable {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Rejection says why a replica may not be promoted.
type Rejection struct {
	NodeID string
	Reason string
}

// Decision is Decide's answer for one shard.
type Decision struct {
	Action     Action
	Leader     string
	Followers  []string
	Generation uint64
	Reason     string
	Rejected   []Rejection
}

// Decide decides whether the shard's leadership moves at now (the control plane's
// monotonic clock, nanoseconds), and to whom (docs/failover.md, "Promotion"). Errors:
// *InputError for an inconsistent shard (an empty or repeated node id, a leader or
// follower without its Replica).
func Decide(sh *Shard, now int64, cfg Config) (Decision, error) {
	if cfg.ReportWindow <= 0 {
		cfg.ReportWindow = DefaultReportWindow
	}
	members, err := checkShard(sh)
	if err != nil {
		return Decision{}, err
	}
	leader := members[sh.Leader]
	gen := nextGeneration(sh, cfg)
	if r := sh.Refusal; r != nil && r.Generation == sh.Generation && r.By == sh.Leader {
		return decideRefusal(sh, members, gen)
	}
	switch {
	case leader.Restarted:
		return decideRestarted(sh, members, now, gen, cfg), nil
	case leader.Liveness == Live:
		return Decision{Action: Keep, Leader: sh.Leader, Generation: sh.Generation, Reason: "the leader is live"}, nil
	case leader.Liveness == Suspect:
		return Decision{Action: Wait, Reason: "the leader is suspect"}, nil
	case leader.Liveness == Down && !sh.Report.ServesByRound && now < sh.LeaseUntil:
		return Decision{Action: Wait, Reason: "the leader's lease may still be valid"}, nil
	}
	d := chooseFollower(sh, members, now, gen, cfg)
	if leader.Liveness == Draining && d.Action == Unplaceable {
		return Decision{Action: Keep, Leader: sh.Leader, Generation: sh.Generation, Rejected: d.Rejected,
			Reason: "draining, but no follower is caught up yet"}, nil
	}
	return d, nil
}

// checkShard validates sh and indexes its replicas by node id.
func checkShard(sh *Shard) (map[string]Replica, error) {
	if sh == nil || sh.Leader == "" {
		return nil, badInput("a shard without a leader")
	}
	members := make(map[string]Replica, len(sh.Replicas))
	for _, r := range sh.Replicas {
		if r.NodeID == "" {
			return nil, badInput("a replica with an empty node id")
		}
		if _, dup := members[r.NodeID]; dup {
			return nil, badInput("replica %s is twice in the replica set", r.NodeID)
		}
		members[r.NodeID] = r
	}
	for _, id := range append([]string{sh.Leader}, sh.Followers...) {
		if _, ok := members[id]; !ok {
			return nil, badInput("member %s has no Replica", id)
		}
	}
	if slices.Contains(sh.Followers, sh.Leader) {
		return nil, badInput("leader %s is also a follower", sh.Leader)
	}
	return members, nil
}

// nextGeneration is one above every generation known for the shard: the assignment's,
// the control plane's highest, the report's, each replica's ballot and a refusal's.
func nextGeneration(sh *Shard, cfg Config) uint64 {
	g := sh.Generation
	if !cfg.without.generationFloor {
		g = max(g, sh.HighestGeneration, sh.Report.Generation)
		for _, r := range sh.Replicas {
			g = max(g, r.HighestGeneration)
		}
		if sh.Refusal != nil {
			g = max(g, sh.Refusal.Generation)
		}
	}
	return g + 1
}

// assign builds a Promote decision for leader: the replica set is kept (a Quorum failover
// keeps its replica set), the old leader becoming a follower.
func assign(sh *Shard, leader string, gen uint64, reason string, rejected []Rejection) Decision {
	var followers []string
	for _, id := range append([]string{sh.Leader}, sh.Followers...) {
		if id != leader {
			followers = append(followers, id)
		}
	}
	return Decision{Action: Promote, Leader: leader, Followers: followers, Generation: gen, Reason: reason,
		Rejected: rejected}
}

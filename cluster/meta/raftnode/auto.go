package raftnode

import (
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// ReportLevel proposes a member's metadata level as this build's
// (meta.BuildMaxLevel), as a member_level_report under id, its Raft server
// id. Only the leader can (raft.ErrNotLeader otherwise); a member reporting
// its own level through the leader comes with the REST layer, and until then
// the leader reports for the members it started with.
func (n *Node) ReportLevel(id raft.ServerID, timeout time.Duration) (meta.Result, error) {
	return n.Propose(&meta.MemberLevelReport{MemberID: string(id), Level: meta.BuildMaxLevel}, timeout)
}

// AutoFinalize runs one step of the new-cluster rule on the leader (seed,
// "A new cluster starts with them finalized"): meta.AutoFinalizePlan with
// the current voters at nowMs (the caller's wall clock, Unix ms; the command
// calls it after each registration and on a timer until the step is done or
// give-up), proposing each finalize in order. It stops at the first error or
// refusal and returns it with the step. Errors: raft.ErrNotLeader on a
// follower, Propose's.
func (n *Node) AutoFinalize(nowMs int64, timeout time.Duration) (meta.AutoStep, error) {
	if n.Raft.State() != raft.Leader {
		return meta.AutoStep{}, raft.ErrNotLeader
	}
	voters, err := n.Voters()
	if err != nil {
		return meta.AutoStep{}, err
	}
	st := n.FSM.State()
	step := meta.AutoFinalizePlan(st, voters, nowMs, n.FSM.liveness())
	for _, c := range step.Commands {
		res, err := n.Propose(&c, timeout)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return step, err
		}
	}
	return step, nil
}

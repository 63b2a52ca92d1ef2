package raftnode

import (
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// ReportLevel proposes, on the leader, a member_level_report of this
// member's level (Level: the build's meta.BuildMaxLevel unless Config.Level
// says otherwise) under id, a Raft server id: a member reports its own
// level (id = n.ID) through REST (POST /v1/members/levels) at start; tests
// report for others. raft.ErrNotLeader on a follower.
func (n *Node) ReportLevel(id raft.ServerID, timeout time.Duration) (meta.Result, error) {
	return n.ReportMemberLevel(id, n.level, timeout)
}

// ReportMemberLevel proposes a member_level_report of level under id (the
// REST report of a member, which may run another build). raft.ErrNotLeader
// on a follower; Propose's errors.
func (n *Node) ReportMemberLevel(id raft.ServerID, level meta.Level, timeout time.Duration) (meta.Result, error) {
	return n.Propose(&meta.MemberLevelReport{MemberID: string(id), Level: level}, timeout)
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

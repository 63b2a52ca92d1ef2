package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// opsHandler serves the metrics listener (spec/config.md §7): /live is 200
// for the whole process life; /ready is 200 once the member knows a leader,
// 503 "no leader" before and 503 "draining" once shutdown starts; /metrics
// is Prometheus text with felix_meta_raft_leader (1 on the member that
// leads), felix_meta_raft_term, felix_meta_raft_commit_index,
// felix_meta_raft_applied_index and felix_meta_raft_voters.
func (m *member) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		switch addr, _ := m.node.Raft.LeaderWithID(); {
		case m.draining.Load():
			http.Error(w, "draining", http.StatusServiceUnavailable)
		case addr == "":
			http.Error(w, "no leader", http.StatusServiceUnavailable)
		default:
			fmt.Fprintln(w, "ok")
		}
	})
	mux.HandleFunc("GET /metrics", m.writeMetrics)
	return mux
}

func (m *member) writeMetrics(w http.ResponseWriter, r *http.Request) {
	rf := m.node.Raft
	leader := 0
	if rf.State() == raft.Leader {
		leader = 1
	}
	voters, _ := m.node.Voters()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	for _, g := range []struct {
		name, help string
		v          uint64
	}{
		{"felix_meta_raft_leader", "1 on the member that leads the control-plane group", uint64(leader)},
		{"felix_meta_raft_term", "the member's current Raft term", rf.CurrentTerm()},
		{"felix_meta_raft_commit_index", "the member's Raft commit index", rf.CommitIndex()},
		{"felix_meta_raft_applied_index", "the last Raft index applied to the state machine", m.node.FSM.State().Index()},
		{"felix_meta_raft_voters", "voters in the member's Raft configuration", uint64(len(voters))},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", g.name, g.help, g.name, g.name, g.v)
	}
}

// leaderLoop runs on the leader every half second until drain: it reports
// the metadata level of each voter that has not reported this build's
// (raftnode.Node.ReportLevel: until members report their own level through
// the leader, the leader reports for the members it started with, which
// assumes they run this build), and runs the new-cluster rule
// (raftnode.Node.AutoFinalize) until it is done or gives up after
// meta.AutoFinalizeWindow.
func (m *member) leaderLoop() {
	defer close(m.loopDone)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	autoOver := false
	for {
		select {
		case <-m.done:
			return
		case <-tick.C:
		}
		if m.node.Raft.State() != raft.Leader {
			continue
		}
		m.reportLevels()
		if autoOver {
			continue
		}
		step, err := m.node.AutoFinalize(time.Now().UnixMilli(), 5*time.Second)
		switch {
		case err != nil:
			m.log.Info("new-cluster finalize step failed; retrying", "err", err)
		case step.Action == meta.AutoDone:
			autoOver = true
		case step.Action == meta.AutoGiveUp:
			m.log.Warn("new-cluster finalize gave up: members still starting; finalize features with `felix-controlplane admin features finalize`",
				"starting", step.Starting)
			autoOver = true
		}
	}
}

func (m *member) reportLevels() {
	voters, err := m.node.Voters()
	if err != nil {
		return
	}
	reported := map[string]meta.Level{}
	for _, mb := range m.node.FSM.State().Members() {
		reported[mb.ID] = mb.Level
	}
	for _, v := range voters {
		if reported[v] >= meta.BuildMaxLevel {
			continue
		}
		if res, err := m.node.ReportLevel(raft.ServerID(v), 5*time.Second); err != nil || res.Err != nil {
			m.log.Warn("member level report failed", "member", v, "err", errors.Join(err, res.Err))
		}
	}
}

package main

import (
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"
)

// opsHandler serves the metrics listener (spec/config.md §7): /live is 200
// for the whole process life; /ready is 200 once the member knows a leader,
// 503 "no leader" before and 503 "draining" once shutdown starts; /metrics
// is Prometheus text with felix_meta_raft_leader (1 on the member that
// leads), felix_meta_raft_term, felix_meta_raft_commit_index,
// felix_meta_raft_applied_index, felix_meta_raft_voters and, per voter,
// felix_meta_raft_member_below_floor{member} (1 while this member, leading,
// holds it; raftnode.HoldTransport). Before Raft runs /ready is 503
// "starting" and /metrics empty.
func (m *member) opsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		if m.draining.Load() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		n := m.running.Load()
		if n == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		switch addr, _ := n.Raft.LeaderWithID(); {
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
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	n := m.running.Load()
	if n == nil {
		return // starting: no Raft yet
	}
	rf := n.Raft
	leader := 0
	if rf.State() == raft.Leader {
		leader = 1
	}
	voters, _ := n.Voters()
	for _, g := range []struct {
		name, help string
		v          uint64
	}{
		{"felix_meta_raft_leader", "1 on the member that leads the control-plane group", uint64(leader)},
		{"felix_meta_raft_term", "the member's current Raft term", rf.CurrentTerm()},
		{"felix_meta_raft_commit_index", "the member's Raft commit index", rf.CommitIndex()},
		{"felix_meta_raft_applied_index", "the last Raft index applied to the state machine", n.FSM.State().Index()},
		{"felix_meta_raft_voters", "voters in the member's Raft configuration", uint64(len(voters))},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", g.name, g.help, g.name, g.name, g.v)
	}
	held := n.Hold.BelowFloor()
	fmt.Fprintf(w, "# HELP felix_meta_raft_member_below_floor 1 while the leader holds the member below the group's metadata level\n"+
		"# TYPE felix_meta_raft_member_below_floor gauge\n")
	for _, v := range voters {
		b := 0
		if held[raft.ServerID(v)] {
			b = 1
		}
		fmt.Fprintf(w, "felix_meta_raft_member_below_floor{member=%q} %d\n", v, b)
	}
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// The control plane's and the brokers' JSON the status reads (docs/controlplane.md,
// "REST and the command" and "The broker side"; readers ignore unknown fields).
type (
	cpMember struct {
		ID        string `json:"id"`
		NodeID    string `json:"node_id"`
		StorageID string `json:"storage_id"`
		Address   string `json:"address"`
		Leader    bool   `json:"leader"`
		Level     int    `json:"level"`
		Held      bool   `json:"held"`
	}
	cpMembers struct {
		Leader   string     `json:"leader"`
		Floor    int        `json:"floor"`
		ServedBy string     `json:"served_by"`
		Members  []cpMember `json:"members"`
	}
	cpBroker struct {
		NodeID       string   `json:"node_id"`
		StorageID    string   `json:"storage_id"`
		ClientAddr   string   `json:"client_addr"`
		InternalAddr string   `json:"internal_addr"`
		State        string   `json:"state"`
		Missing      []string `json:"missing,omitempty"`
	}
	cpAssignment struct {
		Kind       string   `json:"kind"`
		TenantID   string   `json:"tenant_id"`
		Namespace  string   `json:"namespace"`
		Name       string   `json:"name"`
		Shard      uint32   `json:"shard"`
		Leader     string   `json:"leader"`
		Followers  []string `json:"followers"`
		Generation uint64   `json:"generation"`
	}
	brokerOpen struct {
		Shard      string `json:"shard"`
		Role       string `json:"role"`
		Generation uint64 `json:"generation"`
		Committed  uint64 `json:"committed"`
		Durable    uint64 `json:"durable_offset"`
	}
	ownershipRow struct {
		Shard      string   `json:"shard"`
		Leader     string   `json:"leader"`
		ReplicaSet []string `json:"replica_set"`
		Generation uint64   `json:"generation"`
	}
	brokerOwnership struct {
		NodeID    string         `json:"node_id"`
		Seq       uint64         `json:"seq"`
		Reachable bool           `json:"reachable"`
		Ownership []ownershipRow `json:"ownership"`
		Open      []brokerOpen   `json:"open"`
	}
	haltedReplica struct {
		Broker   string `json:"broker"`
		Shard    string `json:"shard"`
		Log      string `json:"log"`
		Follower string `json:"follower"`
		Reason   string `json:"reason"`
		Since    string `json:"since"`
	}
)

// clusterStatus is `felix cluster status --json`.
type clusterStatus struct {
	Members cpMembers       `json:"members"`
	Brokers []brokerStatus  `json:"brokers"`
	Shards  []shardStatus   `json:"shards"`
	Halted  []haltedReplica `json:"halted"`
	Errors  []string        `json:"errors,omitempty"` // brokers whose ops endpoints did not answer
}

// brokerStatus is a registered broker with what its ops port answered.
type brokerStatus struct {
	cpBroker
	OpsURL    string `json:"ops_url,omitempty"` // "" when no ops endpoint answered
	FeedSeq   uint64 `json:"feed_seq"`
	Reachable bool   `json:"controlplane_reachable"` // the broker's view of the control plane
	view      brokerOwnership
	metrics   string
}

// shardStatus is one assignment with each replica's state.
type shardStatus struct {
	Shard      string          `json:"shard"`
	Generation uint64          `json:"generation"`
	Leader     string          `json:"leader"`
	Replicas   []replicaStatus `json:"replicas"`
}

// replicaStatus is one replica of a shard: open (as the broker reports it) or not.
type replicaStatus struct {
	NodeID     string `json:"node_id"`
	Role       string `json:"role"` // leader, follower, or "" when not open / not reachable
	Generation uint64 `json:"generation"`
	Committed  uint64 `json:"committed"`
	Durable    uint64 `json:"durable_offset"`
	Lag        *int64 `json:"lag_records,omitempty"` // a follower's, from the leader's felix_replication_lag_records
	Halted     bool   `json:"halted"`
}

// clusterStatusCommand is `felix cluster status`: the control plane's members, brokers and
// placement, and each broker's /cluster/ownership, /replication/halted and /metrics
// (follower lag). A broker whose ops port does not answer is listed with an error; no
// control-plane member answering is exit 6.
func (a *app) clusterStatusCommand(cp *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Members, brokers, shard leaders and followers with generation, lag and halted replicas",
		Args:  nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := a.requestContext(cmd.Context())
			defer cancel()
			st, err := a.gatherStatus(ctx, *cp)
			if err != nil {
				return err
			}
			if a.jsonOut {
				a.printJSON(st)
				return nil
			}
			a.printStatus(st)
			return nil
		},
	}
}

// gatherStatus reads the control plane, then every broker's ops endpoints.
func (a *app) gatherStatus(ctx context.Context, cp string) (*clusterStatus, error) {
	st := &clusterStatus{Halted: []haltedReplica{}}
	var snap struct {
		Assignments []cpAssignment `json:"assignments"`
	}
	var brokers []cpBroker
	for _, q := range []struct {
		path string
		out  any
	}{{"/v1/members", &st.Members}, {"/v1/brokers", &brokers}, {"/v1/snapshot", &snap}} {
		if err := a.controlPlaneGet(ctx, cp, q.path, q.out); err != nil {
			return nil, err
		}
	}
	byNode := a.opsViews(ctx, brokers)
	for _, b := range brokers {
		bs := byNode[b.NodeID]
		if bs == nil {
			bs = &brokerStatus{}
			st.Errors = append(st.Errors, b.NodeID+": no ops endpoint answered (tried --admin and http://"+b.ClientAddr+")")
		}
		bs.cpBroker = b
		st.Brokers = append(st.Brokers, *bs)
		if bs.OpsURL != "" {
			var halted []haltedReplica
			if err := getJSON(ctx, bs.OpsURL+"/replication/halted", 3*time.Second, &halted); err != nil {
				st.Errors = append(st.Errors, b.NodeID+": /replication/halted: "+err.Error())
			}
			for _, h := range halted {
				h.Broker = b.NodeID
				st.Halted = append(st.Halted, h)
			}
		}
	}
	for _, as := range snap.Assignments {
		st.Shards = append(st.Shards, shardOf(as, byNode, st.Halted))
	}
	sort.Slice(st.Shards, func(i, j int) bool { return st.Shards[i].Shard < st.Shards[j].Shard })
	return st, nil
}

// opsViews finds each broker's ops endpoint: every --admin URL's /cluster/ownership names
// its node; a registered broker none of them is gets http://CLIENT_ADDR (the layout of
// `felix dev cluster`: the ops port shares the client port's number). It reads each
// found endpoint's /metrics too.
func (a *app) opsViews(ctx context.Context, brokers []cpBroker) map[string]*brokerStatus {
	out := map[string]*brokerStatus{}
	try := func(u string) {
		var v brokerOwnership
		if err := getJSON(ctx, u+"/cluster/ownership", 3*time.Second, &v); err != nil || v.NodeID == "" || out[v.NodeID] != nil {
			return
		}
		metrics, _ := getText(ctx, u+"/metrics", 3*time.Second)
		out[v.NodeID] = &brokerStatus{OpsURL: u, FeedSeq: v.Seq, Reachable: v.Reachable, view: v, metrics: metrics}
	}
	for _, u := range a.adminURLs() {
		try(u)
	}
	for _, b := range brokers {
		if out[b.NodeID] == nil && b.ClientAddr != "" {
			try("http://" + b.ClientAddr)
		}
	}
	return out
}

// shardOf is an assignment's status from its replicas' views and the leader's metrics.
func shardOf(as cpAssignment, byNode map[string]*brokerStatus, halted []haltedReplica) shardStatus {
	key := fmt.Sprintf("%s/%s/%s/%s/%d", as.Kind, as.TenantID, as.Namespace, as.Name, as.Shard)
	s := shardStatus{Shard: key, Generation: as.Generation, Leader: as.Leader}
	var leaderMetrics string
	if b := byNode[as.Leader]; b != nil {
		leaderMetrics = b.metrics
	}
	for _, id := range append([]string{as.Leader}, as.Followers...) {
		r := replicaStatus{NodeID: id}
		if b := byNode[id]; b != nil {
			for _, o := range b.view.Open {
				if o.Shard == key {
					r.Role, r.Generation, r.Committed, r.Durable = o.Role, o.Generation, o.Committed, o.Durable
				}
			}
		}
		if id != as.Leader {
			if lag, ok := lagMetric(leaderMetrics, lagLabel(key), id); ok {
				r.Lag = &lag
			}
		}
		for _, h := range halted {
			if h.Follower == id && (h.Shard == key || h.Shard == lagLabel(key)) {
				r.Halted = true
			}
		}
		s.Replicas = append(s.Replicas, r)
	}
	return s
}

// lagMetric reads felix_replication_lag_records{shard=label,log="stream",follower=id}.
func lagMetric(metrics, label, follower string) (int64, bool) {
	want := fmt.Sprintf(`felix_replication_lag_records{shard=%q,log="stream",follower=%q} `, label, follower)
	sc := bufio.NewScanner(strings.NewReader(metrics))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f), err == nil
		}
	}
	return 0, false
}

// printStatus prints the status as four tables.
func (a *app) printStatus(st *clusterStatus) {
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "control plane: leader %s, metadata floor %d (answered by %s)\n", orDash(st.Members.Leader), st.Members.Floor, orDash(st.Members.ServedBy))
	fmt.Fprintln(w, "MEMBER\tSTORAGE ID\tRAFT ADDRESS\tLEADER\tLEVEL\tHELD")
	for _, m := range st.Members.Members {
		fmt.Fprintf(w, "%s\t%s\t%s\t%v\t%d\t%v\n", m.NodeID, m.StorageID, m.Address, m.Leader, m.Level, m.Held)
	}
	fmt.Fprintln(w, "\nBROKER\tSTORAGE ID\tSTATE\tCLIENT\tINTERNAL\tOPS\tFEED SEQ")
	for _, b := range st.Brokers {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", b.NodeID, b.StorageID, b.State, b.ClientAddr, b.InternalAddr, orDash(b.OpsURL), b.FeedSeq)
	}
	fmt.Fprintln(w, "\nSHARD\tGEN\tREPLICA\tROLE\tCOMMITTED\tDURABLE\tLAG\tHALTED")
	for _, s := range st.Shards {
		for _, r := range s.Replicas {
			role, lag := r.Role, "-"
			if role == "" {
				role = "unreachable"
				if r.NodeID == s.Leader {
					role = "leader (unreachable)"
				}
			}
			if r.Lag != nil {
				lag = strconv.FormatInt(*r.Lag, 10)
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%d\t%d\t%s\t%v\n", s.Shard, s.Generation, r.NodeID, role, r.Committed, r.Durable, lag, r.Halted)
		}
	}
	w.Flush()
	fmt.Fprintf(a.stdout, "\nhalted replicas: %d\n", len(st.Halted))
	for _, h := range st.Halted {
		fmt.Fprintf(a.stdout, "  %s: %s %s log to %s since %s: %s\n", h.Broker, h.Shard, h.Log, h.Follower, h.Since, h.Reason)
	}
	for _, e := range st.Errors {
		fmt.Fprintf(a.stdout, "warning: %s\n", e)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// deadURL is an http URL nothing listens on (a port bound and closed a moment ago).
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestAdminBasePicksTheFirstThatAnswers: with several --admin URLs the first whose /live
// answers is used; none answering is exit 6 naming each.
func TestAdminBasePicksTheFirstThatAnswers(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // any answer: the API is there
	}))
	defer live.Close()
	dead := deadURL(t)
	a := newApp(nil, &bytes.Buffer{}, &bytes.Buffer{}, nil)
	a.adminURL = dead + ", " + strings.TrimPrefix(live.URL, "http://") + "/"
	got, err := a.adminBase(context.Background())
	if err != nil || got != live.URL {
		t.Fatalf("adminBase = %q, %v; want %q", got, err, live.URL)
	}
	a.adminURL = dead + "," + dead
	if _, err := a.adminBase(context.Background()); exitCode(err) != ExitUnavailable || !strings.Contains(err.Error(), "no admin API") {
		t.Fatalf("adminBase with none answering: %v (exit %d), want exit 6", err, exitCode(err))
	}
}

// TestReadyNeedsEveryAdminURL: felix ready with two URLs fails (exit 6) while one answers
// 503, and succeeds once both answer 200.
func TestReadyNeedsEveryAdminURL(t *testing.T) {
	var ready bool
	srv := func(ok func() bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !ok() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		}))
	}
	a1, a2 := srv(func() bool { return true }), srv(func() bool { return ready })
	defer a1.Close()
	defer a2.Close()
	env := func(k string) (string, bool) {
		if k == "FELIX_ADMIN_URL" {
			return a1.URL + "," + a2.URL, true
		}
		return "", false
	}
	var out, errb bytes.Buffer
	if code := run([]string{"ready"}, nil, &out, &errb, env); code != ExitUnavailable {
		t.Fatalf("ready with one broker not ready: exit %d (%s), want 6", code, errb.String())
	}
	ready = true
	out.Reset()
	if code := run([]string{"ready"}, nil, &out, &errb, env); code != 0 || !strings.Contains(out.String(), a2.URL) {
		t.Fatalf("ready with both ready: exit %d, %q %q", code, out.String(), errb.String())
	}
}

// TestClusterStatusPieces: the shard key as the lag metric's label, the lag read from the
// leader's metrics, and a shard's replicas from the brokers' views.
func TestClusterStatusPieces(t *testing.T) {
	if got := lagLabel("stream/default/default/orders/3"); got != "stream:default/default/orders#3" {
		t.Errorf("lagLabel = %q", got)
	}
	if got := lagLabel("odd"); got != "odd" {
		t.Errorf("lagLabel(odd) = %q", got)
	}
	metrics := `felix_replication_lag_records{shard="stream:default/default/orders#0",log="producers",follower="broker2"} 9
felix_replication_lag_records{shard="stream:default/default/orders#0",log="stream",follower="broker2"} 4
`
	if lag, ok := lagMetric(metrics, "stream:default/default/orders#0", "broker2"); !ok || lag != 4 {
		t.Errorf("lagMetric = %d, %v; want 4 (the stream log's)", lag, ok)
	}
	if _, ok := lagMetric(metrics, "stream:default/default/orders#0", "broker3"); ok {
		t.Error("lagMetric found a follower the metrics do not name")
	}
	key := "stream/default/default/orders/0"
	views := map[string]*brokerStatus{
		"broker1": {view: brokerOwnership{NodeID: "broker1", Open: []brokerOpen{{Shard: key, Role: "leader", Committed: 7, Durable: 7}}}, metrics: metrics},
		"broker2": {view: brokerOwnership{NodeID: "broker2", Open: []brokerOpen{{Shard: key, Role: "follower", Committed: 3, Durable: 3}}}},
	}
	as := cpAssignment{Kind: "stream", TenantID: "default", Namespace: "default", Name: "orders", Leader: "broker1",
		Followers: []string{"broker2", "broker3"}, Generation: 2}
	s := shardOf(as, views, []haltedReplica{{Shard: "stream:default/default/orders#0", Follower: "broker3"}})
	if s.Shard != key || s.Generation != 2 || len(s.Replicas) != 3 {
		t.Fatalf("shardOf = %+v", s)
	}
	r1, r2, r3 := s.Replicas[0], s.Replicas[1], s.Replicas[2]
	if r1.Role != "leader" || r1.Committed != 7 || r1.Lag != nil || r2.Role != "follower" || r2.Lag == nil || *r2.Lag != 4 ||
		r3.Role != "" || !r3.Halted || r2.Halted {
		t.Errorf("replicas: %+v %+v %+v", r1, r2, r3)
	}
	rows := []ownershipRow{{Shard: key, Leader: "broker1"}}
	open := map[string]brokerOwnership{"broker1": views["broker1"].view}
	if !leadersOpen(rows, open, "stream/default/default/orders/", 1) {
		t.Error("leadersOpen: the leader has the shard open")
	}
	if leadersOpen(rows, map[string]brokerOwnership{"broker1": {NodeID: "broker1"}}, "stream/default/default/orders/", 1) ||
		leadersOpen(rows, open, "stream/default/default/orders/", 2) {
		t.Error("leadersOpen: true with the shard not open, or a shard missing from the table")
	}
	open["broker1"] = brokerOwnership{NodeID: "broker1", Ownership: rows, Open: open["broker1"].Open}
	open["broker2"] = brokerOwnership{NodeID: "broker2"} // its feed has not brought the stream yet
	if streamReady(open, "stream/default/default/orders/", 1) {
		t.Error("streamReady: true while broker2's table lacks the stream")
	}
	open["broker2"] = brokerOwnership{NodeID: "broker2", Ownership: rows}
	if !streamReady(open, "stream/default/default/orders/", 1) {
		t.Error("streamReady: false with both tables holding the stream and its leader open")
	}
}

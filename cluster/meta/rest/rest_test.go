package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
	"felix/internal/testwait"
)

const testToken = "test-token"

// tune keeps the members' production Raft timeouts (raftnode.DefaultHeartbeatTimeout,
// 500 ms): at 200 ms a loaded 2-core machine lost leadership mid-test (a proposal answered
// "leadership lost while committing", a follower serving GET /v1/members without a
// leader); only the commit batching is shortened.
func tune(c *raft.Config) {
	c.CommitTimeout = 5 * time.Millisecond
}

// waitFor waits for cond with a deadline (checking every few milliseconds).
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

// member starts a one-member group in a temp dir (bootstrapped unless
// noBootstrap: then it never has a leader) and serves it over httptest.
func member(t *testing.T, mc meta.Config, noBootstrap bool) (*raftnode.Node, *httptest.Server) {
	t.Helper()
	addr, tr := raft.NewInmemTransport("m1")
	cfg := raftnode.Config{ID: "m1", Dir: t.TempDir(), Transport: tr, Meta: mc, Tune: tune}
	if !noBootstrap {
		cfg.Bootstrap = []raft.Server{{Suffrage: raft.Voter, ID: "m1", Address: addr}}
	}
	n, err := raftnode.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if !noBootstrap {
		waitFor(t, "leader", 10*time.Second, func() bool { return n.Raft.State() == raft.Leader })
	}
	srv := httptest.NewServer(New(Config{Node: n, Token: testToken}))
	t.Cleanup(srv.Close)
	return n, srv
}

// call sends one request (with the admin token unless noAuth) and decodes a
// JSON answer into out when out is not nil.
func call(t *testing.T, srv *httptest.Server, method, path, body string, out any, noAuth ...bool) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(noAuth) == 0 {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
	return resp.StatusCode, resp.Header
}

func expect(t *testing.T, srv *httptest.Server, method, path, body string, want int) apiError {
	t.Helper()
	var e apiError
	if got, _ := call(t, srv, method, path, body, &e); got != want {
		t.Fatalf("%s %s: status %d, want %d (%+v)", method, path, got, want, e)
	}
	return e
}

func TestCatalogThroughREST(t *testing.T) {
	_, srv := member(t, meta.Config{}, false)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"acme","future_field":1}`, 201)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"acme"}`, 409)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"a/b"}`, 400)
	expect(t, srv, "POST", "/v1/tenants", `[1]`, 400)
	if got, _ := call(t, srv, "POST", "/v1/tenants", `{"tenant_id":"x"}`, nil, true); got != 401 {
		t.Fatalf("write without the admin token: %d", got)
	}
	expect(t, srv, "POST", "/v1/tenants/acme/namespaces", `{"namespace":"prod"}`, 201)
	expect(t, srv, "POST", "/v1/tenants/acme/namespaces", `{"tenant_id":"other","namespace":"x"}`, 400)
	expect(t, srv, "POST", "/v1/tenants/nope/namespaces", `{"namespace":"x"}`, 404)
	const streams = "/v1/tenants/acme/namespaces/prod/streams"
	if e := expect(t, srv, "POST", streams, `{"stream":"orders"}`, 503); !strings.Contains(e.Message, "live") {
		t.Fatalf("no broker registered: %+v", e)
	}
	expect(t, srv, "POST", "/v1/brokers", `{"node_id":"b1","client_addr":"127.0.0.1:5000","unknown":true}`, 200)
	var s meta.Stream
	if got, _ := call(t, srv, "POST", streams, `{"stream":"orders","shards":2,"replication_factor":1}`, &s); got != 201 ||
		s.Shards != 2 || s.ReplicationFactor != 1 || !s.Durable || s.CreatedIndex == 0 {
		t.Fatalf("create stream: %d %+v", got, s)
	}
	expect(t, srv, "POST", streams, `{"stream":"big","replication_factor":3}`, 503)
	var list []meta.Stream
	if call(t, srv, "GET", streams, "", &list); len(list) != 1 || list[0].Stream != "orders" {
		t.Fatalf("list: %+v", list)
	}
	var c meta.Cache
	if got, _ := call(t, srv, "POST", "/v1/tenants/acme/namespaces/prod/caches", `{"cache":"c1"}`, &c); got != 201 || c.ReplicationFactor != 1 {
		t.Fatalf("create cache: %d %+v", got, c)
	}
	expect(t, srv, "GET", "/v1/tenants/acme/namespaces/prod/caches/c1", "", 200)
	expect(t, srv, "DELETE", streams+"/orders", "", 204)
	expect(t, srv, "GET", streams+"/orders", "", 404)
	expect(t, srv, "DELETE", streams+"/orders", "", 404)
	expect(t, srv, "PATCH", streams+"/orders", `{}`, 405)
	expect(t, srv, "GET", "/v1/nothing", "", 404)
	expect(t, srv, "DELETE", "/v1/tenants/acme", "", 204)
	expect(t, srv, "GET", "/v1/tenants/acme", "", 404)
}

func TestSnapshotAndFeed(t *testing.T) {
	_, srv := member(t, meta.Config{ChangeRetention: 3}, false)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"t1"}`, 201)
	var snap SnapshotBody
	if call(t, srv, "GET", "/v1/snapshot", "", &snap); snap.Seq == 0 || snap.Epoch == 0 || len(snap.Tenants) != 1 {
		t.Fatalf("snapshot: %+v", snap)
	}
	var page meta.Page
	if got, _ := call(t, srv, "GET", fmt.Sprintf("/v1/changes?after=%d&wait=50ms", snap.Seq), "", &page); got != 200 ||
		len(page.Changes) != 0 || page.Last != snap.Seq {
		t.Fatalf("nothing new, the wait bounded: %d %+v", got, page)
	}
	done := make(chan meta.Page, 1)
	go func() {
		var p meta.Page
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/changes?after=%d&wait=20s", srv.URL, snap.Seq), nil)
		if resp, err := srv.Client().Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&p)
			resp.Body.Close()
		}
		done <- p
	}()
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"t2"}`, 201)
	select {
	case p := <-done:
		if len(p.Changes) != 1 || p.Changes[0].Key != "t2" || p.Changes[0].Seq <= snap.Seq {
			t.Fatalf("long poll woke with %+v", p)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll did not wake on a change")
	}
	for _, id := range []string{"t3", "t4", "t5"} {
		expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"`+id+`"}`, 201)
	}
	if e := expect(t, srv, "GET", "/v1/changes?after=0", "", 410); e.Code != "gone" || e.Detail == nil {
		t.Fatalf("past retention: %+v", e)
	}
	expect(t, srv, "GET", "/v1/changes?after=100000", "", 410)
	expect(t, srv, "GET", "/v1/changes?after=x", "", 400)
	expect(t, srv, "GET", "/v1/changes?after=1&wait=forever", "", 400)
}

func TestNoLeaderIs503(t *testing.T) {
	_, srv := member(t, meta.Config{}, true)
	for _, r := range [][2]string{{"POST", "/v1/tenants"}, {"GET", "/v1/tenants"}, {"POST", "/v1/fleet/features/generation_start/finalize"}} {
		got, hdr := call(t, srv, r[0], r[1], `{"tenant_id":"t"}`, nil)
		if got != 503 || hdr.Get("Retry-After") == "" {
			t.Fatalf("%s %s without a leader: %d Retry-After %q", r[0], r[1], got, hdr.Get("Retry-After"))
		}
	}
}

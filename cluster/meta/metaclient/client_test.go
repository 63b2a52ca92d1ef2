package metaclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"felix/clock/clocktest"
	"felix/cluster/meta"
	"felix/cluster/meta/metaclient/metaclienttest"
	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
	"felix/internal/testwait"
)

const testToken = metaclienttest.Token

// waitFor waits for cond with a deadline (checking every few milliseconds).
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testwait.Until(t, d, what, cond)
}

// member starts a one-member control plane (metaclienttest: the real REST handler on a
// raftnode group of one).
func member(t *testing.T) (*raftnode.Node, *httptest.Server) {
	t.Helper()
	m := metaclienttest.Start(t, rest.Config{})
	return m.Node, m.Server
}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestRegisterHeartbeatSnapshotAndFeed(t *testing.T) {
	_, srv := member(t)
	c := newClient(t, Config{URLs: []string{srv.URL + "/"}})
	ctx := ctxFor(t, 20*time.Second)
	b, err := c.Register(ctx, Registration{RegisterBroker: meta.RegisterBroker{NodeID: "b1", StorageID: "s1",
		ClientAddr: "127.0.0.1:5000", InternalAddr: "127.0.0.1:5001", Features: []string{"jump_hash_routing"},
		MaxLevel: meta.BuildMaxLevel}, FeedCursor: 7})
	if err != nil || b.NodeID != "b1" || b.Incarnation != 1 || b.ClientAddr != "127.0.0.1:5000" {
		t.Fatalf("register: %+v %v", b, err)
	}
	if err := c.Heartbeat(ctx, HeartbeatBody{Heartbeat: meta.Heartbeat{NodeID: "b1"}, FeedCursor: 7}); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	var api *APIError
	if err := c.Heartbeat(ctx, HeartbeatBody{Heartbeat: meta.Heartbeat{NodeID: "b9"}}); !errors.As(err, &api) || api.Status != 404 {
		t.Fatalf("heartbeat of an unknown broker: %v", err)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil || len(snap.Brokers) != 1 || snap.Brokers[0].StorageID != "s1" || snap.Epoch == 0 || snap.Seq == 0 {
		t.Fatalf("snapshot: %+v %v", snap, err)
	}
	// The long poll waits for the next change: a tenant created through Forward.
	got := make(chan Page, 1)
	go func() {
		p, err := c.Changes(ctx, snap.Seq, 10*time.Second)
		if err != nil {
			t.Errorf("changes: %v", err)
		}
		got <- p
	}()
	resp, err := c.Forward(ctx, "POST", "/v1/tenants", []byte(`{"tenant_id":"t1","display_name":"T"}`))
	if err != nil || resp.Status != 201 {
		t.Fatalf("forward create: %+v %v", resp, err)
	}
	p := <-got
	if len(p.Changes) != 1 || p.Changes[0].Entity != "tenant" || p.Changes[0].Key != "t1" || p.Last <= snap.Seq ||
		!strings.Contains(string(p.Changes[0].Value), `"display_name":"T"`) {
		t.Fatalf("page: %+v", p)
	}
	// The control plane's refusal comes back as received.
	if resp, err := c.Forward(ctx, "POST", "/v1/tenants", []byte(`{"tenant_id":"t1"}`)); err != nil || resp.Status != 409 {
		t.Fatalf("forward duplicate: %+v %v", resp, err)
	}
	if err := c.Report(ctx, meta.ReplicaReport{ShardRef: meta.ShardRef{Kind: "stream", TenantID: "t1", Namespace: "n", Name: "s"},
		Leader: "b1"}); !errors.As(err, &api) || api.Status != 404 {
		t.Fatalf("report of an unknown shard: %v", err)
	}
}

func TestGoneAndRefused(t *testing.T) {
	n, srv := member(t)
	c := newClient(t, Config{URLs: []string{srv.URL}})
	ctx := ctxFor(t, 20*time.Second)
	_, err := c.Changes(ctx, 1<<40, 0)
	var gone *GoneError
	if !errors.Is(err, ErrGone) || !errors.As(err, &gone) || gone.Epoch == 0 || gone.Status != 410 {
		t.Fatalf("cursor ahead: %v", err)
	}
	// An upgraded cluster (b1 registered twice) finalizes majority_ack; b2
	// started with FELIX_INTERNAL_FENCE=false is refused with the seed's text.
	reg := Registration{RegisterBroker: meta.RegisterBroker{NodeID: "b1", Features: []string{"generation_start", "majority_ack"}}}
	for range 2 {
		if _, err := c.Register(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.ReportLevel(n.ID, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"generation_start", "majority_ack"} {
		if resp, err := c.Forward(ctx, "POST", "/v1/fleet/features/"+f+"/finalize", nil); err != nil || resp.Status != 200 {
			t.Fatalf("finalize %s: %+v %v", f, resp, err)
		}
	}
	_, err = c.Register(ctx, Registration{RegisterBroker: meta.RegisterBroker{NodeID: "b2", Features: []string{"generation_start"},
		Settings: map[string]string{"FELIX_INTERNAL_FENCE": "false"}}})
	var ref *RefusedError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &ref) || ref.Status != 409 ||
		!strings.Contains(ref.Message, "majority_ack") || !strings.Contains(ref.Message, "unset FELIX_INTERNAL_FENCE") {
		t.Fatalf("registration after finalize: %v", err)
	}
	var none *Client
	if none, err = New(Config{URLs: []string{"ftp://x"}}); !errors.Is(err, ErrNoMembers) || none != nil {
		t.Fatalf("bad URL: %v", err)
	}
}

// TestMembersInTurnAndBackoff: a dead member and a member answering 503 are
// passed over for the one that answers, which later requests go to first; a
// lone member answering 503 with Retry-After is retried after the backoff on
// the fake clock, never before.
func TestMembersInTurnAndBackoff(t *testing.T) {
	_, srv := member(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	var busy atomic.Int64
	noLeader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy.Add(-1) >= 0 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"code":"unavailable","message":"NotLeader: no leader elected"}`))
			return
		}
		srv.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(noLeader.Close)
	clk := clocktest.NewFake(time.Unix(1_700_000_000, 0))
	c := newClient(t, Config{URLs: []string{dead.URL, noLeader.URL, srv.URL}, Clock: clk, Jitter: func() float64 { return 0.5 }})
	ctx := ctxFor(t, 20*time.Second)
	busy.Store(1)
	if _, err := c.Snapshot(ctx); err != nil || c.Member() != srv.URL {
		t.Fatalf("snapshot through the third member: %v, member %s", err, c.Member())
	}
	if len(clk.Deadlines()) != 0 {
		t.Fatal("a round with an answer must not back off")
	}
	// A lone member: two 503s, then its answer.
	lone := newClient(t, Config{URLs: []string{noLeader.URL}, Clock: clk, Jitter: func() float64 { return 0.5 }})
	busy.Store(2)
	done := make(chan error, 1)
	go func() { _, err := lone.Snapshot(ctx); done <- err }()
	for range 2 {
		waitFor(t, "backoff timer", 10*time.Second, func() bool { return len(clk.Deadlines()) == 1 })
		if d := clk.Deadlines()[0].Sub(clk.Now()); d != time.Second {
			t.Fatalf("backoff %v: want the Retry-After of 1s", d)
		}
		select {
		case err := <-done:
			t.Fatalf("answered before the backoff ran out: %v", err)
		default:
		}
		clk.Advance(time.Second)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the backoff: %v", err)
	}
	// A 503 without Retry-After (too few live brokers for a placement) is an
	// answer, not retried.
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		_, _ = w.Write([]byte(`{"code":"unavailable","message":"placement: 3 live brokers, replication factor 4"}`))
	}))
	t.Cleanup(plain.Close)
	var api *APIError
	if _, err := newClient(t, Config{URLs: []string{plain.URL}, Clock: clk}).Snapshot(ctx); !errors.As(err, &api) ||
		api.Status != 503 || !strings.Contains(api.Message, "replication factor 4") || len(clk.Deadlines()) != 0 {
		t.Fatalf("a 503 without Retry-After: %v", err)
	}
	// A context that ends while backing off is ErrUnavailable.
	busy.Store(1 << 30)
	short, cancel := context.WithCancel(context.Background())
	go func() { _, err := lone.Snapshot(short); done <- err }()
	waitFor(t, "backoff timer", 10*time.Second, func() bool { return len(clk.Deadlines()) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "NotLeader") {
		t.Fatalf("cancelled while backing off: %v", err)
	}
}

// Package metaclienttest is a one-member control plane for tests (tests only; issue 17
// item 8): the real REST handler (cluster/meta/rest) over a cluster/meta/raftnode group of
// one on raft's in-memory transport in a temp dir, served by httptest behind a switch that
// takes it away (Member.Down), as the metaclient and broker tests use it.
package metaclienttest

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta/raftnode"
	"felix/cluster/meta/rest"
)

// Token is the member's admin token.
const Token = "test-token"

// Member is a running one-member control plane.
type Member struct {
	Node   *raftnode.Node
	Server *httptest.Server
	// Down, while true, closes the connection of every request, also of one whose answer
	// was being prepared when it was set (a long poll waiting then).
	Down atomic.Bool
}

// Start bootstraps the group, waits (≤ 10 s) until it leads, and serves rest.New(cfg)
// with cfg.Node and cfg.Token (Token) filled in; everything stops at t's cleanup.
func Start(t testing.TB, cfg rest.Config) *Member {
	t.Helper()
	addr, tr := raft.NewInmemTransport("m1")
	n, err := raftnode.Start(raftnode.Config{ID: "m1", Dir: t.TempDir(), Transport: tr,
		Bootstrap: []raft.Server{{Suffrage: raft.Voter, ID: "m1", Address: addr}},
		Tune: func(c *raft.Config) {
			c.HeartbeatTimeout, c.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
			c.LeaderLeaseTimeout, c.CommitTimeout = 100*time.Millisecond, 5*time.Millisecond
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for n.Raft.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no control-plane leader within 10 s")
		}
		time.Sleep(2 * time.Millisecond) // polling a condition, bounded by the deadline
	}
	cfg.Node, cfg.Token = n, Token
	m := &Member{Node: n}
	h := rest.New(cfg)
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		down := m.Down.Load()
		if !down {
			h.ServeHTTP(rec, r)
		}
		if down || m.Down.Load() {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(m.Server.Close)
	return m
}

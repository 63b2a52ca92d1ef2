package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// applyWarmup writes precede the measured ones (connections, the leader's first barrier).
const applyWarmup = 20

// TestApplyLatency measures Apply latency on a three-member control plane (issue 17,
// acceptance bullet 4): FELIX_CP_WRITES (500) sequential REST catalog writes (creates of
// fresh streams) on the leader, then as many through a follower (one forward hop), each
// from the request to its 201. Every write must be created; p50/p99/max and the rate are
// logged with the members' CPU and the load average (the machine is shared).
func TestApplyLatency(t *testing.T) {
	n := envInt(t, envWrites, 500)
	c := startCluster(t, 3)
	leader, _, err := c.waitLeader(leaderWait)
	if err != nil {
		t.Fatal(err)
	}
	a := &api{token: c.token}
	if err := a.setup([]*member{leader}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	a.heartbeats(ctx, c.members, &wg) // a create needs the broker live (10 s without a heartbeat: down)
	var follower *member
	for _, m := range c.members {
		if m != leader {
			follower = m
			break
		}
	}
	load0 := loadAvg()
	for _, via := range []struct {
		what string
		m    *member
	}{{"on the leader " + leader.id, leader}, {"through the follower " + follower.id, follower}} {
		lat, took := a.sequentialCreates(t, via.m, via.m.id, n)
		t.Logf("Apply latency %s, %d sequential REST creates: %s; %.0f writes/s", via.what, n, summary(lat, time.Microsecond),
			float64(n)/took.Seconds())
	}
	t.Logf("load average %s -> %s; member CPU %s", load0, loadAvg(), c.cpu())
}

// sequentialCreates creates applyWarmup+n fresh streams through m one after the other and
// returns the latencies of the last n and the time they took; a create that does not
// answer 201 fails the test.
func (a *api) sequentialCreates(t *testing.T, m *member, prefix string, n int) ([]time.Duration, time.Duration) {
	t.Helper()
	lat := make([]time.Duration, 0, n)
	var began time.Time
	for i := range applyWarmup + n {
		if i == applyWarmup {
			began = time.Now()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		ans := a.do(ctx, m, http.MethodPost, streamsPath, map[string]any{"stream": fmt.Sprintf("apply-%s-%d", prefix, i)})
		d := time.Since(start)
		cancel()
		if ans.err != nil || ans.status != http.StatusCreated {
			t.Fatalf("write %d through %s: %v", i, m.id, ans.error())
		}
		if i >= applyWarmup {
			lat = append(lat, d)
		}
	}
	return lat, time.Since(began)
}

package failover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/cluster/meta"
)

// producers is the test's idempotent producers: each publishes "p<i>-<n>" records one
// at a time through the SDK (WithFailover to the other two brokers) and keeps every
// acknowledged payload with its acknowledgement time.
type producers struct {
	f      *fixture
	idem   bool // idempotent publishers
	mu     sync.Mutex
	acked  map[string]time.Time // payload → when its acknowledgement arrived
	began  map[string]time.Time // payload → when its publish began
	offset map[string]uint64    // payload → the offset its acknowledgement named
	errs   []string
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// rotateAfter is how many refusals in a row make a producer dial the next broker (the
// SDK's WithFailover moves only when a dial fails; a broker that cannot serve or forward
// the publish, e.g. one still opening the shard, refuses it).
const rotateAfter = 3

// publishTimeout bounds one publish; a publish that times out makes the producer dial the
// next broker at once. An idempotent publish in flight at the leader's SIGKILL is re-sent
// by the SDK after its pool slot fails over, but in these runs it (and the publishes
// after it on the same Publisher) did not complete within 10 s on the new leader: the
// producer gives up on that client (docs/bench/failover.md).
const publishTimeout = 500 * time.Millisecond

// startProducers starts n producers, producer i dialling broker i%3 first.
func (f *fixture) startProducers(ctx context.Context, n int, idempotent bool) *producers {
	f.t.Helper()
	p := &producers{f: f, idem: idempotent, acked: map[string]time.Time{}, began: map[string]time.Time{},
		offset: map[string]uint64{}}
	pctx, cancel := context.WithCancel(ctx)
	p.stop = cancel
	for i := range n {
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			p.run(pctx, i)
		}()
	}
	return p
}

// dial connects producer i to broker at (the other two as WithFailover) and opens an
// idempotent publisher.
func (p *producers) dial(ctx context.Context, at int) (*client.Client, *client.Publisher, error) {
	var rest []string
	for j := 1; j < 3; j++ {
		rest = append(rest, p.f.brokers[(at+j)%3].addr)
	}
	cl, err := client.Dial(ctx, p.f.brokers[at].addr, client.WithFingerprint(p.f.cert.Fingerprint),
		client.WithTenant(tenant), client.WithNamespace(namespace), client.WithDialTimeout(500*time.Millisecond),
		client.WithFailover(rest...), client.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	pub, err := cl.NewPublisher(streamName, client.PublisherOptions{Idempotent: p.idem, Offsets: true, Linger: -1})
	if err != nil {
		_ = cl.Close()
		return nil, nil, err
	}
	return cl, pub, nil
}

// run publishes until ctx ends; a publish that fails is recorded (not acknowledged), the
// next one is tried 20 ms later, and after rotateAfter refusals in a row, or a timeout,
// the producer dials the next broker.
func (p *producers) run(ctx context.Context, i int) {
	at, refused := i%3, 0
	var cl *client.Client
	var pub *client.Publisher
	defer func() {
		if cl != nil {
			_ = cl.Close()
		}
	}()
	for n := 0; ctx.Err() == nil; {
		if cl == nil {
			var err error
			if cl, pub, err = p.dial(ctx, at); err != nil {
				cl, at = nil, (at+1)%3
				pace(ctx)
				continue
			}
		}
		payload := fmt.Sprintf("p%d-%d", i, n)
		n++
		began := time.Now()
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		res, err := pub.PublishSync(pctx, []byte(payload))
		cancel()
		if p.note(ctx, payload, began, res, err) {
			refused = 0
			continue
		}
		if refused++; refused >= rotateAfter || errors.Is(err, context.DeadlineExceeded) {
			_ = cl.Close()
			cl, at, refused = nil, (at+1)%3, 0
		}
		pace(ctx)
	}
}

// note records payload's outcome and reports whether it was acknowledged.
func (p *producers) note(ctx context.Context, payload string, began time.Time, res client.PublishResult, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		p.acked[payload] = time.Now()
		p.began[payload] = began
		p.offset[payload] = res.FirstOffset
		return true
	}
	if ctx.Err() == nil {
		p.errs = append(p.errs, payload+": "+err.Error())
	}
	return false
}

// pace waits 20 ms (or until ctx ends) before the next attempt after a refusal.
func pace(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// firstAckAfter returns the earliest acknowledgement of a publish that began after t0
// (ok=false: none yet): one the old leader cannot have answered when t0 is its SIGKILL.
func (p *producers) firstAckAfter(t0 time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first time.Time
	for payload, at := range p.acked {
		if p.began[payload].After(t0) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	return first, !first.IsZero()
}

// acksAfter counts the acknowledgements after t0.
func (p *producers) acksAfter(t0 time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.acked {
		if at.After(t0) {
			n++
		}
	}
	return n
}

// halt stops the producers (each closes its client).
func (p *producers) halt() {
	p.stop()
	p.done.Wait()
}

// kills is FELIX_FAILOVER_KILLS (3 by default: the CI size).
func kills(t *testing.T) int {
	if s := os.Getenv("FELIX_FAILOVER_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("FELIX_FAILOVER_KILLS=%q: a positive integer", s)
		}
		return n
	}
	return 3
}

// TestLeaderKillFailsOver: the broker leading shard 0 of an RF3 Quorum stream is SIGKILLed
// while idempotent producers publish; the control plane promotes a caught-up follower at
// generation + 1 within a bounded time, publishes resume, and the killed broker comes back
// as a follower; repeated. At the end every acknowledged record is in the final leader's
// log exactly once, and every follower is durable at the leader's committed offset.
func TestLeaderKillFailsOver(t *testing.T) { leaderKills(t, true) }

// TestLeaderKillFailsOverPlain is the same with producers that are not idempotent (no
// producers-log entries: docs/failover.md, "What is unsafe, exactly").
func TestLeaderKillFailsOverPlain(t *testing.T) { leaderKills(t, false) }

// leaderKills runs the kill loop with idempotent producers or not.
func leaderKills(t *testing.T, idempotent bool) {
	n := kills(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*40*time.Second+90*time.Second)
	defer cancel()
	f := start(ctx, t)
	f.createStream(ctx)
	p := f.startProducers(ctx, 3, idempotent)
	defer p.halt()
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Logf("last producer failures: %v", p.errs[max(0, len(p.errs)-12):])
		}
	})
	var times []time.Duration
	for k := range n {
		times = append(times, f.killLeader(ctx, k, p))
	}
	p.halt()
	f.check(ctx, p)
	slices.Sort(times)
	t.Logf("failover (SIGKILL → first acked publish) over %d kills: p50 %v, max %v, all %v",
		n, times[len(times)/2].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), times)
	p.mu.Lock()
	t.Logf("%d publishes acknowledged, %d failed (not acknowledged: may or may not be in the log); first failures: %v",
		len(p.acked), len(p.errs), p.errs[:min(len(p.errs), 5)])
	p.mu.Unlock()
}

// createStream creates the tenant, namespace and the RF3 Quorum stream of one shard
// through broker 0 and waits until every broker holds shard 0 in its role.
func (f *fixture) createStream(ctx context.Context) {
	f.t.Helper()
	admin := "http://" + f.brokers[0].addr
	for _, path := range []string{"/v1/tenants", "/v1/tenants/" + tenant + "/namespaces"} {
		if code, out := call(ctx, "POST", admin+path, map[string]any{"tenant_id": tenant, "namespace": namespace}, nil); code != http.StatusCreated {
			f.t.Fatalf("POST %s: %d %s", path, code, out)
		}
	}
	code, out := call(ctx, "POST", admin+"/v1/tenants/"+tenant+"/namespaces/"+namespace+"/streams",
		map[string]any{"stream": streamName, "shards": 1, "replication_factor": 3, "consistency": "Quorum", "durable": true}, nil)
	if code != http.StatusCreated {
		f.t.Fatalf("create the stream: %d %s", code, out)
	}
	a, ok := f.assignment(ctx)
	if !ok {
		f.t.Fatal("no assignment for shard 0")
	}
	f.waitRoles(ctx, a)
}

// waitRoles waits until every member of a's replica set holds shard 0 at a's generation in
// its role.
func (f *fixture) waitRoles(ctx context.Context, a meta.Assignment) {
	f.t.Helper()
	for _, id := range append([]string{a.Leader}, a.Followers...) {
		want := "follower"
		if id == a.Leader {
			want = "leader"
		}
		waitFor(f.t, 30*time.Second, id+" holding shard 0 as "+want+" at generation "+strconv.FormatUint(a.Generation, 10), func() bool {
			o, ok := f.open(ctx, f.broker(id))
			return ok && o.Role == want && o.Generation == a.Generation
		})
	}
}

// killLeader SIGKILLs the broker leading shard 0, waits for the control plane to promote a
// follower at generation + 1 (≤ 15 s) and for the first acknowledged publish after the
// kill (≤ 20 s), restarts the killed broker and waits until it follows, durable at the
// leader's commit. It returns the failover time (SIGKILL → first acknowledged publish).
func (f *fixture) killLeader(ctx context.Context, k int, p *producers) time.Duration {
	f.t.Helper()
	a, ok := f.assignment(ctx)
	if !ok {
		f.t.Fatal("no assignment for shard 0")
	}
	// The workload runs on this assignment before the kill: 50 acknowledgements, and one
	// begun a second later (the leader reported its followers at least twice meanwhile:
	// a leader that never reported leaves its shard unplaceable, correctly).
	since := time.Now()
	waitFor(f.t, 30*time.Second, "50 acknowledged publishes over a second before kill "+strconv.Itoa(k), func() bool {
		_, late := p.firstAckAfter(since.Add(time.Second))
		return late && p.acksAfter(since) >= 50
	})
	f.waitNoHalt(ctx, a.Leader, k)
	victim := f.broker(a.Leader)
	t0 := time.Now()
	if _, err := victim.proc.Kill(ctx); err != nil {
		f.t.Fatal(err)
	}
	var b meta.Assignment
	waitFor(f.t, 15*time.Second, fmt.Sprintf("a promotion away from %s at generation %d", a.Leader, a.Generation+1), func() bool {
		b, ok = f.assignment(ctx)
		return ok && b.Leader != a.Leader
	})
	promoted := time.Since(t0)
	if b.Generation <= a.Generation || !slices.Contains(a.Followers, b.Leader) || !slices.Contains(b.Followers, a.Leader) {
		f.t.Fatalf("kill %d: assignment %+v after %+v: want a follower above generation %d with the old leader following", k, b, a, a.Generation)
	}
	var first time.Time
	waitFor(f.t, 20*time.Second, "an acknowledged publish after kill "+strconv.Itoa(k), func() bool {
		first, ok = p.firstAckAfter(t0)
		return ok
	})
	took := first.Sub(t0)
	// A promoted follower behind a fenced replica refuses to open and the replica ahead is
	// promoted above it (docs/failover.md, "Fence rounds"): the assignment that serves is
	// the current one.
	if c, ok := f.assignment(ctx); ok && c.Generation != b.Generation {
		f.t.Logf("kill %d: %s refused to open at %d; %s leads at %d", k, b.Leader, b.Generation, c.Leader, c.Generation)
		b = c
	}
	f.t.Logf("kill %d: %s SIGKILLed at %s at generation %d; %s promoted at %d after %v; first ack after %v",
		k, a.Leader, t0.Format("15:04:05.000"), a.Generation, b.Leader, b.Generation, promoted.Round(time.Millisecond),
		took.Round(time.Millisecond))
	np, err := victim.proc.Restart(ctx, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	victim.proc = np
	f.waitRoles(ctx, b)
	f.waitDurable(ctx, b)
	return took
}

// waitDurable waits until every follower of a is durable at the leader's committed
// offset (read once).
func (f *fixture) waitDurable(ctx context.Context, a meta.Assignment) {
	f.t.Helper()
	lead, ok := f.open(ctx, f.broker(a.Leader))
	if !ok {
		f.t.Fatalf("the leader %s does not answer", a.Leader)
	}
	for _, id := range a.Followers {
		var last openShard
		waitFor(f.t, 30*time.Second, fmt.Sprintf("%s durable at the leader's commit %d", id, lead.Committed), func() bool {
			last, ok = f.open(ctx, f.broker(id))
			return ok && last.Durable >= lead.Committed
		})
	}
}

// waitNoHalt waits (≤ 20 s) until the leader's GET /replication/halted is empty: a kill
// is made only while every follower replicates every log of the shard (a halted follower
// is named with its log and reason when the wait fails).
func (f *fixture) waitNoHalt(ctx context.Context, leader string, k int) {
	f.t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var halted []map[string]any
		code, out := call(ctx, "GET", "http://"+f.broker(leader).addr+"/replication/halted", nil, &halted)
		if code == http.StatusOK && len(halted) == 0 {
			return
		}
		last = out
		if time.Now().After(deadline) {
			f.t.Fatalf("before kill %d: the leader %s still reports halted followers after 20 s: %s", k, leader, last)
		}
		pace(ctx)
	}
}

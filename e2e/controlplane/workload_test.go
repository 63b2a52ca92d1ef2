package controlplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"felix/testbed/history"
)

// setupWrite sends one setup write through the members in turn until it answers one of
// want (a 503 or a cut answer is retried every 50 ms), bounded by within. Errors: another
// answer, or the bound's end with the last answer.
func (a *api) setupWrite(within time.Duration, members []*member, method, path string, body any, want ...int) error {
	var ans answer
	i := 0
	err := poll(within, 50*time.Millisecond, func(ctx context.Context) (bool, error) {
		ans = a.do(ctx, members[i%len(members)], method, path, body)
		i++
		switch {
		case ans.err == nil && slices.Contains(want, ans.status):
			return true, nil
		case ans.err == nil && ans.status != http.StatusServiceUnavailable && ans.status < 500:
			return false, ans.error()
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w (last answer: %v)", method, path, err, ans.error())
	}
	return nil
}

// broker is the one broker the setup registers (a stream of replication factor 1 needs a
// live broker); it reports stream_incarnations, so a deleted name can be created again.
const broker = "b1"

// setup registers the broker, creates the tenant and the namespace and finalizes
// stream_incarnations (until then a deleted stream's name cannot be created again),
// bounded by within.
func (a *api) setup(members []*member, within time.Duration) error {
	reg := map[string]any{"node_id": broker, "client_addr": "127.0.0.1:1", "internal_addr": "127.0.0.1:2",
		"features": []string{"stream_incarnations"}, "max_level": 14}
	steps := []struct {
		method, path string
		body         any
		want         []int
	}{
		{http.MethodPost, "/v1/brokers", reg, []int{http.StatusOK}},
		{http.MethodPost, "/v1/tenants", map[string]any{"tenant_id": tenant}, []int{http.StatusCreated, http.StatusConflict}},
		{http.MethodPost, "/v1/tenants/" + tenant + "/namespaces", map[string]any{"namespace": namespace},
			[]int{http.StatusCreated, http.StatusConflict}},
	}
	for _, s := range steps {
		if err := a.setupWrite(within, members, s.method, s.path, s.body, s.want...); err != nil {
			return err
		}
	}
	// Refused (409) while the leader has not yet reported every member's level: retried.
	var ans answer
	err := poll(within, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		ans = a.do(ctx, members[0], http.MethodPost, "/v1/fleet/features/stream_incarnations/finalize", map[string]any{})
		return ans.err == nil && ans.status == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("finalize stream_incarnations: %w (last answer: %v)", err, ans.error())
	}
	return nil
}

// heartbeats keeps the broker live (meta.DefaultLivenessTimeout is 10 s) with a heartbeat
// every 500 ms through the members in turn, until ctx ends; answers are not checked.
func (a *api) heartbeats(ctx context.Context, members []*member, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			a.do(ctx, members[i%len(members)], http.MethodPost, "/v1/brokers/"+broker+"/heartbeat", map[string]any{})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// workload is the concurrent catalog clients: each picks an operation (create 35%,
// delete 25%, get 25%, list 15%), a stream name of names and a member at random, one
// operation per pace tick.
type workload struct {
	api      *api
	members  []*member
	names    []string
	pace     time.Duration
	okWrites atomic.Int64 // ok creates and deletes so far
}

// workloadPace is each client's tick: at most one operation per 15 ms; failBackoff the
// wait after an operation that did not answer ok.
const (
	workloadPace = 15 * time.Millisecond
	failBackoff  = 100 * time.Millisecond
)

// start runs clients processes 0..clients-1 until ctx ends, each with its own generator
// from seed.
func (w *workload) start(ctx context.Context, clients int, seed uint64, wg *sync.WaitGroup) {
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(ctx, c, rand.New(rand.NewPCG(seed, uint64(c))))
		}()
	}
}

func (w *workload) client(ctx context.Context, process int, rng *rand.Rand) {
	tick := time.NewTicker(w.pace)
	defer tick.Stop()
	for seq := int64(1); ; seq++ {
		m := w.members[rng.IntN(len(w.members))]
		name := w.names[rng.IntN(len(w.names))]
		o, r := history.OK, rng.IntN(100)
		switch {
		case r < 35:
			o = w.api.create(ctx, process, m, name, int64(process)<<32|seq)
		case r < 60:
			o = w.api.remove(ctx, process, m, name)
		case r < 85:
			o = w.api.get(ctx, process, m, name)
		default:
			o = w.api.list(ctx, process, m, w.names)
		}
		if o == history.OK && r < 60 {
			w.okWrites.Add(1)
		}
		for range w.ticks(o) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
}

// ticks is how many pace ticks a client waits after an operation: one, or failBackoff
// after one that did not answer ok (a member down, no leader), so the clients do not
// spin through an election.
func (w *workload) ticks(o history.Outcome) int {
	if o == history.OK {
		return 1
	}
	return max(1, int(failBackoff/w.pace))
}

// waitWrites waits until the workload's ok writes exceed from by n, bounded by within.
func (w *workload) waitWrites(from int64, n int64, within time.Duration) error {
	err := poll(within, pollInterval, func(context.Context) (bool, error) { return w.okWrites.Load() >= from+n, nil })
	if err != nil {
		return fmt.Errorf("%d ok catalog writes within %v, want %d", w.okWrites.Load()-from, within, n)
	}
	return nil
}

// probeProcess is the history process of the pause probe.
const probeProcess = 1000

// probePace is the probe's tick: the resolution of the measured pause.
const probePace = 20 * time.Millisecond

// probe creates fresh streams ("probe-K-N") through the survivors in turn, one per
// probePace, until one is created; it returns when that create completed. Errors: none
// created within within.
func (a *api) probe(survivors []*member, kill int, within time.Duration) (time.Time, error) {
	var resumed time.Time
	n := 0
	err := poll(within, probePace, func(ctx context.Context) (bool, error) {
		name := fmt.Sprintf("probe-%d-%d", kill, n)
		if a.create(ctx, probeProcess, survivors[n%len(survivors)], name, int64(kill)<<32|int64(n)) == history.OK {
			resumed = time.Now()
		}
		n++
		return !resumed.IsZero(), nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("no catalog write through %s, %s within %v of the kill (%d tries)",
			survivors[0].id, survivors[len(survivors)-1].id, within, n)
	}
	return resumed, nil
}

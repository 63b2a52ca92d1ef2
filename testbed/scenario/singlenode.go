package scenario

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"felix/client"
	"felix/testbed/history"
)

// SingleNodeKill is the name of the built-in scenario of singlenode*.go.
const SingleNodeKill = "single-node-kill"

func init() {
	MustRegister(Scenario{
		Name: SingleNodeKill,
		Description: "one broker SIGKILLed N times while idempotent publishes, per-shard subscribers, cache and counter " +
			"operations are in flight; final reads, then every checker on the history",
		Defaults: Sizes{Ops: 4000, Kills: 20, Duration: 10 * time.Minute},
		Run:      runSingleNodeKill,
	})
}

// The single-node-kill workload's shape.
const (
	snkStream      = "chaos" // durable stream, snkShards shards, delivery AtLeastOnce
	snkCache       = "chaos" // durable cache, snkCacheShards shards
	snkShards      = 4
	snkCacheShards = 2
	snkKeys        = 8 // cache keys k<w>-0..k<w>-7 per window: few, so operations on a key overlap
	snkCounters    = 4 // counters c<w>-0..c<w>-3 per window
	// snkKeyWindow is how many load operations use one window's keys before the next
	// window's fresh keys take over (Jepsen's independent keys): it bounds the operations,
	// and the open-ended info writes, porcupine must place per key, whatever the run's size.
	snkKeyWindow    = 1000
	snkPublishers   = 4 // publishing goroutines (one idempotent Publisher shared)
	snkCacheWorkers = 4 // cache goroutines
	// snkOpTimeout bounds each client operation of the load and of the final phase; one
	// that runs out is recorded as info (it may still take effect).
	snkOpTimeout = 15 * time.Second
	// snkFinalWait bounds the final reads and Gets together.
	snkFinalWait = 2 * time.Minute
	// snkDrain is the SIGTERM drain budget the broker gets before it is SIGKILLed.
	snkDrain = 30 * time.Second
	// snkLinTimeout bounds porcupine's search per cache key or counter.
	snkLinTimeout = time.Minute
	// snkGetTries bounds the attempts of each final Get or CounterGet (each recorded).
	snkGetTries = 5
)

// snkRun is the state of one single-node-kill run.
type snkRun struct {
	env   *Env
	res   *Result
	b     *Broker
	tr    *Tracker
	total int64

	tickets atomic.Int64 // the load's next operation number
	procs   atomic.Int64 // the next unused history process id

	pubCl, cacheCl, subCl *client.Client
	pub                   *client.Publisher

	mu     sync.Mutex
	counts map[history.Kind]*[3]int // per kind: ok, info, fail
	subs   subStats
}

// subStats counts what the subscribers did.
type subStats struct {
	reads, resubscribes int
	lastErr             error
}

func runSingleNodeKill(ctx context.Context, env *Env) (Result, error) {
	var res Result
	r := &snkRun{env: env, res: &res, tr: NewTracker(), total: int64(env.Sizes.Ops), counts: map[history.Kind]*[3]int{}}
	env.Logf("single-node-kill: seed %d, %d operations, %d kills, work dir %s", env.Seed, env.Sizes.Ops, env.Sizes.Kills, env.Dir)
	b, err := StartBroker(ctx, env, "broker")
	if err != nil {
		return res, err
	}
	r.b = b
	if err := r.createObjects(ctx); err != nil {
		return res, err
	}
	if err := r.dialClients(ctx); err != nil {
		return res, err
	}
	defer r.closeClients()
	began := time.Now()
	kl, err := r.load(ctx)
	r.loadRows(kl, time.Since(began))
	if err != nil {
		return res, err
	}
	if err := r.final(ctx); err != nil {
		return res, err
	}
	return res, r.check()
}

// newProcess returns a history process id never used before in the run (Jepsen's rule:
// after an indeterminate operation its process is abandoned for a new one).
func (r *snkRun) newProcess() int { return int(r.procs.Add(1) - 1) }

// createObjects creates the stream and the cache through the admin API, each recorded as
// a catalog-create.
func (r *snkRun) createObjects(ctx context.Context) error {
	adm, err := r.b.Admin()
	if err != nil {
		return err
	}
	octx, cancel := context.WithTimeout(ctx, snkOpTimeout)
	defer cancel()
	spec := fmt.Sprintf("shards=%d durable delivery=AtLeastOnce", snkShards)
	op := r.env.History.Invoke(r.newProcess(), "admin", history.KindCatalogCreate, history.Input{Entry: "stream/" + snkStream, Spec: spec})
	_, err = adm.CreateStream(octx, client.StreamInfo{Name: snkStream, Shards: snkShards, Durable: true, Delivery: client.DeliveryAtLeastOnce})
	if err := r.completeCatalog(op, err); err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	durable := true
	op = r.env.History.Invoke(r.newProcess(), "admin", history.KindCatalogCreate,
		history.Input{Entry: "cache/" + snkCache, Spec: fmt.Sprintf("shards=%d durable", snkCacheShards)})
	_, err = adm.CreateCache(octx, client.CacheInfo{Name: snkCache, Shards: snkCacheShards, Durable: &durable})
	if err := r.completeCatalog(op, err); err != nil {
		return fmt.Errorf("create cache: %w", err)
	}
	return nil
}

// completeCatalog records an admin create's answer; any error but nil is the run's.
func (r *snkRun) completeCatalog(op *history.Pending, err error) error {
	if err != nil {
		op.Info(history.Output{}, err)
		return err
	}
	return op.Ok(history.Output{})
}

// dialClients connects the load's three SDK clients, one QUIC connection each (so a poke
// reaches the connection every operation of the client uses): publishes (idempotent
// re-sends up to 200 attempts), cache operations (one attempt each: no hidden re-send,
// so a Delete's answer is its own) and subscriptions.
func (r *snkRun) dialClients(ctx context.Context) error {
	var err error
	if r.pubCl, err = r.b.Dial(ctx, 200, client.WithConnPool(1)); err != nil {
		return fmt.Errorf("dial publisher client: %w", err)
	}
	if r.cacheCl, err = r.b.Dial(ctx, 1, client.WithConnPool(1)); err != nil {
		return fmt.Errorf("dial cache client: %w", err)
	}
	if r.subCl, err = r.b.Dial(ctx, 200, client.WithConnPool(1)); err != nil {
		return fmt.Errorf("dial subscriber client: %w", err)
	}
	r.pub, err = r.pubCl.NewPublisher(snkStream, client.PublisherOptions{Idempotent: true, Offsets: true, Linger: -1})
	return err
}

// closeClients closes whatever clients are open and forgets them (idempotent).
func (r *snkRun) closeClients() {
	r.mu.Lock()
	pub, cls := r.pub, []*client.Client{r.pubCl, r.cacheCl, r.subCl}
	r.pub, r.pubCl, r.cacheCl, r.subCl = nil, nil, nil, nil
	r.mu.Unlock()
	if pub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		pub.Close(ctx)
		cancel()
	}
	for _, c := range cls {
		if c != nil {
			c.Close()
		}
	}
}

// count adds one completed operation to the per-kind table.
func (r *snkRun) count(kind history.Kind, o history.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.counts[kind]
	if c == nil {
		c = new([3]int)
		r.counts[kind] = c
	}
	switch o {
	case history.OK:
		c[0]++
	case history.Info:
		c[1]++
	default:
		c[2]++
	}
}

// loadRows adds the rows of the load phase: the kills and the operations.
func (r *snkRun) loadRows(kl KillLog, took time.Duration) {
	res, want := r.res, r.env.Sizes.Kills
	res.Check(fmt.Sprintf("SIGKILLs with operations in flight (counted; want %d) / with none (not counted)", want),
		kl.Counted >= want, "%d / %d", kl.Counted, kl.Idle)
	res.Note("operations invoked since the previous restart and in flight at each counted kill (min / median / max)", "%s", spread(kl.InFlight))
	res.Note("of them acknowledged ok (min / median / max per kill)", "%s", spread(r.tr.AckedAtFaults(kl.Epochs)))
	res.Note("SIGKILL to ready again (mean; min / median / max)", "%s; %s", meanDuration(kl.Down), spread(kl.Down))
	st := r.tr.State()
	res.Check("load operations completed", st.Completed == r.total && st.InFlight == 0, "%d of %d in %s", st.Completed, r.total, took.Round(time.Millisecond))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range []history.Kind{history.KindPublish, history.KindCachePut, history.KindCacheGet,
		history.KindCacheDelete, history.KindCounterAdd, history.KindCounterGet, "poke (cache-get)"} {
		if c := r.counts[k]; c != nil {
			res.Note("load "+string(k), "%d ok, %d info, %d fail", c[0], c[1], c[2])
		}
	}
	res.Note("live subscriber reads / new Subscriptions after a failure", "%d / %d (last error: %v)", r.subs.reads, r.subs.resubscribes, r.subs.lastErr)
}

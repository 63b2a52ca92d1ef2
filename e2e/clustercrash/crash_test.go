package clustercrash

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/cluster/meta"
	"felix/internal/testseed"
	"felix/seglog"
	"felix/testbed/clusterbed"
	"felix/testbed/corpus"
)

// hashBody is the first 8 bytes of a record body's SHA-256 (replica comparison).
func hashBody(b []byte) []byte { s := sha256.Sum256(b); return s[:8] }

// TestClusterCrashCorpus is issue 21 item 2 at CI size (package doc).
func TestClusterCrashCorpus(t *testing.T) {
	cfg := loadConfig(t)
	seed := testseed.Seed(t, uint64(time.Now().UnixNano()))
	rng := rand.New(rand.NewPCG(seed, 21))
	roots, err := corpus.Roots()
	if err != nil {
		t.Fatal(err)
	}
	c, err := corpus.Load(roots, cfg.files, maxPayload)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("corpus: %d files (%.1f MiB) of %d scanned, %d above %d bytes left out, %d unreadable; seed %d",
		len(c.Files), float64(c.Bytes)/(1<<20), c.Scanned, c.Skipped, maxPayload, c.Unreadable, seed)
	deadline := time.Now().Add(14 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second) // leave the test's own timeout room to print the logs
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	bed := clusterbed.Start(ctx, t, clusterbed.Config{ControlPlaneBin: bins.controlPlane, BrokerBin: bins.broker,
		AutoFailover: cfg.failover})
	if cfg.failover {
		downMin, downSpan = 2500*time.Millisecond, 1500*time.Millisecond
		t.Log("automatic failover on: killed leaders stay down past the control plane's down timeout")
	}
	createCatalog(ctx, t, bed)
	r := &report{files: len(c.Files)}
	streamAs, streamCommitted := streamPhase(ctx, t, bed, c, rng, cfg, r)
	cacheAs, cacheCommitted := cachePhase(ctx, t, bed, c, rng, cfg, r)
	for _, br := range bed.Brokers {
		if _, err := bed.StopBroker(ctx, br, 20*time.Second); err != nil {
			t.Errorf("stop %s: %v", br.ID, err)
		}
	}
	n1, p1 := compareReplicas(bed, seglog.ShardStream, streamName, streamAs, streamCommitted)
	n2, p2 := compareReplicas(bed, seglog.ShardCache, cacheName, cacheAs, cacheCommitted)
	r.replicaShards, r.replicaProblems = n1+n2, append(p1, p2...)
	if len(r.replicaProblems) == 0 {
		plantDivergence(t, bed, streamAs, streamCommitted)
	}
	r.rss, r.elapsed = bed.PeakRSS(), time.Since(start)
	t.Log("\n" + r.table())
	if fs := r.failures(); len(fs) > 0 {
		t.Fatalf("seed %d: %d problems:\n%s\nfaults:\n%s", seed, len(fs), strings.Join(fs, "\n"), r.faults.String())
	}
}

// createCatalog creates the tenant, namespace, the 8-shard RF3 Quorum stream and the
// 8-shard RF3 cache through the control plane, and waits until every shard is open.
func createCatalog(ctx context.Context, t *testing.T, bed *clusterbed.Bed) {
	t.Helper()
	ns := "/v1/tenants/" + tenant + "/namespaces"
	for _, p := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/tenants", map[string]any{"tenant_id": tenant, "display_name": tenant}},
		{ns, map[string]any{"tenant_id": tenant, "namespace": namespace, "display_name": namespace}},
		{ns + "/" + namespace + "/streams", map[string]any{"tenant_id": tenant, "namespace": namespace, "stream": streamName,
			"shards": shards, "replication_factor": 3, "consistency": "Quorum", "durable": true}},
		{ns + "/" + namespace + "/caches", map[string]any{"tenant_id": tenant, "namespace": namespace, "cache": cacheName,
			"shards": shards, "replication_factor": 3, "durable": true}},
	} {
		if code, out := bed.ControlPlane(ctx, http.MethodPost, p.path, p.body, nil); code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", p.path, code, out)
		}
	}
	for _, k := range [][2]string{{"stream", streamName}, {"cache", cacheName}} {
		if _, _, err := settle(ctx, bed, k[0], k[1], time.Minute); err != nil {
			t.Fatalf("%s %s: %v", k[0], k[1], err)
		}
	}
}

// streamPhase publishes the corpus with subscribers and the group running and the faults
// applied, then settles, reads every shard's final log and accounts for it.
func streamPhase(ctx context.Context, t *testing.T, bed *clusterbed.Bed, c *corpus.Corpus, rng *rand.Rand, cfg config,
	r *report) (map[uint32]meta.Assignment, map[uint32]uint64) {
	t.Helper()
	readCtx, stopReaders := context.WithCancel(ctx)
	var readers sync.WaitGroup
	var subs []*subscriber
	for s := range uint32(shards) {
		sub := &subscriber{shard: s}
		subs = append(subs, sub)
		readers.Go(func() { sub.follow(readCtx, bed, int(s)%len(bed.Brokers)) })
	}
	grp := &group{delivered: map[[2]uint64]seen{}}
	for w := 1; w <= 2; w++ {
		readers.Go(func() { grp.consume(readCtx, bed, w) })
	}
	pr := &progress{}
	faultErr := make(chan error, 1)
	go func() {
		faultErr <- runFaults(ctx, bed, rng, schedule(rng, cfg.kills, cfg.cpKills), "stream", streamName, pr, int64(len(c.Files)), &r.faults)
	}()
	t0 := time.Now()
	results, err := publishAll(ctx, bed, c, pr)
	r.publishSecs = time.Since(t0).Seconds()
	if ferr := <-faultErr; ferr != nil {
		t.Fatalf("faults: %v\n%s", ferr, r.faults.String())
	}
	if err != nil {
		t.Fatalf("publishing: %v", err)
	}
	as, committed, err := settle(ctx, bed, "stream", streamName, 90*time.Second)
	if err != nil {
		t.Fatalf("stream: %v", err)
	}
	logs := map[uint32][]seen{}
	for s := range uint32(shards) {
		if logs[s], err = readShard(ctx, bed, int(s)%len(bed.Brokers), s, committed[s]); err != nil {
			t.Fatalf("reading the final log: %v", err)
		}
	}
	waitGroupCovers(ctx, grp, results, 60*time.Second)
	stopReaders()
	readers.Wait()
	st := account(c, results, logs)
	st.checkSubscribers(subs, logs)
	st.checkGroup(grp, results, logs)
	for _, s := range subs {
		if s.err != nil {
			st.fail("subscriber of shard %d ended: %v", s.shard, s.err)
		}
	}
	r.stream = st
	return as, committed
}

// waitGroupCovers waits (bounded) until the group was delivered every acked record.
func waitGroupCovers(ctx context.Context, g *group, results []pubResult, within time.Duration) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		missing := 0
		g.mu.Lock()
		for _, res := range results {
			if _, ok := g.delivered[[2]uint64{uint64(res.shard), res.lastOffset}]; res.outcome == outAcked && res.hasShard && !ok {
				missing++
			}
		}
		g.mu.Unlock()
		if missing == 0 {
			return
		}
		hold(ctx, 100*time.Millisecond) // the next look at the condition, bounded by within
	}
}

// cachePhase puts the corpus's hashes and counts directories with the faults applied on
// the cache's shard leaders, then settles and checks the cache against the model.
func cachePhase(ctx context.Context, t *testing.T, bed *clusterbed.Bed, c *corpus.Corpus, rng *rand.Rand, cfg config,
	r *report) (map[uint32]meta.Assignment, map[uint32]uint64) {
	t.Helper()
	pr := &progress{}
	faultErr := make(chan error, 1)
	go func() {
		faultErr <- runFaults(ctx, bed, rng, schedule(rng, cfg.kills, cfg.cpKills), "cache", cacheName, pr, int64(len(c.Files)), &r.faults)
	}()
	t0 := time.Now()
	model := cacheAll(ctx, bed, c, pr)
	r.cacheSecs = time.Since(t0).Seconds()
	if ferr := <-faultErr; ferr != nil {
		t.Fatalf("faults: %v\n%s", ferr, r.faults.String())
	}
	as, committed, err := settle(ctx, bed, "cache", cacheName, 90*time.Second)
	if err != nil {
		t.Fatalf("cache: %v", err)
	}
	if r.cache, err = checkCache(ctx, bed, c, model); err != nil {
		t.Fatalf("checking the cache: %v", err)
	}
	r.cacheFailedPuts = model.failedPuts
	return as, committed
}

// report is the run's table (docs/soak.md, "Cluster").
type report struct {
	files                  int
	stream                 *streamStats
	cache                  *cacheStats
	cacheFailedPuts        int
	faults                 faultLog
	replicaShards          int
	replicaProblems        []string
	rss                    map[string]int64
	publishSecs, cacheSecs float64
	elapsed                time.Duration
}

func (r *report) failures() []string {
	var out []string
	if r.stream != nil {
		out = append(out, r.stream.failures...)
	}
	if r.cache != nil {
		out = append(out, r.cache.failures...)
	}
	return append(out, r.replicaProblems...)
}

func (r *report) table() string {
	var b strings.Builder
	st, ca := r.stream, r.cache
	row := func(k, v string) { fmt.Fprintf(&b, "| %s | %s |\n", k, v) }
	b.WriteString("| check | result |\n| --- | --- |\n")
	row("faults", fmt.Sprintf("%d shard-leader SIGKILLs, %d control-plane leader SIGKILLs, %d broker pauses",
		r.faults.counts[faultLeaderKill], r.faults.counts[faultCPKill], r.faults.counts[faultPause]))
	row("files published (acked / indeterminate / refused / skipped)", fmt.Sprintf("%d / %d / %d / %d of %d in %.1f s",
		st.acked, st.indeterminate, st.refused, st.skipped, r.files, r.publishSecs))
	row("acked files lost / duplicated / misplaced / wrong hash", fmt.Sprintf("%d / %d / %d / %d", st.lost, st.duplicated, st.misplaced, st.badRecords))
	row("records stored / not from an acked or indeterminate publish", fmt.Sprintf("%d / %d (indeterminate stored: %d)", st.stored, st.unknown, st.indeterminateStored))
	row("subscriber deliveries / out of order or not the log's record / gaps", fmt.Sprintf("%d / %d / %d", st.subscriberDelivered, st.subscriberMismatch, st.subscriberGaps))
	row("group: offsets delivered / acked records never delivered", fmt.Sprintf("%d / %d", st.groupDelivered, st.groupMissing))
	row("cache: keys read / acked puts / wrong values / acked puts missing", fmt.Sprintf("%d / %d / %d / %d (puts never acked: %d) in %.1f s",
		ca.puts, ca.putsAcked, ca.getsWrong, ca.getsMissing, r.cacheFailedPuts, r.cacheSecs))
	row("counters read / outside the model", fmt.Sprintf("%d / %d", ca.counters, ca.countersWrong))
	row("replica logs compared (shards × followers) / problems", fmt.Sprintf("%d shards / %d", r.replicaShards, len(r.replicaProblems)))
	var names []string
	for n := range r.rss {
		names = append(names, n)
	}
	sort.Strings(names)
	var rss []string
	for _, n := range names {
		rss = append(rss, fmt.Sprintf("%s %.0f MiB", n, float64(r.rss[n])/(1<<20)))
	}
	row("peak RSS", strings.Join(rss, ", "))
	row("run time", r.elapsed.Round(time.Second).String())
	return b.String()
}

// plantDivergence shows the replica comparison has teeth on this run's own logs: a byte
// flipped in the middle of one follower's newest segment of shard 0 must be reported.
func plantDivergence(t *testing.T, bed *clusterbed.Bed, as map[uint32]meta.Assignment, committed map[uint32]uint64) {
	t.Helper()
	a := as[0]
	key := seglog.ShardKey{Kind: seglog.ShardStream, Tenant: tenant, Namespace: namespace, Name: streamName, Shard: 0}
	dir := seglog.ShardDir(filepath.Join(bed.Broker(a.Followers[0]).Dir, "data"), key)
	segs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(segs) == 0 {
		t.Fatalf("no segment in %s", dir)
	}
	sort.Strings(segs)
	seg := segs[len(segs)-1]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(data) // past the records: preallocated zeros
	for end > 0 && data[end-1] == 0 {
		end--
	}
	pos := end / 2 // inside some record's header or body
	data[pos] ^= 0xff
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, problems := compareReplicas(bed, seglog.ShardStream, streamName, map[uint32]meta.Assignment{0: a}, committed); len(problems) == 0 {
		t.Fatalf("a byte flipped at %d of %s went unreported by the replica comparison", pos, seg)
	}
}

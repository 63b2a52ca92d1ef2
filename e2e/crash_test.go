package e2e

import (
	"context"
	"errors"
	"felix/testbed/corpus"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"felix/client"
	"felix/seglog"
)

// config is the run's size, read from the environment (docs/soak.md):
//
//	FELIX_E2E_FILES    corpus sample size (default 4000; 0 = every file)
//	FELIX_E2E_KILLS    SIGKILLs per phase, at least (default 20)
//	FELIX_E2E_TIMEOUT  whole-test budget (default 9m; keep below go test -timeout)
//	FELIX_E2E_RSS_MIB  bound on any broker process's peak RSS (default 512)
//	FELIX_E2E_REPORT   file to write the result tables to (markdown; default none)
//	FELIX_E2E_SECTION  name of the marked section of that file the tables replace (default "results")
//	FELIX_E2E_MIN_FREE_GIB  free space the test needs in the temp dir (default 4)
type config struct {
	files    int
	kills    int
	timeout  time.Duration
	rssBound int64
	report   string
	section  string
	minFree  int64 // bytes
}

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{files: 4000, kills: 20, timeout: 9 * time.Minute, rssBound: 512 << 20, report: os.Getenv("FELIX_E2E_REPORT"), section: "results"}
	if v := os.Getenv("FELIX_E2E_SECTION"); v != "" {
		c.section = v
	}
	intEnv := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a number >= 0", name, v)
			}
			*dst = n
		}
	}
	gib := 4
	intEnv("FELIX_E2E_MIN_FREE_GIB", &gib)
	c.minFree = int64(gib) << 30
	intEnv("FELIX_E2E_FILES", &c.files)
	intEnv("FELIX_E2E_KILLS", &c.kills)
	mib := int(c.rssBound >> 20)
	intEnv("FELIX_E2E_RSS_MIB", &mib)
	c.rssBound = int64(mib) << 20
	if v := os.Getenv("FELIX_E2E_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FELIX_E2E_TIMEOUT=%q: want a duration", v)
		}
		c.timeout = d
	}
	return c
}

const (
	streamName = "corpus"
	cacheName  = "files"
	groupName  = "e2e"
	shards     = 4
	// maxPayload is this test's largest record: the broker's default frame limit
	// (FELIX_MAX_FRAME_BYTES, 16 MiB) less room for the frame's own fields.
	maxPayload = 16<<20 - 64<<10
)

// TestCrashCorpus is issue 11: the corpus through a 4-shard durable stream while the
// broker is SIGKILLed and restarted, on both I/O backends, then the cache phase.
func TestCrashCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e crash corpus: builds the binaries and runs for minutes; skipped with -short (run `make e2e`)")
	}
	cfg := loadConfig(t)
	checkFreeDisk(t, cfg.minFree)
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	began := time.Now()
	brokerBin, cliBin := buildBinaries(ctx, t, t.TempDir())
	c := loadCorpus(t, corpusRoots(t), cfg.files, maxPayload)
	t.Logf("corpus: %d files listed, %d used (%.1f MiB), %d above %d bytes skipped, %d unreadable",
		c.Scanned, len(c.Files), float64(c.Bytes)/(1<<20), c.Skipped, maxPayload, c.Unreadable)

	var report strings.Builder
	fmt.Fprintf(&report, "Run of %s: FELIX_E2E_FILES=%d FELIX_E2E_KILLS=%d; corpus %d files listed, %d used (%.1f MiB), "+
		"%d skipped above %d bytes, %d unreadable.\n\n", time.Now().UTC().Format(time.RFC3339), cfg.files, cfg.kills,
		c.Scanned, len(c.Files), float64(c.Bytes)/(1<<20), c.Skipped, maxPayload, c.Unreadable)
	// The three phases run at once, each on its own broker and data dir, each bounded by
	// the whole budget: their kills and restarts overlap (the machine has 2 cores), so the
	// throughput figures are under that shared load.
	phases := []struct {
		name string
		run  func(ctx context.Context, t *testing.T) string
	}{
		{"stream-uring", func(ctx context.Context, t *testing.T) string {
			return runStream(ctx, t, cfg, brokerBin, cliBin, c, "uring")
		}},
		{"stream-syscall", func(ctx context.Context, t *testing.T) string {
			return runStream(ctx, t, cfg, brokerBin, cliBin, c, "syscall")
		}},
		{"cache", func(ctx context.Context, t *testing.T) string {
			return runCache(ctx, t, cfg, brokerBin, cliBin, c)
		}},
	}
	tables := make([]string, len(phases))
	var wg sync.WaitGroup
	for i, ph := range phases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(ph.name, func(t *testing.T) {
				began := time.Now()
				tables[i] = ph.run(ctx, t)
				tables[i] += fmt.Sprintf("\nPhase time: %s.\n", time.Since(began).Round(time.Second))
				t.Log("\n" + tables[i])
			})
		}()
	}
	wg.Wait()
	for i, ph := range phases {
		if tables[i] == "" {
			tables[i] = "(phase failed before its table; see the test log)\n"
		}
		fmt.Fprintf(&report, "### %s\n\n%s\n", ph.name, tables[i])
	}
	fmt.Fprintf(&report, "Whole test: %s.\n", time.Since(began).Round(time.Second))
	if cfg.report != "" {
		if err := writeReport(cfg.report, cfg.section, report.String()); err != nil {
			t.Errorf("report: %v", err)
		}
	}
}

// checkFreeDisk refuses to start without minFree bytes free in the temp dir: the three
// phases keep their data dirs (the corpus twice over, plus preallocated segment space) on
// a disk other people share. It skips, or fails under CI=true.
func checkFreeDisk(t *testing.T, minFree int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err != nil {
		t.Fatalf("statfs %s: %v", os.TempDir(), err)
	}
	free := int64(st.Bavail) * st.Bsize
	if free >= minFree {
		return
	}
	msg := fmt.Sprintf("e2e crash corpus: %.1f GiB free in %s, needs %d GiB (FELIX_E2E_MIN_FREE_GIB)",
		float64(free)/(1<<30), os.TempDir(), minFree>>30)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// writeReport replaces the part of path between the markers of section name with body (or
// appends both markers and body when they are missing).
func writeReport(path, name, body string) error {
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		s = strings.TrimRight(s, "\n") + "\n\n" + begin + "\n" + end + "\n"
		i, j = strings.Index(s, begin), strings.Index(s, end)
	}
	s = s[:i+len(begin)] + "\n" + body + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

// outcome of one file's publish.
type outcome uint8

const (
	outNone          outcome = iota
	outAcked                 // acknowledged: must be stored exactly once
	outIndeterminate         // answer lost after the SDK's idempotent re-sends: at most once
	outRefused               // every attempt refused: never stored
	outSkipped               // changed or vanished before it was read: never published
)

type pubResult struct {
	outcome    outcome
	lastOffset uint64
	duplicate  bool
}

// pubTrack is what publishAll tells the killer: files answered, files in flight, and
// each file's epochs (workload).
type pubTrack struct {
	completed, inflight atomic.Int64
	epoch               *atomic.Int64
	stamps              []stamp
}

// sent and answered stamp file i and count it in flight or answered.
func (p *pubTrack) sent(i int) { p.stamps[i].sent = p.epoch.Load(); p.inflight.Add(1) }
func (p *pubTrack) answered(i int) {
	p.stamps[i].answered = p.epoch.Load()
	p.inflight.Add(-1)
	p.completed.Add(1)
}

// publishAll publishes every corpus file through idempotent Publishers (one per worker),
// per-batch acks, offsets requested. A refused batch (nothing applied) is published again
// as new records, up to 5 times; an indeterminate one is only ever re-sent by the SDK's
// idempotent producer with its original request id.
func publishAll(ctx context.Context, cl *client.Client, c *corpus.Corpus, workers int, tr *pubTrack) ([]pubResult, error) {
	results := make([]pubResult, len(c.Files))
	jobs := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < workers; w++ {
		pub, err := cl.NewPublisher(streamName, client.PublisherOptions{Idempotent: true, Offsets: true,
			Linger: 2 * time.Millisecond, MaxBytes: 1 << 20, MaxInflightBytes: 16 << 20})
		if err != nil {
			return nil, err
		}
		type wait struct {
			i int
			p client.Pending
		}
		waits := make(chan wait, 4096)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(waits)
			for i := range jobs {
				payload, err := corpus.ReadRecord(&c.Files[i])
				if err != nil {
					// Changed or removed since it was listed (a package installed meanwhile):
					// never published, so it must never be delivered.
					results[i].outcome = outSkipped
					tr.completed.Add(1)
					continue
				}
				tr.sent(i)
				p, err := pub.Publish(ctx, payload)
				if err != nil {
					tr.answered(i)
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("publish %s: %w", c.Files[i].Path, err)
					}
					mu.Unlock()
					return
				}
				waits <- wait{i, p}
			}
			pub.Flush(ctx)
		}()
		go func() {
			defer wg.Done()
			for wt := range waits {
				res, err := wt.p.Wait(ctx)
				r := &results[wt.i]
				switch {
				case err == nil:
					r.outcome, r.lastOffset, r.duplicate = outAcked, res.LastOffset, res.Duplicate
				case errors.Is(err, client.ErrRefused):
					r.outcome = outRefused
				default:
					r.outcome = outIndeterminate
				}
				tr.answered(wt.i)
			}
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			pub.Close(cctx)
			cancel()
		}()
	}
	for i := range c.Files {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	// Refused records were not applied: publish them again (new records, new ids).
	for round := 0; round < 5 && ctx.Err() == nil; round++ {
		var again []int
		for i, r := range results {
			if r.outcome == outRefused {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			break
		}
		pub, err := cl.NewPublisher(streamName, client.PublisherOptions{Idempotent: true, Offsets: true})
		if err != nil {
			return results, err
		}
		for _, i := range again {
			payload, err := corpus.ReadRecord(&c.Files[i])
			if err != nil {
				results[i].outcome = outSkipped
				continue
			}
			tr.sent(i)
			res, err := pub.PublishSync(ctx, payload)
			tr.answered(i)
			switch {
			case err == nil:
				results[i] = pubResult{outcome: outAcked, lastOffset: res.LastOffset, duplicate: res.Duplicate}
			case !errors.Is(err, client.ErrRefused):
				results[i].outcome = outIndeterminate
			}
		}
		pub.Close(ctx)
	}
	return results, firstErr
}

// endOffsets reads each shard's end offset from its log on disk (broker stopped).
func endOffsets(dirs []string) ([]uint64, error) {
	end := make([]uint64, len(dirs))
	for i, d := range dirs {
		res, err := seglog.Inspect(d, io.Discard, seglog.ToolOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", d, err)
		}
		for _, s := range res.Segments {
			end[i] = max(end[i], s.NextOffset)
		}
	}
	return end, nil
}

// shardDirs lists the primary log directory of every shard of a stream or cache.
func shardDirs(dataDir string, kind seglog.ShardKind, name string) []string {
	dirs := make([]string, shards)
	for s := range dirs {
		dirs[s] = seglog.ShardDir(dataDir, seglog.ShardKey{Kind: kind, Tenant: tenant, Namespace: namespace, Name: name, Shard: uint32(s)})
	}
	return dirs
}

// verifyLogs runs `felix log verify` on every dir and on each of its companion logs present
// on disk; it returns how many directories it checked and one message per failed one.
func verifyLogs(ctx context.Context, cli string, dirs []string, companions ...seglog.Companion) (checked int, failures []string) {
	var all []string
	for _, d := range dirs {
		all = append(all, d)
		for _, c := range companions {
			if cd := seglog.CompanionDir(d, c); dirExists(cd) {
				all = append(all, cd)
			}
		}
	}
	for _, d := range all {
		out, err := exec.CommandContext(ctx, cli, "log", "verify", d).CombinedOutput()
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v\n%s", d, err, out))
		}
	}
	return len(all), failures
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// waitFor polls cond every 20 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return nil
}

// dial connects an SDK client to b: pinned certificate, the admin token, a generous
// re-send budget for what is safe to re-send, short reconnect backoff.
func dial(ctx context.Context, b *broker, extra ...client.Option) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	opts := append([]client.Option{client.WithFingerprint(b.fp), client.WithToken(b.token),
		client.WithMaxAttempts(200), client.WithReconnectBackoff(20*time.Millisecond, 300*time.Millisecond)}, extra...)
	return client.Dial(dctx, b.quicAddr, opts...)
}

// runStream is one stream phase on one I/O backend; it returns the result table.
func runStream(ctx context.Context, t *testing.T, cfg config, brokerBin, cliBin string, c *corpus.Corpus, backend string) string {
	dir := t.TempDir()
	b := newBroker(t, brokerBin, dir, "FELIX_IO_BACKEND="+backend)
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}
	adm, err := client.NewAdmin(b.httpAddr, client.AdminToken(b.token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateStream(ctx, client.StreamInfo{Name: streamName, Shards: shards, Durable: true, Delivery: "AtLeastOnce"}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
	ix := newIndex(c.Files)

	cl, err := dial(ctx, b)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()

	// Subscribers (one per shard, from earliest, on one SDK client) and the group's two
	// consumers (one SDK client with one connection each).
	consumeCtx, stopConsumers := context.WithCancel(ctx)
	defer stopConsumers()
	var cwg sync.WaitGroup
	subCl, err := dial(ctx, b)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer subCl.Close()
	subs := make([]*shardSub, shards)
	for s := range subs {
		subs[s] = &shardSub{shard: uint32(s)}
		cwg.Add(1)
		go func() { defer cwg.Done(); subs[s].run(consumeCtx, subCl, ix, streamName) }()
	}
	grp := newGroupState(shards)
	for range 2 {
		gcl, err := dial(ctx, b, client.WithConnPool(1), client.WithStreamsPerConn(1))
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		defer gcl.Close()
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			grp.consume(consumeCtx, gcl, ix, streamName, groupName, shards)
		}()
	}

	// Publish while the killer runs.
	var pubDone sync.WaitGroup
	wl := &workload{total: int64(len(c.Files))}
	tr := &pubTrack{epoch: &wl.epoch, stamps: make([]stamp, len(c.Files))}
	var results []pubResult
	var pubErr error
	var publishing = true
	var pmu sync.Mutex
	pubStart := time.Now()
	var pubTime time.Duration
	pubDone.Add(1)
	go func() {
		defer pubDone.Done()
		results, pubErr = publishAll(ctx, cl, c, 2, tr)
		pmu.Lock()
		publishing, pubTime = false, time.Since(pubStart)
		pmu.Unlock()
	}()
	stopLog := progressLog(t, func() string {
		starts, kills, _ := b.stats()
		at := make([]uint64, len(subs))
		for s, sub := range subs {
			at[s] = sub.next.Load()
		}
		return fmt.Sprintf("%s: %d of %d files published, %d kills, %d starts, subscribers at %v, group delivered %d offsets",
			backend, tr.completed.Load(), len(c.Files), kills, starts, at, grp.delivered())
	})
	defer stopLog()
	wl.completed, wl.inflight = tr.completed.Load, tr.inflight.Load
	wl.busy = func() bool { pmu.Lock(); defer pmu.Unlock(); return publishing }
	seed := e2eSeed(t)
	t.Logf("%s: kill schedule seed FELIX_TEST_SEED=%d", backend, seed)
	kl, killErr := killer(ctx, b, cfg.kills, wl, seed)
	pubDone.Wait()
	if killErr != nil {
		t.Fatalf("killer: %v", killErr)
	}
	if pubErr != nil {
		t.Fatalf("publishers: %v", pubErr)
	}
	cl.Close()

	// Clean stop, verify the logs offline, learn each shard's end.
	if err := b.stop(ctx); err != nil {
		t.Errorf("SIGTERM drain after the crashes: %v", err)
	}
	dirs := shardDirs(b.dataDir, seglog.ShardStream, streamName)
	verified, verifyFailures := verifyLogs(ctx, cliBin, dirs, seglog.CompanionGroups, seglog.CompanionDeadLetters, "producers")
	end, err := endOffsets(dirs)
	if err != nil {
		t.Fatal(err)
	}
	// One more start: the consumers catch up to the end.
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}
	// Dead letters are redriven every 5 s while the group has not covered every offset.
	redriven, lastRedrive := 0, time.Now()
	catchUp := waitFor(ctx, func() bool {
		for s, sub := range subs {
			if sub.next.Load() < end[s] {
				return false
			}
		}
		if grp.covered(end) {
			return true
		}
		if time.Since(lastRedrive) > 5*time.Second {
			lastRedrive = time.Now()
			n, err := grp.redriveDeadLetters(ctx, subCl, streamName, groupName, shards)
			redriven += n
			if err != nil {
				t.Logf("%s: dead letters: %v", backend, err)
			}
		}
		return false
	})
	stopConsumers()
	cwg.Wait()
	for s, sub := range subs {
		if sub.restarts > 0 {
			t.Logf("shard %d: the SDK Subscription failed %d times, last with: %v", s, sub.restarts, sub.lastErr)
		}
	}
	if catchUp != nil {
		for s, sub := range subs {
			t.Logf("shard %d: subscriber at %d of %d (last error %v)", s, sub.next.Load(), end[s], sub.lastErr)
		}
		grp.mu.Lock()
		t.Logf("group: %d poll errors, last %v", grp.pollErrors, grp.lastPollErr)
		grp.mu.Unlock()
		t.Logf("group: first offsets never delivered, per shard: %v", grp.missing(end, 10))
	}
	if err := b.stop(ctx); err != nil {
		t.Errorf("final SIGTERM drain: %v", err)
	}

	// Account.
	st := accountStream(c, results, subs, grp, end)
	starts, kills, peak := b.stats()
	st.kills, st.starts, st.peak, st.pubTime, st.meanDown = kills, starts, peak, pubTime, b.meanDown()
	st.verified, st.verifyFailures = verified, verifyFailures
	st.disk = diskUsage(b.dataDir)
	st.redriven = redriven
	st.killLog = kl
	st.ackedInflight = kl.ackedInflight(tr.stamps, func(i int) bool { return results[i].outcome == outAcked })
	t.Logf("%s: records in flight at each counted kill %v; of them acknowledged %v", backend, kl.inflight, st.ackedInflight)
	table := st.table(backend, cfg)
	if catchUp != nil {
		t.Errorf("consumers did not reach the end offsets %v: %v", end, catchUp)
	}
	for _, f := range st.failures(cfg) {
		t.Error(f)
	}
	return table
}

// streamStats is the account of one stream phase.
type streamStats struct {
	acked, indeterminate, refused, dupAcks int
	changed                                int
	ackedBytes                             int64
	stored, lost, duplicated, extra        int // extra: stored although never acked (indeterminate)
	badAckOffsets                          int
	foreign                                int
	gaps, redelivered, reportedGap         int
	noOffset                               int
	dupCrossShard                          int // duplicated files whose copies sit in different shards
	perShard                               []string
	groupMissing, groupRedelivered         int
	groupDeliveries, groupForeign          int
	groupRefusedAcks, groupMaxDelivery     int
	redriven                               int // dead letters redriven during the catch-up
	kills, starts                          int
	peak, disk                             int64
	pubTime, meanDown                      time.Duration
	verified                               int
	verifyFailures                         []string
	totalRecords                           uint64
	killLog                                *killLog
	ackedInflight                          []int // per counted kill: acknowledged files in flight at it
}

func accountStream(c *corpus.Corpus, results []pubResult, subs []*shardSub, grp *groupState, end []uint64) *streamStats {
	st := &streamStats{}
	count := make([]int, len(c.Files))
	shardOf := make([]int8, len(c.Files))        // shard of the first copy; -1 = copies in several shards
	where := make([]map[uint64]int32, len(subs)) // per shard: offset → corpus index
	for s, sub := range subs {
		where[s] = map[uint64]int32{}
		st.gaps += sub.gaps
		st.redelivered += sub.dups
		st.reportedGap += int(sub.reportedGap)
		st.noOffset += sub.noOffset
		st.totalRecords += end[s]
		inOrder := "yes"
		if sub.gaps > 0 || sub.dups > 0 || uint64(len(sub.recs)) != end[s] {
			inOrder = "NO"
		}
		st.perShard = append(st.perShard, fmt.Sprintf("| %d | %d | %d | %d | %d | %s | %d |", s, end[s], len(sub.recs), sub.gaps, sub.dups, inOrder, sub.restarts))
		for off, i := range sub.recs {
			switch {
			case i >= 0:
				if count[i] == 0 {
					shardOf[i] = int8(s)
				} else if shardOf[i] != int8(s) {
					shardOf[i] = -1
				}
				count[i]++
				where[s][uint64(off)] = i
			case i == -1:
				st.foreign++
			}
		}
	}
	for i, r := range results {
		switch r.outcome {
		case outAcked:
			st.acked++
			st.ackedBytes += c.Files[i].Size
			if r.duplicate {
				st.dupAcks++
			}
			switch count[i] {
			case 0:
				st.lost++
			case 1:
				st.stored++
			default:
				st.duplicated++
				if shardOf[i] < 0 {
					st.dupCrossShard++
				}
			}
			found := false
			for s := range where {
				if j, ok := where[s][r.lastOffset]; ok && j == int32(i) {
					found = true
				}
			}
			if !found {
				st.badAckOffsets++
			}
		case outIndeterminate:
			st.indeterminate++
			if count[i] > 1 {
				st.duplicated++
			} else if count[i] == 1 {
				st.extra++
			}
		case outSkipped:
			st.changed++
			if count[i] > 0 {
				st.duplicated++ // stored although never sent
			}
		default:
			st.refused++
			if count[i] > 0 {
				st.duplicated++ // stored although refused
			}
		}
	}
	grp.mu.Lock()
	defer grp.mu.Unlock()
	for s := range end {
		for off := uint64(0); off < end[s]; off++ {
			n := grp.deliveries[s][off]
			if n == 0 {
				st.groupMissing++
			} else {
				st.groupRedelivered += int(n) - 1
			}
			st.groupDeliveries += int(n)
		}
	}
	st.groupForeign, st.groupRefusedAcks, st.groupMaxDelivery = grp.foreign, grp.refused, int(grp.maxCount)
	return st
}

func (st *streamStats) failures(cfg config) []string {
	var f []string
	add := func(cond bool, format string, args ...any) {
		if cond {
			f = append(f, fmt.Sprintf(format, args...))
		}
	}
	add(st.lost > 0, "%d acknowledged files lost", st.lost)
	add(st.duplicated > 0, "%d files stored more than once (or stored although refused)", st.duplicated)
	add(st.badAckOffsets > 0, "%d acks name an offset that does not hold their file", st.badAckOffsets)
	add(st.foreign > 0 || st.groupForeign > 0, "%d subscriber / %d group deliveries no publisher sent", st.foreign, st.groupForeign)
	add(st.gaps > 0, "subscribers saw %d offsets missing (gaps)", st.gaps)
	add(st.noOffset > 0, "subscribers got %d records without an offset", st.noOffset)
	add(st.redelivered > 0, "subscribers saw %d offsets twice", st.redelivered)
	add(st.groupMissing > 0, "the group never delivered %d records", st.groupMissing)
	add(len(st.verifyFailures) > 0, "felix log verify failed:\n%s", strings.Join(st.verifyFailures, "\n"))
	add(st.peak > cfg.rssBound, "broker peak RSS %.0f MiB above the bound %d MiB", float64(st.peak)/(1<<20), cfg.rssBound>>20)
	if msg := st.killLog.failure(cfg.kills); msg != "" {
		f = append(f, msg)
	}
	return f
}

func (st *streamStats) table(backend string, cfg config) string {
	var b strings.Builder
	secs := st.pubTime.Seconds()
	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	fmt.Fprintf(&b, "FELIX_IO_BACKEND=%s, 4 durable shards, fsync on_commit, %d SIGKILLs (%d broker starts, mean SIGKILL → ready %s)\n\n", backend, st.kills, st.starts, st.meanDown)
	fmt.Fprintf(&b, "| check | result | verdict |\n| --- | --- | --- |\n")
	fmt.Fprintf(&b, "| acknowledged files | %d (%.1f MiB); %d answered as idempotent duplicates | |\n", st.acked, float64(st.ackedBytes)/(1<<20), st.dupAcks)
	fmt.Fprintf(&b, "| acknowledged files stored exactly once, SHA-256 and key equal | %d | %s |\n", st.stored, verdict(st.stored == st.acked))
	fmt.Fprintf(&b, "| acknowledged files lost | %d | %s |\n", st.lost, verdict(st.lost == 0))
	fmt.Fprintf(&b, "| files stored twice (or stored although refused) | %d | %s |\n", st.duplicated, verdict(st.duplicated == 0))
	fmt.Fprintf(&b, "| ack offsets holding their file | %d of %d | %s |\n", st.acked-st.badAckOffsets, st.acked, verdict(st.badAckOffsets == 0))
	fmt.Fprintf(&b, "| indeterminate (answer lost after the SDK's idempotent re-sends) / of them stored | %d / %d | |\n", st.indeterminate, st.extra)
	fmt.Fprintf(&b, "| refused (never applied) / changed on disk during the run (not published) | %d / %d | |\n", st.refused, st.changed)
	fmt.Fprintf(&b, "| records nobody published (subscribers / group) | %d / %d | %s |\n", st.foreign, st.groupForeign, verdict(st.foreign+st.groupForeign == 0))
	fmt.Fprintf(&b, "| subscriber gaps / duplicates / gaps the SDK reported / records without offset | %d / %d / %d / %d | %s |\n",
		st.gaps, st.redelivered, st.reportedGap, st.noOffset, verdict(st.gaps+st.redelivered+st.noOffset == 0))
	fmt.Fprintf(&b, "| group: records never delivered | %d of %d | %s |\n", st.groupMissing, st.totalRecords, verdict(st.groupMissing == 0))
	fmt.Fprintf(&b, "| group: redeliveries (deliveries %d, max delivery count %d, acks refused %d) | %d | |\n", st.groupDeliveries, st.groupMaxDelivery, st.groupRefusedAcks, st.groupRedelivered)
	fmt.Fprintf(&b, "| group: dead letters redriven to finish (max_deliveries reached by lost poll answers) | %d | |\n", st.redriven)
	fmt.Fprintf(&b, "| `felix log verify` (shards + companion logs) | %d dirs, %d failed | %s |\n", st.verified, len(st.verifyFailures), verdict(len(st.verifyFailures) == 0))
	fmt.Fprintf(&b, "| broker peak RSS (max VmHWM over all processes) | %.0f MiB (bound %d MiB) | %s |\n", float64(st.peak)/(1<<20), cfg.rssBound>>20, verdict(st.peak <= cfg.rssBound))
	fmt.Fprintf(&b, "| data dir on disk (allocated blocks; %d MiB segments) | %.0f MiB | |\n", segmentBytes>>20, float64(st.disk)/(1<<20))
	fmt.Fprintf(&b, "| publish throughput with the kills | %.0f records/s, %.2f MB/s over %.1f s | |\n", float64(st.acked)/secs, float64(st.ackedBytes)/1e6/secs, secs)
	fmt.Fprintf(&b, "| duplicated files whose copies are in different shards | %d of %d | |\n", st.dupCrossShard, st.duplicated)
	b.WriteString(st.killLog.rows("publishes", cfg.kills, st.ackedInflight))
	fmt.Fprintf(&b, "\n| shard | end offset | subscriber saw | gaps | duplicates | in order | new Subscriptions |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, l := range st.perShard {
		b.WriteString(l + "\n")
	}
	return b.String()
}

package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"felix/testbed/corpus"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/seglog"
)

// cacheTTL is long enough that nothing expires during the run.
const cacheTTL = time.Hour

// cacheWorkers is how many files are written at once: enough that each kill finds many
// Puts and CounterAdds in flight.
const cacheWorkers = 16

// classify maps an SDK error to what the model may assume: a definite refusal was not
// applied; anything else (ErrIndeterminate, a context ending while waiting, a transport
// error) may or may not have been.
func classify(err error) outcome {
	switch {
	case err == nil:
		return outAcked
	case errors.Is(err, client.ErrRefused):
		return outRefused
	default:
		return outIndeterminate
	}
}

// counterModel is what the model knows of one directory's counter.
type counterModel struct{ acked, indeterminate int64 }

// runCache is the cache phase: each file's SHA-256 (hex) Put under its path with a TTL and
// a per-directory counter incremented, while the broker is SIGKILLed; then every key and
// counter is checked against the model. Put and CounterAdd are never re-sent (a lost
// answer is indeterminate: the model accepts either outcome for exactly those keys).
func runCache(ctx context.Context, t *testing.T, cfg config, brokerBin, cliBin string, c *corpus.Corpus) string {
	dir := t.TempDir()
	b := newBroker(t, brokerBin, dir)
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}
	adm, err := client.NewAdmin(b.httpAddr, client.AdminToken(b.token))
	if err != nil {
		t.Fatal(err)
	}
	durable := true
	if _, err := adm.CreateCache(ctx, client.CacheInfo{Name: cacheName, Shards: shards, Durable: &durable}); err != nil {
		t.Fatalf("create cache: %v", err)
	}
	cl, err := dial(ctx, b)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer cl.Close()

	puts := make([]outcome, len(c.Files))
	counters := map[string]*counterModel{}
	for _, f := range c.Files {
		if counters[filepath.Dir(f.Path)] == nil {
			counters[filepath.Dir(f.Path)] = &counterModel{}
		}
	}
	var mu sync.Mutex
	jobs := make(chan int)
	var wg sync.WaitGroup
	began := time.Now()
	var writeTime time.Duration
	writing := true
	wl := &workload{total: int64(len(c.Files))}
	tr := &pubTrack{epoch: &wl.epoch, stamps: make([]stamp, len(c.Files))}
	for range cacheWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				f := &c.Files[i]
				octx, cancel := context.WithTimeout(ctx, 20*time.Second)
				tr.sent(i)
				perr := cl.Put(octx, cacheName, f.Path, []byte(hex.EncodeToString(f.Sum[:])), cacheTTL)
				_, cerr := cl.CounterAdd(octx, cacheName, filepath.Dir(f.Path), 1)
				cancel()
				tr.answered(i)
				mu.Lock()
				puts[i] = classify(perr)
				m := counters[filepath.Dir(f.Path)]
				switch classify(cerr) {
				case outAcked:
					m.acked++
				case outIndeterminate:
					m.indeterminate++
				}
				mu.Unlock()
			}
		}()
	}
	go func() {
		for i := range c.Files {
			select {
			case jobs <- i:
			case <-ctx.Done():
			}
		}
		close(jobs)
		wg.Wait()
		mu.Lock()
		writing, writeTime = false, time.Since(began)
		mu.Unlock()
	}()
	stopLog := progressLog(t, func() string {
		starts, kills, _ := b.stats()
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("cache: %d of %d files written, %d kills, %d starts", tr.completed.Load(), len(c.Files), kills, starts)
	})
	defer stopLog()
	wl.completed, wl.inflight = tr.completed.Load, tr.inflight.Load
	wl.busy = func() bool { mu.Lock(); defer mu.Unlock(); return writing }
	seed := e2eSeed(t)
	t.Logf("cache: kill schedule seed FELIX_TEST_SEED=%d", seed)
	kl, err := killer(ctx, b, cfg.kills, wl, seed)
	if err != nil {
		t.Fatalf("killer: %v", err)
	}
	if err := waitFor(ctx, func() bool { mu.Lock(); defer mu.Unlock(); return !writing }); err != nil {
		t.Fatalf("writers: %v", err)
	}
	if err := b.stop(ctx); err != nil {
		t.Errorf("SIGTERM drain after the crashes: %v", err)
	}
	verified, verifyFailures := verifyLogs(ctx, cliBin, shardDirs(b.dataDir, seglog.ShardCache, cacheName), seglog.CompanionCounters)
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}

	// Check every key and counter (Get and CounterGet are safe to re-send).
	var acked, ackedOK, lost, wrong, indet, indetFound, refused, refusedFound int
	for i, f := range c.Files {
		var v []byte
		var found bool
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			v, found, err = cl.Get(gctx, cacheName, f.Path)
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("get %s: %v", f.Path, err)
		}
		want := []byte(hex.EncodeToString(f.Sum[:]))
		if found && !bytes.Equal(v, want) {
			wrong++
			continue
		}
		switch puts[i] {
		case outAcked:
			acked++
			if found {
				ackedOK++
			} else {
				lost++
			}
		case outIndeterminate:
			indet++
			if found {
				indetFound++
			}
		default:
			refused++
			if found {
				refusedFound++
			}
		}
	}
	dirs := make([]string, 0, len(counters))
	for d := range counters {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var inRange, outOfRange, exact int
	var badCounters []string
	var sumAcked, sumIndet int64
	for _, d := range dirs {
		m := counters[d]
		sumAcked += m.acked
		sumIndet += m.indeterminate
		var got int64
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			got, _, err = cl.CounterGet(gctx, cacheName, d) // absent reads 0: no add was acknowledged
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("counter get %s: %v", d, err)
		}
		if got < m.acked || got > m.acked+m.indeterminate {
			outOfRange++
			if len(badCounters) < 10 {
				badCounters = append(badCounters, fmt.Sprintf("%s = %d, model [%d, %d]", d, got, m.acked, m.acked+m.indeterminate))
			}
			continue
		}
		inRange++
		if m.indeterminate == 0 {
			exact++
		}
	}
	cl.Close()
	if err := b.stop(ctx); err != nil {
		t.Errorf("final SIGTERM drain: %v", err)
	}
	starts, kills, peak := b.stats()

	verdict := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "FAIL"
	}
	var tb strings.Builder
	fmt.Fprintf(&tb, "Durable cache, 4 shards, TTL %s, %d SIGKILLs (%d broker starts, mean SIGKILL → ready %s); Put and CounterAdd never re-sent\n\n", cacheTTL, kills, starts, b.meanDown())
	fmt.Fprintf(&tb, "| check | result | verdict |\n| --- | --- | --- |\n")
	fmt.Fprintf(&tb, "| acknowledged puts present with their SHA-256 | %d of %d | %s |\n", ackedOK, acked, verdict(ackedOK == acked))
	fmt.Fprintf(&tb, "| acknowledged puts lost | %d | %s |\n", lost, verdict(lost == 0))
	fmt.Fprintf(&tb, "| keys holding a value nobody put | %d | %s |\n", wrong, verdict(wrong == 0))
	fmt.Fprintf(&tb, "| indeterminate puts (either outcome accepted) / found | %d / %d | |\n", indet, indetFound)
	fmt.Fprintf(&tb, "| refused puts / found anyway | %d / %d | %s |\n", refused, refusedFound, verdict(refusedFound == 0))
	fmt.Fprintf(&tb, "| counters within [acked, acked + indeterminate] | %d of %d (%d exact: no indeterminate add) | %s |\n", inRange, len(dirs), exact, verdict(outOfRange == 0))
	fmt.Fprintf(&tb, "| counter adds acknowledged / indeterminate | %d / %d | |\n", sumAcked, sumIndet)
	fmt.Fprintf(&tb, "| `felix log verify` (cache shards + counter logs) | %d dirs, %d failed | %s |\n", verified, len(verifyFailures), verdict(len(verifyFailures) == 0))
	fmt.Fprintf(&tb, "| broker peak RSS (max VmHWM over all processes) | %.0f MiB (bound %d MiB) | %s |\n", float64(peak)/(1<<20), cfg.rssBound>>20, verdict(peak <= cfg.rssBound))
	fmt.Fprintf(&tb, "| data dir on disk (allocated blocks; %d MiB segments) | %.0f MiB | |\n", segmentBytes>>20, float64(diskUsage(b.dataDir))/(1<<20))
	ackedAt := kl.ackedInflight(tr.stamps, func(i int) bool { return puts[i] == outAcked })
	t.Logf("cache: operations in flight at each counted kill %v; of them acknowledged puts %v", kl.inflight, ackedAt)
	tb.WriteString(kl.rows("cache writes", cfg.kills, ackedAt))
	secs := writeTime.Seconds()
	fmt.Fprintf(&tb, "| write throughput with the kills (put + counter add per file) | %.0f files/s over %.1f s | |\n", float64(len(c.Files))/secs, secs)

	if lost > 0 || wrong > 0 || refusedFound > 0 {
		t.Errorf("cache model violated: %d lost, %d wrong values, %d refused puts found", lost, wrong, refusedFound)
	}
	if outOfRange > 0 {
		t.Errorf("%d counters outside the model: %s", outOfRange, strings.Join(badCounters, "; "))
	}
	if len(verifyFailures) > 0 {
		t.Errorf("felix log verify failed:\n%s", strings.Join(verifyFailures, "\n"))
	}
	if peak > cfg.rssBound {
		t.Errorf("broker peak RSS %.0f MiB above the bound %d MiB", float64(peak)/(1<<20), cfg.rssBound>>20)
	}
	if msg := kl.failure(cfg.kills); msg != "" {
		t.Error(msg)
	}
	return tb.String()
}

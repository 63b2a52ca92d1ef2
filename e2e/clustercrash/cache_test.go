package clustercrash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"felix/client"
	"felix/testbed/clusterbed"
	"felix/testbed/corpus"
)

// cacheModel is what the cache phase's clients learned: per file whether a put of its hash
// was acknowledged; per directory the counter adds acknowledged and those whose answer was
// lost (each may or may not have been applied).
type cacheModel struct {
	mu         sync.Mutex
	putAcked   []bool
	added      map[string]int64 // directory → acked adds
	addUnknown map[string]int64 // directory → indeterminate adds
	addErrs    map[string][]string
	failedPuts int
}

// counterKey is a file's directory counter's key (within the cache key limit).
func counterKey(path string) string {
	d := filepath.Dir(path)
	sum := sha256.Sum256([]byte(d))
	return "dir:" + hex.EncodeToString(sum[:8])
}

// sumValue is the value put for a file: its SHA-256 in hex.
func sumValue(f *corpus.File) []byte { return []byte(hex.EncodeToString(f.Sum[:])) }

// cacheAll puts every file's hash under its path and adds 1 to its directory's counter,
// file i through broker i%3. A put that fails is put again (the same value: retrying is
// safe) up to 5 times; an add is retried only when refused (not applied).
func cacheAll(ctx context.Context, bed *clusterbed.Bed, c *corpus.Corpus, pr *progress) *cacheModel {
	m := &cacheModel{putAcked: make([]bool, len(c.Files)), added: map[string]int64{}, addUnknown: map[string]int64{}, addErrs: map[string][]string{}}
	var wg sync.WaitGroup
	for w := range bed.Brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := dialFailover(ctx, bed, w)
			if err != nil {
				return
			}
			defer cl.Close()
			for i := w; i < len(c.Files) && ctx.Err() == nil; i += len(bed.Brokers) {
				m.cacheOne(ctx, cl, &c.Files[i], i)
				pr.done.Add(1)
			}
		}()
	}
	wg.Wait()
	return m
}

func (m *cacheModel) cacheOne(ctx context.Context, cl *client.Client, f *corpus.File, i int) {
	acked := false
	for try := 0; try < 5 && !acked && ctx.Err() == nil; try++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		acked = cl.Put(pctx, cacheName, f.Path, sumValue(f), 0) == nil
		cancel()
	}
	key := counterKey(f.Path)
	var addErr error
	var errs []string
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, addErr = cl.CounterAdd(pctx, cacheName, key, 1)
		cancel()
		if addErr != nil {
			errs = append(errs, time.Now().UTC().Format("15:04:05.000")+" "+f.Path+": "+addErr.Error())
		}
		if addErr == nil || !errors.Is(addErr, client.ErrRefused) {
			break
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addErrs[key] = append(m.addErrs[key], errs...)
	m.putAcked[i] = acked
	if !acked {
		m.failedPuts++
	}
	switch {
	case addErr == nil:
		m.added[key]++
	case !errors.Is(addErr, client.ErrRefused):
		m.addUnknown[key]++
	}
}

// cacheStats is the cache phase's check against the model.
type cacheStats struct {
	puts, putsAcked, getsWrong, getsMissing int
	counters, countersWrong                 int
	failures                                []string
}

// checkCache reads every file's key and every directory's counter through broker 0 (a
// non-owner forwards) and compares them with the model: an acked put's key holds the hash;
// a never-acked one holds the hash or nothing; a counter lies between its acked adds and its
// acked plus indeterminate adds.
func checkCache(ctx context.Context, bed *clusterbed.Bed, c *corpus.Corpus, m *cacheModel) (*cacheStats, error) {
	cl, err := bed.Dial(ctx, bed.Brokers[0], tenant, namespace)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	st := &cacheStats{}
	for i := range c.Files {
		f := &c.Files[i]
		st.puts++
		v, found, err := cl.Get(ctx, cacheName, f.Path)
		if err != nil {
			return st, fmt.Errorf("get %s: %w", f.Path, err)
		}
		if m.putAcked[i] {
			st.putsAcked++
		}
		switch {
		case found && string(v) != string(sumValue(f)):
			st.getsWrong++
			st.failures = append(st.failures, fmt.Sprintf("%s holds %q, not its hash", f.Path, v))
		case !found && m.putAcked[i]:
			st.getsMissing++
			st.failures = append(st.failures, fmt.Sprintf("acked put of %s is missing", f.Path))
		}
	}
	keys := map[string]bool{}
	for k := range m.added {
		keys[k] = true
	}
	for k := range m.addUnknown {
		keys[k] = true
	}
	for k := range keys {
		st.counters++
		v, _, err := cl.CounterGet(ctx, cacheName, k)
		if err != nil {
			return st, fmt.Errorf("counter %s: %w", k, err)
		}
		if lo, hi := m.added[k], m.added[k]+m.addUnknown[k]; v < lo || v > hi {
			st.countersWrong++
			st.failures = append(st.failures, fmt.Sprintf("counter %s = %d, the model says %d..%d (failed adds: %q)", k, v, lo, hi, m.addErrs[k]))
		}
	}
	return st, nil
}

package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"felix/seglog"
	"felix/testbed/history"
	"felix/testbed/supervisor"
)

// verifyWait bounds one `felix log verify` run.
const verifyWait = time.Minute

// final is the final phase: a clean SIGTERM, the end offsets and `felix log verify` of
// every log on disk, a restart, final reads of every shard from the earliest offset to
// its end, final Gets of every key and counter, and a last clean SIGTERM.
func (r *snkRun) final(ctx context.Context) error {
	r.closeClients()
	if err := r.drain(ctx, "SIGTERM drain after the kills (exit 0)"); err != nil {
		return err
	}
	end, err := r.endOffsets()
	if err != nil {
		return err
	}
	r.verifyLogs(ctx)
	if err := r.b.Restart(ctx); err != nil {
		return fmt.Errorf("restart for the final reads: %w", err)
	}
	fctx, cancel := context.WithTimeout(ctx, snkFinalWait)
	defer cancel()
	subCl, err := r.b.Dial(fctx, 200)
	if err != nil {
		return fmt.Errorf("dial for the final reads: %w", err)
	}
	cacheCl, err := r.b.Dial(fctx, 1)
	if err != nil {
		subCl.Close()
		return fmt.Errorf("dial for the final gets: %w", err)
	}
	r.mu.Lock()
	r.subCl, r.cacheCl = subCl, cacheCl
	r.mu.Unlock()
	r.finalReads(fctx, end)
	r.finalGets(fctx)
	r.closeClients()
	return r.drain(ctx, "final SIGTERM drain (exit 0)")
}

// drain SIGTERMs the broker and checks a clean exit. Errors: only ctx's (a drain that
// timed out is a failed row, the broker SIGKILLed).
func (r *snkRun) drain(ctx context.Context, check string) error {
	st, err := r.b.Terminate(ctx, snkDrain)
	detail := st.String()
	if err != nil {
		detail += ": " + err.Error()
	}
	r.res.Check(check, err == nil && st.Success(), "%s", detail)
	if err != nil && !errors.Is(err, supervisor.ErrDrainTimeout) {
		return err
	}
	return nil
}

// streamShardDir is the log directory of one shard of the scenario's stream.
func (r *snkRun) streamShardDir(shard int) string {
	return seglog.ShardDir(r.b.DataDir, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: "default",
		Namespace: "default", Name: snkStream, Shard: uint32(shard)})
}

// endOffsets reads, from the stopped broker's logs, one past the last record of each
// stream shard (seglog.Inspect). Errors: an unreadable log.
func (r *snkRun) endOffsets() ([]uint64, error) {
	end := make([]uint64, snkShards)
	for s := range end {
		res, err := seglog.Inspect(r.streamShardDir(s), io.Discard, seglog.ToolOptions{})
		if err != nil {
			return nil, fmt.Errorf("inspect shard %d: %w", s, err)
		}
		for _, seg := range res.Segments {
			end[s] = max(end[s], seg.NextOffset)
		}
	}
	return end, nil
}

// segmentName is a segment file's name: a 20-digit id and ".log".
var segmentName = regexp.MustCompile(`^[0-9]{20}\.log$`)

// logDirs lists every directory under root holding a segment file: shard logs and their
// companions (producers, counters), sorted.
func logDirs(root string) ([]string, error) {
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && segmentName.MatchString(d.Name()) {
			seen[filepath.Dir(p)] = true
		}
		return nil
	})
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	return dirs, err
}

// verifyLogs runs `felix log verify` on every log directory of the stopped broker.
func (r *snkRun) verifyLogs(ctx context.Context) {
	dirs, err := logDirs(r.b.DataDir)
	var failures []string
	if err != nil {
		failures = append(failures, err.Error())
	}
	for _, d := range dirs {
		vctx, cancel := context.WithTimeout(ctx, verifyWait)
		out, err := exec.CommandContext(vctx, r.env.Bins.CLI, "log", "verify", d).CombinedOutput()
		cancel()
		if err != nil {
			rel, _ := filepath.Rel(r.b.DataDir, d)
			failures = append(failures, fmt.Sprintf("%s: %v: %s", rel, err, strings.TrimSpace(string(out))))
		}
	}
	detail := fmt.Sprintf("%d dirs, %d failed", len(dirs), len(failures))
	if len(failures) > 0 {
		detail += ": " + strings.Join(failures, "; ")
	}
	r.res.Check("`felix log verify` of every log (stream and cache shards, producer and counter logs)",
		err == nil && len(dirs) > 0 && len(failures) == 0, "%s", detail)
}

// finalReads reads every shard from the earliest offset to its end, marked final.
func (r *snkRun) finalReads(ctx context.Context, end []uint64) {
	got := make([]uint64, snkShards)
	errs := make([]error, snkShards)
	var wg sync.WaitGroup
	for s := range snkShards {
		if end[s] == 0 {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[s], errs[s] = r.subscriber(ctx, s, true, end[s]) }()
	}
	wg.Wait()
	ok := true
	for s := range end {
		ok = ok && got[s] >= end[s]
	}
	detail := fmt.Sprintf("ends %v (from the logs on disk), read to %v", end, got)
	if err := errors.Join(errs...); err != nil {
		detail += "; " + err.Error()
	}
	r.res.Check("final reads (from the earliest offset, marked final) reached every shard's end", ok, "%s", detail)
}

// finalGets reads every key and counter of every window once, retrying (each try
// recorded) until one answers ok, at most snkGetTries times.
func (r *snkRun) finalGets(ctx context.Context) {
	windows := (r.total + snkKeyWindow - 1) / snkKeyWindow
	answered, want := 0, int(windows)*(snkKeys+snkCounters)
	for w := range windows {
		for i := range snkKeys + snkCounters {
			proc := r.newProcess()
			for range snkGetTries {
				var ok bool
				if i < snkKeys {
					ok = r.cacheGet(ctx, &proc, keyName(w, i))
				} else {
					ok = r.counterGet(ctx, &proc, counterName(w, i-snkKeys))
				}
				if ok {
					answered++
					break
				}
			}
		}
	}
	r.res.Check(fmt.Sprintf("final Gets of every cache key and counter answered (%d windows of %d keys and %d counters)", windows, snkKeys, snkCounters),
		answered == want, "%d of %d", answered, want)
}

// checkerScope says what each checker looks at in this scenario.
var checkerScope = map[string]string{
	"streams":         "lost-write, duplicate, inconsistent-offset, non-monotonic-read, skipped-read, dirty-read, unseen",
	"replicas":        "replicas-diverged; one node: no replica logs",
	"groups":          "consumer groups; none in this scenario",
	"linearizability": "every cache key and counter, each on its own, with porcupine",
}

// check closes the history, runs every checker on it and adds their rows.
func (r *snkRun) check() error {
	rep, h, err := r.env.CheckHistory(snkLinTimeout)
	r.res.Report = rep
	if h == nil {
		return err
	}
	objects := map[string]bool{}
	for _, op := range h.Ops {
		switch op.Kind {
		case history.KindCachePut, history.KindCacheGet, history.KindCacheDelete:
			objects["key "+string(op.In.Key)] = true
		case history.KindCounterAdd, history.KindCounterGet:
			objects["counter "+string(op.In.Key)] = true
		}
	}
	r.res.Note("history", "%d operations in %s", len(h.Ops), r.env.HistoryPath)
	for _, c := range rep.Checks {
		r.res.Check(fmt.Sprintf("checker %s (%s)", c.Name, checkerScope[c.Name]), len(c.Findings) == 0, "%d findings", len(c.Findings))
	}
	r.res.Check("linearizability searches finished (none timed out)", len(rep.Unknown) == 0,
		"%d objects; timed out: %v", len(objects), rep.Unknown)
	if err != nil {
		r.res.Check("linearizability visualization written", false, "%v", err)
	}
	return nil
}

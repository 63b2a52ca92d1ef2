package controlplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"felix/testbed/checker"
	"felix/testbed/history"
)

// Bounds of the kill loop's waits.
const (
	leaderWait  = 30 * time.Second // a leader after start or a kill
	resumeWait  = 30 * time.Second // the first catalog write after a kill
	catchUpWait = 30 * time.Second // a restarted member reaching the leader's commit index
	writesWait  = 30 * time.Second // the workload's writes with all three members up
	resumeOps   = 60               // ok workload writes awaited between a restart and the next kill
)

// snapshotEnv makes the members snapshot every 128 entries, checked every 1-2 s (the
// defaults, 8192 entries and 120-240 s, are never reached by a member restarted every few
// seconds: its log would grow without bound and every restart replay it from index 1), so
// the loop also kills members around snapshots and restarts them from one.
var snapshotEnv = []string{"FELIX_CONTROLPLANE_SNAPSHOT_THRESHOLD=128", "FELIX_CONTROLPLANE_SNAPSHOT_INTERVAL_MS=1000"}

// workloadNames are the streams the clients contend on: one porcupine object each.
var workloadNames = []string{"s0", "s1", "s2", "s3", "s4", "s5"}

// TestLeaderKillLoop is issue 17's acceptance bullet 2: three members as processes, the
// leader SIGKILLed and restarted FELIX_CP_KILLS times (10) while FELIX_CP_CLIENTS
// clients (4) create, delete, get and list streams through any member. Catalog writes
// must resume after every kill (through a survivor, within resumeWait), the three
// members' snapshots must agree once the clients stop, the recorded history must be
// linearizable under the catalog model, and the same history with a planted anomaly must
// not be. The election pause per kill (SIGKILL to the first write
// through a survivor) is logged with its p50/p99.
func TestLeaderKillLoop(t *testing.T) {
	kills, clients, s := envInt(t, envKills, 10), envInt(t, envClients, 4), seed(t)
	began, load0 := time.Now(), loadAvg()
	c := startCluster(t, 3, snapshotEnv...)
	if _, _, err := c.waitLeader(leaderWait); err != nil {
		t.Fatal(err)
	}
	histPath := historyPath(t)
	rec, err := history.CreateRecorder(histPath, history.RecorderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := &api{rec: rec, token: c.token}
	if err := a.setup(c.members, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	a.heartbeats(ctx, c.members, &wg)
	w := &workload{api: a, members: c.members, names: workloadNames, pace: workloadPace}
	w.start(ctx, clients, s, &wg)
	pauses := make([]time.Duration, 0, kills)
	for k := range kills {
		pauses = append(pauses, c.killOnce(t, a, w, k))
	}
	stop()
	wg.Wait()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if len(a.unexpected) > 0 {
		t.Fatalf("%d unexpected answers, first: %s", len(a.unexpected), a.unexpected[0])
	}
	seq, err := c.agree(a, agreeWait)
	if err != nil {
		t.Fatal(err)
	}
	h := checkHistory(t, histPath)
	plantAndCheck(t, h)
	t.Logf("election pause over %d kills (SIGKILL -> first catalog write through a survivor): %s; all: %v",
		kills, summary(pauses, time.Millisecond), pauses)
	t.Logf("history %s: %d operations, %d ok catalog writes by %d clients; the three members' snapshots agree at seq %d; "+
		"run %v; load average %s -> %s; member CPU %s", histPath, len(h.Ops), w.okWrites.Load(), clients, seq,
		time.Since(began).Round(time.Millisecond), load0, loadAvg(), c.cpu())
}

// killOnce SIGKILLs the leader, measures the pause until a write through a survivor
// succeeds, restarts the member, waits for it to catch up and for the workload to write
// again with all three up, and returns the pause.
func (c *cluster) killOnce(t *testing.T, a *api, w *workload, k int) time.Duration {
	t.Helper()
	leader, _, err := c.waitLeader(leaderWait)
	if err != nil {
		t.Fatalf("kill %d: %v", k, err)
	}
	var survivors []*member
	for _, m := range c.members {
		if m != leader {
			survivors = append(survivors, m)
		}
	}
	killedAt := time.Now()
	c.kill(leader)
	resumed, err := a.probe(survivors, k, resumeWait)
	if err != nil {
		t.Fatalf("kill %d of %s: %v", k, leader.id, err)
	}
	pause := resumed.Sub(killedAt)
	_, g, err := c.waitLeader(leaderWait)
	if err != nil {
		t.Fatalf("kill %d: after the first write: %v", k, err)
	}
	if err := c.restart(leader); err != nil {
		t.Fatalf("kill %d: restart of %s: %v", k, leader.id, err)
	}
	if err := c.waitApplied(leader, g.commit, catchUpWait); err != nil {
		t.Fatalf("kill %d: %v", k, err)
	}
	if err := w.waitWrites(w.okWrites.Load(), resumeOps, writesWait); err != nil {
		t.Fatalf("kill %d: after the restart of %s: %v", k, leader.id, err)
	}
	t.Logf("kill %d: %s SIGKILLed, pause %v, restarted (run %d) and caught up to index %d",
		k, leader.id, pause.Round(time.Millisecond), leader.proc.Run(), g.commit)
	return pause
}

// historyPath is where the run's history goes: FELIX_CP_KEEP when set, else a directory
// kept only when the test fails (its path is logged then).
func historyPath(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(envKeep); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "controlplane-history.jsonl")
	}
	dir, err := os.MkdirTemp("", "felix-cp-history")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("history and visualization kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	return filepath.Join(dir, "controlplane-history.jsonl")
}

// checkTimeout bounds porcupine's search per catalog entry.
const checkTimeout = 60 * time.Second

// checkHistory loads the history at path and requires the catalog model to find it
// linearizable, every entry decided (no search timed out).
func checkHistory(t *testing.T, path string) *history.History {
	t.Helper()
	h, err := history.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	res, err := checker.CheckLinearizable(h, checker.LinearOptions{Timeout: checkTimeout,
		VisualizationPath: filepath.Join(filepath.Dir(path), "linearizability.html")})
	if err != nil {
		t.Error(err)
	}
	for _, f := range res.Findings {
		t.Errorf("finding: %s", f)
	}
	if len(res.Unknown) > 0 {
		t.Errorf("porcupine undecided within %v for %v", checkTimeout, res.Unknown)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("porcupine: %d catalog entries of %d operations linearizable (checked in %v)", res.Objects, len(h.Ops),
		time.Since(began).Round(time.Millisecond))
	return h
}

// summary renders durations as "p50 X, p99 Y, min W, max Z" (nearest rank), rounded to unit.
func summary(ds []time.Duration, unit time.Duration) string {
	if len(ds) == 0 {
		return "no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("p50 %v, p99 %v, min %v, max %v", pct(s, 50).Round(unit), pct(s, 99).Round(unit),
		s[0].Round(unit), s[len(s)-1].Round(unit))
}

// pct is the nearest-rank percentile p of sorted s.
func pct(s []time.Duration, p int) time.Duration {
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))]
}

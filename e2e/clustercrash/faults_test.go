package clustercrash

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"felix/testbed/clusterbed"
)

// fault is one kind of fault the schedule applies.
type fault string

const (
	faultLeaderKill fault = "shard-leader SIGKILL"
	faultCPKill     fault = "control-plane leader SIGKILL"
	faultPause      fault = "broker stopped (SIGSTOP)"
)

// faultLog is what a phase's schedule did, for the table and a failure's message.
type faultLog struct {
	counts map[fault]int
	lines  []string
}

func (l *faultLog) note(f fault, format string, args ...any) {
	if l.counts == nil {
		l.counts = map[fault]int{}
	}
	l.counts[f]++
	l.lines = append(l.lines, time.Now().UTC().Format("15:04:05.000")+" "+string(f)+": "+fmt.Sprintf(format, args...))
}

func (l *faultLog) String() string { return strings.Join(l.lines, "\n") }

// schedule is a phase's faults in a seeded order: kills shard-leader kills, cpKills
// control-plane leader kills and one paused broker.
func schedule(rng *rand.Rand, kills, cpKills int) []fault {
	var fs []fault
	for range kills {
		fs = append(fs, faultLeaderKill)
	}
	for range cpKills {
		fs = append(fs, faultCPKill)
	}
	fs = append(fs, faultPause)
	rng.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
	return fs
}

// runFaults applies faults one after another, fault i once the phase's progress passed
// (i+1)/(n+1) of total (so faults land while the work runs), each undone (restart, resume)
// before the next. kind and name are the phase's target ("stream"/"cache" and its name),
// whose shard leaders are killed. It returns when every fault was applied, or ctx ended.
func runFaults(ctx context.Context, bed *clusterbed.Bed, rng *rand.Rand, faults []fault, kind, name string,
	pr *progress, total int64, log *faultLog) error {
	for i, f := range faults {
		at := total * int64(i+1) / int64(len(faults)+1)
		if err := waitProgress(ctx, pr, at); err != nil {
			return err
		}
		var err error
		switch f {
		case faultLeaderKill:
			err = killShardLeader(ctx, bed, rng, kind, name, log)
		case faultCPKill:
			err = killControlPlaneLeader(ctx, bed, log)
		case faultPause:
			err = pauseBroker(ctx, bed, rng, log)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// waitProgress waits (polling every 20 ms) until at least at files were answered.
func waitProgress(ctx context.Context, pr *progress, at int64) error {
	for pr.done.Load() < at {
		select {
		case <-ctx.Done():
			return fmt.Errorf("progress %d of the %d the next fault waits for: %w", pr.done.Load(), at, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// downMin and downSpan bound how long a killed leader stays down: 300 ms to 1.5 s, or with
// failover on 2.5 to 4 s (past the control plane's 1.5 s down timeout).
var downMin, downSpan = 300 * time.Millisecond, 1200 * time.Millisecond

// downFor is how long a killed process stays down: downMin plus up to downSpan.
func downFor(rng *rand.Rand) time.Duration {
	return downMin + time.Duration(rng.Int64N(int64(downSpan)))
}

// killShardLeader SIGKILLs the leader of a random shard of the target, keeps it down a
// moment, and restarts it under its node id on its data dir.
func killShardLeader(ctx context.Context, bed *clusterbed.Bed, rng *rand.Rand, kind, name string, log *faultLog) error {
	as, err := bed.Assignments(ctx, kind, name)
	if err != nil {
		return err
	}
	shard := uint32(rng.IntN(shards))
	a, ok := as[shard]
	if !ok {
		return fmt.Errorf("no assignment for %s %s shard %d", kind, name, shard)
	}
	br := bed.Broker(a.Leader)
	if br == nil {
		return fmt.Errorf("shard %d's leader %q is not a broker of the bed", shard, a.Leader)
	}
	if err := bed.KillBroker(ctx, br); err != nil {
		return err
	}
	d := downFor(rng)
	log.note(faultLeaderKill, "%s (leader of %s shard %d at generation %d), down %v", br.ID, name, shard, a.Generation, d.Round(time.Millisecond))
	hold(ctx, d)
	return bed.RestartBroker(ctx, br)
}

// killControlPlaneLeader SIGKILLs the Raft leader, keeps it down a moment, restarts it and
// waits for a leader again (bounded).
func killControlPlaneLeader(ctx context.Context, bed *clusterbed.Bed, log *faultLog) error {
	m, err := bed.WaitLeader(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	if err := bed.KillMember(ctx, m); err != nil {
		return err
	}
	log.note(faultCPKill, "%s", m.ID)
	hold(ctx, time.Second)
	if err := bed.RestartMember(ctx, m); err != nil {
		return err
	}
	_, err = bed.WaitLeader(ctx, 30*time.Second)
	return err
}

// pauseBroker stops a random broker with SIGSTOP for 2 s (every peer, client and the
// control plane lose it at once, as in a partition, and it resumes with its state) and
// continues it.
func pauseBroker(ctx context.Context, bed *clusterbed.Bed, rng *rand.Rand, log *faultLog) error {
	br := bed.Brokers[rng.IntN(len(bed.Brokers))]
	if err := br.Proc.Pause(ctx); err != nil {
		return err
	}
	log.note(faultPause, "%s for 2s", br.ID)
	hold(ctx, 2*time.Second)
	return br.Proc.Resume(ctx)
}

// hold keeps a fault in place for d (its length: a schedule, not a wait for a condition),
// or until ctx ends.
func hold(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

package clustercrash

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"felix/client"
	"felix/cluster/meta"
	"felix/seglog"
	"felix/testbed/clusterbed"
	"felix/testbed/corpus"
)

// shardKey is the ownership table's key of a shard of the stream or cache.
func shardKey(kind, name string, shard uint32) string {
	return kind + "/" + tenant + "/" + namespace + "/" + name + "/" + strconv.FormatUint(uint64(shard), 10)
}

// settle waits (bounded by within) until every shard of the target has its leader open as
// leader at the assignment's generation and every follower durable at the leader's
// committed offset; it returns the assignments and each shard's committed offset.
func settle(ctx context.Context, bed *clusterbed.Bed, kind, name string, within time.Duration) (map[uint32]meta.Assignment, map[uint32]uint64, error) {
	deadline := time.Now().Add(within)
	var last string
	for {
		as, committed, why := settledOnce(ctx, bed, kind, name)
		if why == "" {
			return as, committed, nil
		}
		last = why
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, fmt.Errorf("not settled within %v: %s", within, last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// settledOnce is one look at the cluster; why is "" when it is settled.
func settledOnce(ctx context.Context, bed *clusterbed.Bed, kind, name string) (map[uint32]meta.Assignment, map[uint32]uint64, string) {
	as, err := bed.Assignments(ctx, kind, name)
	if err != nil {
		return nil, nil, err.Error()
	}
	if len(as) != shards {
		return nil, nil, fmt.Sprintf("%d assignments of %d", len(as), shards)
	}
	tables := map[string]map[string]clusterbed.OpenShard{}
	for _, br := range bed.Brokers {
		if tables[br.ID], err = bed.Ownership(ctx, br); err != nil {
			return nil, nil, err.Error()
		}
	}
	committed := map[uint32]uint64{}
	for s, a := range as {
		key := shardKey(kind, name, s)
		lead, ok := tables[a.Leader][key]
		if !ok || lead.Role != "leader" || lead.Generation != a.Generation {
			return nil, nil, fmt.Sprintf("%s: leader %s has %+v, want leader at generation %d", key, a.Leader, lead, a.Generation)
		}
		for _, f := range a.Followers {
			if fo := tables[f][key]; fo.Durable < lead.Committed {
				return nil, nil, fmt.Sprintf("%s: follower %s durable at %d < the leader's committed %d", key, f, fo.Durable, lead.Committed)
			}
		}
		committed[s] = lead.Committed
	}
	return as, committed, ""
}

// readShard reads offsets 0 through end−1 of a stream shard through broker w (redirected to
// the leader), reopening the subscription where a delivery skipped offsets. Errors: nothing
// delivered at an offset below end (a hole), the subscription's.
func readShard(ctx context.Context, bed *clusterbed.Bed, w int, shard uint32, end uint64) ([]seen, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := bed.Dial(ctx, bed.Brokers[w], tenant, namespace)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out := make([]seen, 0, end)
	for uint64(len(out)) < end {
		next := uint64(len(out))
		sub, err := cl.Subscribe(ctx, streamName, client.Offset(next), client.SubscribeOptions{Shards: []uint32{shard}})
		if err != nil {
			return out, err
		}
		for uint64(len(out)) < end {
			r, err := sub.Next(ctx)
			if err != nil {
				sub.Close()
				return out, fmt.Errorf("shard %d at offset %d: %w", shard, len(out), err)
			}
			if !r.HasOffset || r.Offset != uint64(len(out)) {
				break // a skipped offset: reopen at the first one not seen
			}
			out = append(out, decodeSeen(r.Offset, r.Payload))
		}
		sub.Close()
		if uint64(len(out)) == next {
			return out, fmt.Errorf("shard %d: nothing delivered at offset %d (end %d)", shard, next, end)
		}
	}
	return out, nil
}

// streamStats is the stream phase's accounting against the final logs.
type streamStats struct {
	acked, indeterminate, refused, skipped  int
	stored, lost, duplicated, misplaced     int
	unknown, badRecords                     int
	indeterminateStored                     int
	subscriberMismatch, subscriberDelivered int
	subscriberGaps                          uint64
	groupMissing, groupDelivered            int
	failures                                []string
}

func (st *streamStats) fail(format string, args ...any) {
	if len(st.failures) < 20 {
		st.failures = append(st.failures, fmt.Sprintf(format, args...))
	}
}

// account compares what the publishers learned with the shards' final logs: each acked
// file exactly once, in the shard and at the offset its ack named, with its hash; an
// indeterminate one at most once; nothing else stored.
func account(c *corpus.Corpus, results []pubResult, logs map[uint32][]seen) *streamStats {
	st := &streamStats{}
	byPath := map[string]int{}
	for i, f := range c.Files {
		byPath[f.Path] = i
	}
	copies := make([][][2]uint64, len(c.Files))
	for shard, recs := range logs {
		for _, r := range recs {
			st.stored++
			i, ok := byPath[r.path]
			switch {
			case r.bad != "":
				st.badRecords++
				st.fail("shard %d offset %d: %s", shard, r.offset, r.bad)
			case !ok:
				st.unknown++
				st.fail("shard %d offset %d: %q is no corpus file", shard, r.offset, r.path)
			case r.sum != c.Files[i].Sum:
				st.badRecords++
				st.fail("shard %d offset %d: %s with another hash", shard, r.offset, r.path)
			default:
				copies[i] = append(copies[i], [2]uint64{uint64(shard), r.offset})
			}
		}
	}
	for i, res := range results {
		st.accountOne(c.Files[i].Path, res, copies[i])
	}
	return st
}

func (st *streamStats) accountOne(path string, res pubResult, at [][2]uint64) {
	switch res.outcome {
	case outAcked:
		st.acked++
		switch {
		case len(at) == 0:
			st.lost++
			st.fail("acked %s (shard %d offset %d) is not stored", path, res.shard, res.lastOffset)
		case len(at) > 1:
			st.duplicated++
			st.fail("acked %s is stored %d times: %v (earlier attempts: %q)", path, len(at), at, res.history)
		case res.hasShard && (at[0][0] != uint64(res.shard) || at[0][1] != res.lastOffset):
			st.misplaced++
			st.fail("acked %s at shard %d offset %d is stored at %v", path, res.shard, res.lastOffset, at[0])
		}
	case outIndeterminate:
		st.indeterminate++
		if len(at) > 1 {
			st.duplicated++
			st.fail("indeterminate %s is stored %d times: %v", path, len(at), at)
		}
		st.indeterminateStored += len(at)
	default:
		if res.outcome == outRefused {
			st.refused++
		} else {
			st.skipped++
		}
		if len(at) > 0 {
			st.unknown++
			st.fail("%s was never acked (outcome %d) but is stored at %v", path, res.outcome, at)
		}
	}
}

// checkSubscribers compares every subscriber's deliveries with the final log: offsets
// strictly increasing, each delivered record the one the log holds at that offset (no
// dirty or lost-then-replaced read).
func (st *streamStats) checkSubscribers(subs []*subscriber, logs map[uint32][]seen) {
	for _, s := range subs {
		s.mu.Lock()
		log := logs[s.shard]
		var prev int64 = -1
		for _, r := range s.got {
			st.subscriberDelivered++
			switch {
			case int64(r.offset) <= prev:
				st.subscriberMismatch++
				st.fail("subscriber of shard %d: offset %d after %d", s.shard, r.offset, prev)
			case r.offset >= uint64(len(log)) || log[r.offset].path != r.path || log[r.offset].sum != r.sum:
				st.subscriberMismatch++
				st.fail("subscriber of shard %d read %q at offset %d, which the final log does not hold there", s.shard, r.path, r.offset)
			}
			prev = int64(r.offset)
		}
		st.subscriberGaps += s.gaps
		s.mu.Unlock()
	}
}

// checkGroup asks that the group was delivered every acked record (at least once), and that
// each delivery is the log's record at that offset.
func (st *streamStats) checkGroup(g *group, results []pubResult, logs map[uint32][]seen) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st.groupDelivered = len(g.delivered)
	for at, r := range g.delivered {
		if log := logs[uint32(at[0])]; at[1] >= uint64(len(log)) || log[at[1]].path != r.path {
			st.fail("group was given %q at shard %d offset %d, which the final log does not hold there", r.path, at[0], at[1])
			st.groupMissing++
		}
	}
	for _, res := range results {
		if res.outcome == outAcked && res.hasShard {
			if _, ok := g.delivered[[2]uint64{uint64(res.shard), res.lastOffset}]; !ok {
				st.groupMissing++
			}
		}
	}
	if st.groupMissing > 0 {
		st.fail("the group was not delivered %d acked records", st.groupMissing)
	}
}

// compareReplicas verifies every replica's log of each shard (broker stopped) and compares
// each follower's records with the leader's up to the leader's committed offset: same
// offsets, timestamps, kinds, checksums and bodies. It returns the shards compared and the
// problems found.
func compareReplicas(bed *clusterbed.Bed, kind seglog.ShardKind, name string, as map[uint32]meta.Assignment,
	committed map[uint32]uint64) (int, []string) {
	var problems []string
	n := 0
	for s, a := range as {
		key := seglog.ShardKey{Kind: kind, Tenant: tenant, Namespace: namespace, Name: name, Shard: s}
		dir := func(id string) string { return seglog.ShardDir(filepath.Join(bed.Broker(id).Dir, "data"), key) }
		want, err := walkLog(dir(a.Leader), committed[s])
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s shard %d leader %s: %v", name, s, a.Leader, err))
			continue
		}
		for _, f := range a.Followers {
			got, err := walkLog(dir(f), committed[s])
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s shard %d follower %s: %v", name, s, f, err))
			case len(got) != len(want):
				problems = append(problems, fmt.Sprintf("%s shard %d follower %s: %d records below %d, the leader %d", name, s, f, len(got), committed[s], len(want)))
			default:
				for i := range want {
					if got[i] != want[i] {
						problems = append(problems, fmt.Sprintf("%s shard %d follower %s differs from the leader at offset %d", name, s, f, i))
						break
					}
				}
			}
		}
		n++
	}
	return n, problems
}

// walkLog is one record summary per offset below end of the log in dir (offset, timestamp,
// kind, checksum and a hash of the body), and an error naming any damage Walk reported.
func walkLog(dir string, end uint64) ([]string, error) {
	var out []string
	var bad []*seglog.CorruptionError
	err := seglog.Walk(dir, seglog.ToolOptions{}, func(r *seglog.WalkRecord) bool {
		if r.Offset >= end {
			return false
		}
		out = append(out, fmt.Sprintf("%d/%d/%d/%08x/%x", r.Offset, r.Timestamp, r.Kind, r.Checksum, hashBody(r.Body)))
		return true
	}, func(ce *seglog.CorruptionError) { bad = append(bad, ce) })
	if err == nil && len(bad) > 0 {
		err = bad[0]
	}
	return out, err
}

package checker

import (
	"fmt"
	"sort"
	"strings"

	"felix/testbed/history"
)

// replicaLog is one replica's committed records of one shard.
type replicaLog struct {
	name      string
	pos       int
	start     uint64 // first offset the replica still holds
	committed uint64
	records   map[uint64]string
}

// CheckReplicas compares, per stream shard, the replica-log operations of
// every replica (the last one per replica counts): over the offsets below
// the smallest Committed among them, each offset must hold the same payload
// on every replica that holds offsets that low (its log start: In.From, else
// its lowest record). A differing payload, or an offset one replica lacks at
// or above its start, is a replicas-diverged finding, one per shard, listing
// the differing offsets. Shards with fewer than two replica logs are skipped.
func CheckReplicas(h *history.History) []Finding {
	logs := map[shardKey]map[string]*replicaLog{}
	for pos := range h.Ops {
		op := &h.Ops[pos]
		if op.Kind != history.KindReplicaLog || op.Outcome != history.OK {
			continue
		}
		sk := shardKey{op.In.Stream, op.In.Shard}
		if logs[sk] == nil {
			logs[sk] = map[string]*replicaLog{}
		}
		logs[sk][op.In.Replica] = newReplicaLog(pos, op)
	}
	var out []Finding
	for sk, byName := range logs {
		if f, diverged := compareReplicas(h, sk, byName); diverged {
			out = append(out, f)
		}
	}
	sortFindings(out)
	return out
}

func newReplicaLog(pos int, op *history.Op) *replicaLog {
	l := &replicaLog{name: op.In.Replica, pos: pos, committed: op.Out.Committed, records: map[uint64]string{}}
	first := true
	for _, rec := range op.Out.Records {
		l.records[rec.Offset] = string(rec.Payload)
		if first || rec.Offset < l.start {
			l.start, first = rec.Offset, false
		}
	}
	if op.In.From != nil {
		l.start = *op.In.From
	}
	return l
}

// compareReplicas compares the logs of one shard; see CheckReplicas.
func compareReplicas(h *history.History, sk shardKey, byName map[string]*replicaLog) (Finding, bool) {
	if len(byName) < 2 {
		return Finding{}, false
	}
	replicas := make([]*replicaLog, 0, len(byName))
	commit := ^uint64(0)
	for _, l := range byName {
		replicas = append(replicas, l)
		commit = min(commit, l.committed)
	}
	sort.Slice(replicas, func(i, j int) bool { return replicas[i].name < replicas[j].name })
	offsets := map[uint64]bool{}
	for _, l := range replicas {
		for off := range l.records {
			if off < commit {
				offsets[off] = true
			}
		}
	}
	var bad []uint64
	var first string
	for _, off := range sortedKeysOf(offsets) {
		if d := differAt(replicas, off); d != "" {
			bad = append(bad, off)
			if first == "" {
				first = d
			}
		}
	}
	if len(bad) == 0 {
		return Finding{}, false
	}
	positions := make([]int, 0, len(replicas))
	for _, l := range replicas {
		positions = append(positions, l.pos)
	}
	return Finding{
		Anomaly: ReplicasDiverged, Stream: sk.stream, Shard: sk.shard, Offsets: bad, Ops: opIndices(h, positions),
		Detail: fmt.Sprintf("%d committed offsets (below %d) differ; first at offset %d: %s", len(bad), commit, bad[0], first),
	}, true
}

// differAt describes how the replicas differ at off, or returns "".
func differAt(replicas []*replicaLog, off uint64) string {
	var views []string
	values := map[string]bool{}
	for _, l := range replicas {
		if off < l.start {
			continue // trimmed by retention on this replica: not a difference
		}
		p, ok := l.records[off]
		view := fmt.Sprintf("%s=%q", l.name, p)
		if !ok {
			p, view = "\x00missing", l.name+" lacks it"
		}
		values[p] = true
		views = append(views, view)
	}
	if len(values) < 2 {
		return ""
	}
	return strings.Join(views, " ")
}

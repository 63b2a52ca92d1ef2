package broker

// Leader reports (docs/failover.md, "Wiring"; issue 20 item 1): in cluster mode a broker
// leading a replicated shard reports to the control plane (POST /v1/reports, kind
// replica_report) each member's offset its quorum tracker counts — its own fsynced offset
// and each follower's acknowledged durable offset at this generation — stamped with itself
// (the leader and generation) and the storage identity of each member: its own, and each
// follower's as the leader counted it (learned at handshake, shardAcks.counted: gap 4), else
// as the control plane registered it (the broker's mirror of the feed).
//
// Rate: per shard, at most one report every reportInterval (250 ms), and only when an
// offset changed since the last accepted one, or reportRefresh (500 ms) passed since it:
// a dead leader's last report is at most 250 ms behind what it had counted when it
// stopped, and an idle shard costs two Raft entries a second.

import (
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"felix/cluster/meta"
	"felix/cluster/meta/metaclient"
	"felix/core"
)

const (
	// reportInterval is the least time between two reports of one shard.
	reportInterval = 250 * time.Millisecond
	// reportRefresh is how often an unchanged report is sent again (placement believes a
	// follower without a verified identity only from a report at most its window old).
	reportRefresh = 500 * time.Millisecond
)

// sentReport is a shard's last accepted report: its generation, offsets and when.
type sentReport struct {
	gen  uint64
	held []uint64
	at   time.Time
}

// startReports runs the report loop until ctx ends (one of cp.done's goroutines).
func (cp *controlPlane) startReports(ctx context.Context) {
	cp.done.Add(1)
	go func() {
		defer cp.done.Done()
		cp.reportLoop(ctx)
	}()
}

// reportLoop reports every reportInterval what changed (reportDue).
func (cp *controlPlane) reportLoop(ctx context.Context) {
	sent := map[core.ShardRef]sentReport{}
	t := cp.clk.NewTimer(reportInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		live := map[core.ShardRef]bool{}
		for _, a := range cp.reportsDue() {
			live[a.acks.ref] = true
			now := cp.clk.Now()
			if !reportDue(sent[a.acks.ref], a.acks, now) {
				continue
			}
			if err := cp.sendReport(ctx, a); err != nil {
				cp.reportFailed(a.acks, err)
				continue
			}
			sent[a.acks.ref] = sentReport{gen: a.acks.gen, held: a.acks.held, at: now}
		}
		for ref := range sent {
			if !live[ref] {
				delete(sent, ref)
			}
		}
		t.Reset(reportInterval)
	}
}

// reportDue tells whether shard a is reported now, given its last accepted report.
func reportDue(last sentReport, a shardAcks, now time.Time) bool {
	return last.at.IsZero() || last.gen != a.gen || !slices.Equal(last.held, a.held) ||
		now.Sub(last.at) >= reportRefresh
}

// reportsDue are the shards to report: every running leader's tracker (a refusal nil),
// and every shard whose fence round refused to open (fence_round.go), with its refusal.
func (cp *controlPlane) reportsDue() []shardReport {
	var out []shardReport
	for _, a := range cp.s.repl.leaderAcks() {
		out = append(out, shardReport{acks: a})
	}
	for _, f := range cp.s.repl.fenceRefusals() {
		out = append(out, shardReport{acks: f.acks, refusal: &meta.FenceRefusal{Ahead: f.refusal.Ahead,
			AheadDurable: f.refusal.AheadAt.Durable, AheadGeneration: f.refusal.AheadAt.LastGeneration}})
	}
	return out
}

// shardReport is one shard's report: the offsets counted, and a fence refusal.
type shardReport struct {
	acks    shardAcks
	refusal *meta.FenceRefusal
}

// sendReport posts a's replica report, bounded by a second.
func (cp *controlPlane) sendReport(ctx context.Context, a shardReport) error {
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	r := cp.replicaReport(a.acks)
	r.FenceRefusal = a.refusal
	return cp.client.Report(rctx, r)
}

// replicaReport is a as a meta.ReplicaReport: the shard, this broker as its leader at the
// generation, and each member's node, storage identity and durable_offset.
func (cp *controlPlane) replicaReport(a shardAcks) meta.ReplicaReport {
	own := cp.s.storageID
	ids := map[string]string{cp.s.cfg.NodeID: hex.EncodeToString(own[:])}
	cp.mu.Lock()
	for i, n := range a.nodes {
		if i > 0 && i < len(a.counted) && a.counted[i] != "" {
			ids[n] = a.counted[i] // the identity it was counted under (learned at handshake)
		} else if b, ok := cp.mirror.brokers[n]; ok && i > 0 {
			ids[n] = b.StorageID
		}
	}
	cp.mu.Unlock()
	r := meta.ReplicaReport{ShardRef: metaShardRef(a.ref), Leader: cp.s.cfg.NodeID, Generation: a.gen}
	for i, n := range a.nodes {
		r.Replicas = append(r.Replicas, meta.ReplicaState{NodeID: n, StorageID: ids[n], DurableOffset: a.held[i]})
	}
	return r
}

// reportFailed logs a refused or lost report: a stale generation (this broker was
// replaced; the feed will say so) at debug level, anything else as a warning.
func (cp *controlPlane) reportFailed(a shardAcks, err error) {
	var ref *metaclient.RefusedError
	if errors.As(err, &ref) {
		cp.s.log.Debug("replica report refused", "shard", a.ref.String(), "generation", a.gen, "reason", ref.Message)
		return
	}
	if !errors.Is(err, context.Canceled) {
		cp.s.log.Warn("replica report not delivered", "shard", a.ref.String(), "generation", a.gen, "err", err)
	}
}

// metaShardRef is ref as the control plane's shard reference (metaShardKey's fields).
func metaShardRef(ref core.ShardRef) meta.ShardRef {
	kind := "stream"
	if ref.Kind == core.ShardCache {
		kind = "cache"
	}
	return meta.ShardRef{Kind: kind, TenantID: ref.Name.Tenant, Namespace: ref.Name.Namespace, Name: ref.Name.Stream,
		Shard: uint32(ref.Shard)}
}

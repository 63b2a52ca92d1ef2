package broker

// The promoted leader's fence round (issue 20 item 2, known gap 1; docs/failover.md,
// "Fence rounds"; seeds/upgrades-and-compatibility.txt "majority_ack"): before a Quorum
// stream shard led here at a generation ships, acknowledges or serves anything, the broker
// fences every member of its replica set at that generation on each gating log
// (placement.GatingLogs) with FencePosition (34) — Fence (25) to a peer predating it — and
// runs cluster/placement's FenceRound over the answers. Open (a majority, itself included,
// answered at the generation and none is ahead of it): the plan starts the shippers.
// Refused (a fenced replica is ahead, placement.Position.Ahead): it does not open, and the
// refusal travels to the control plane in this shard's replica report (kind
// replica_report, FenceRefusal), whose placement promotes the replica ahead at a newer
// generation. Lost (a member accepted a newer generation, FencedEpoch): it does not open.

import (
	"context"
	"os"
	"time"

	"felix/cluster/placement"
	"felix/core"
	"felix/proto"
)

// fenceRoundOff turns the round off (FELIX_TEST_FENCE_ROUND=off): the promoted leader
// opens at once, as before the round existed. Test-only: the teeth of e2e/failover.
var fenceRoundOff = os.Getenv("FELIX_TEST_FENCE_ROUND") == "off"

// promotion is one shard's fence round at one generation and replica set (r.promotions,
// under r.mu).
type promotion struct {
	gen     uint64
	set     []string
	outcome placement.FenceOutcome
	own     map[proto.ReplicaLog]placement.Position
	// held is, per member, the durable_offset it answered on the first gating log (this
	// broker's own position for itself): the refusal's report.
	held   map[string]uint64
	cancel context.CancelFunc
	done   chan struct{} // closed once decided (or abandoned)
}

// fenced reports whether the shard ref led here at gen with followers set may ship: its
// round is open. A new generation or replica set starts a new round (in the background;
// the plan is asked for again when it ends).
func (r *replication) fenced(ctx context.Context, ref core.ShardRef, gen uint64, set []string) bool {
	if fenceRoundOff {
		return true
	}
	r.mu.Lock()
	p := r.promotions[ref]
	if p != nil && p.gen == gen && sameSet(p.set, set) {
		open := p.outcome.State == placement.FenceOpen
		r.mu.Unlock()
		return open
	}
	r.mu.Unlock()
	if err := r.srv.engine.SetReplicated(ref, true); err != nil { // attached before anything releases (promote.go)
		r.srv.log.Warn("promotion: replica set not attached", "shard", ref.String(), "err", err)
	}
	own, err := r.ownPositions(ref, gen)
	if err != nil {
		r.srv.log.Warn("promotion: fence round not started (retried on the next reconcile pass)", "shard", ref.String(), "err", err)
		return false
	}
	r.startRound(ctx, ref, gen, set, own)
	return false
}

// startRound starts a fence round of ref at gen over followers set, from own positions,
// replacing any other round of the shard; the round runs until decided or ctx ends.
func (r *replication) startRound(ctx context.Context, ref core.ShardRef, gen uint64, set []string,
	own map[proto.ReplicaLog]placement.Position) *promotion {
	rctx, cancel := context.WithCancel(ctx)
	p := &promotion{gen: gen, set: set, cancel: cancel, own: own, done: make(chan struct{}),
		outcome: placement.FenceOutcome{State: placement.FencePending}}
	r.mu.Lock()
	if old := r.promotions[ref]; old != nil {
		old.cancel()
	}
	r.promotions[ref] = p
	r.mu.Unlock()
	r.exited.Add(1)
	go func() {
		defer r.exited.Done()
		defer func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			select {
			case <-p.done:
			default:
				close(p.done)
			}
		}()
		r.runFence(rctx, ref, p)
	}()
	return p
}

// forgetPromotions drops the rounds of shards no longer led here (keep: the shards the
// plan wants shipped or fenced) unless the table still names this node their leader at
// the round's generation (a round run before the role change, or a refusal: promote.go).
func (r *replication) forgetPromotions(keep map[core.ShardRef]bool, owners Ownership) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ref, p := range r.promotions {
		a, named := owners[ref]
		if !keep[ref] && (!named || a.Leader != r.srv.nodeID() || a.Generation != p.gen) {
			p.cancel()
			delete(r.promotions, ref)
		}
	}
}

// fenceAnswer is one member's answer on one log (err: none, retry).
type fenceAnswer struct {
	from string
	log  proto.ReplicaLog
	at   placement.Position
	code proto.InternalCode // FencedEpoch: the round is lost
}

// runFence runs p's round until it is decided or ctx ends.
func (r *replication) runFence(ctx context.Context, ref core.ShardRef, p *promotion) {
	s := r.srv
	own := p.own
	round, err := placement.NewFenceRound(placement.FenceConfig{Generation: p.gen, Self: s.nodeID(),
		ReplicaSet: append([]string{s.nodeID()}, p.set...), Own: own, MajorityAck: true})
	if err != nil {
		s.log.Warn("promotion: fence round not started (retried on the next reconcile pass)", "shard", ref.String(), "err", err)
		r.mu.Lock()
		if r.promotions[ref] == p {
			delete(r.promotions, ref)
		}
		r.mu.Unlock()
		return
	}
	answers := make(chan fenceAnswer, len(p.set)*len(own))
	for _, f := range p.set {
		for l := range own {
			go r.fenceMember(ctx, ref, p.gen, f, l, own[l], answers)
		}
	}
	held := map[string]uint64{s.nodeID(): own[firstGating(ref)].Durable}
	start := time.Now()
	for {
		var a fenceAnswer
		select {
		case <-ctx.Done():
			return
		case a = <-answers:
		}
		var o placement.FenceOutcome
		if a.code == proto.InternalFencedEpoch {
			o = round.Refused(a.from, a.code)
		} else {
			if a.log == firstGating(ref) {
				held[a.from] = a.at.Durable
			}
			o = round.Answer(a.from, placement.FenceAnswer{Log: a.log, Generation: p.gen, At: a.at})
		}
		if o.State == placement.FencePending {
			continue
		}
		r.decided(ref, p, own, held, o, time.Since(start))
		return
	}
}

// decided records the round's outcome, logs it and asks for a plan.
func (r *replication) decided(ref core.ShardRef, p *promotion, own map[proto.ReplicaLog]placement.Position,
	held map[string]uint64, o placement.FenceOutcome, took time.Duration) {
	s := r.srv
	r.mu.Lock()
	p.outcome, p.own, p.held = o, own, held
	close(p.done)
	r.mu.Unlock()
	switch o.State {
	case placement.FenceOpen:
		s.log.Info("promotion: fence round open", "shard", ref.String(), "generation", p.gen, "answered", o.Answered,
			"majority", o.Majority, "own", own[firstGating(ref)].String(), "took", took)
	case placement.FenceRefused:
		s.log.Warn("promotion: refused to open: a fenced replica is ahead (reported to the control plane)",
			"shard", ref.String(), "generation", p.gen, "ahead", o.Ahead, "log", o.AheadLog.String(), "at", o.AheadAt.String(),
			"own", own[o.AheadLog].String())
	default:
		s.log.Warn("promotion: fence round lost", "shard", ref.String(), "generation", p.gen, "reason", o.Reason)
	}
	p.cancel() // the members' fences still in flight
	r.changed()
}

// firstGating is the gating log whose offsets a report carries (gatingLog).
func firstGating(ref core.ShardRef) proto.ReplicaLog { return gatingLog(ref) }

// ownPositions is this broker's position on each gating log of ref as it inherited it at
// gen: its log below where gen began (LeadEpoch), the generation of the newest record
// there, and no further than its tail just before the role change (preClaim). Records
// this leader wrote at gen are not part of it.
func (r *replication) ownPositions(ref core.ShardRef, gen uint64) (map[proto.ReplicaLog]placement.Position, error) {
	out := map[proto.ReplicaLog]placement.Position{}
	for _, l := range placement.GatingLogs(wireKind(ref.Kind)) {
		addr := logAddr(ref, l)
		start, err := r.srv.engine.LeadEpoch(addr, gen)
		if err != nil {
			return nil, err
		}
		st, err := r.srv.engine.ReplicaState(addr)
		if err != nil {
			return nil, err
		}
		d := min(st.Durable, start)
		out[l] = placement.Position{LastGeneration: lastGenerationBelow(st, d, gen), Durable: d}
	}
	r.mu.Lock()
	in, noted := r.inherited[ref]
	r.mu.Unlock()
	if noted && in.gen == gen {
		for l, at := range in.at {
			if cur, ok := out[l]; ok && at.Durable < cur.Durable {
				// Records taken between the role change and LeadEpoch are not inherited.
				out[l] = placement.Position{LastGeneration: min(at.LastGeneration, cur.LastGeneration), Durable: at.Durable}
			}
		}
	}
	return out, nil
}

// lastGenerationBelow is the generation of the newest record below offset d in st's
// epochs history, counting only generations below limit (0: none).
func lastGenerationBelow(st core.ReplicaState, d, limit uint64) uint64 {
	var g uint64
	for _, e := range st.Epochs {
		if e.StartOffset < d && e.Generation < limit {
			g = max(g, e.Generation)
		}
	}
	return g
}

// wireKind is k as FLXI names shard kinds.
func wireKind(k core.ShardKind) proto.ShardKind {
	if k == core.ShardCache {
		return proto.ShardCache
	}
	return proto.ShardStream
}

// fenceMember fences member f on log l at gen until it answers (FencePositionOk, or FenceOk
// from a peer predating 34) or refuses with FencedEpoch, and sends the answer. Any other
// refusal or a transport failure is retried every replicaRetry.
func (r *replication) fenceMember(ctx context.Context, ref core.ShardRef, gen uint64, f string, l proto.ReplicaLog,
	own placement.Position, out chan<- fenceAnswer) {
	fol := &follower{l: &leaderShard{srv: r.srv, ref: ref, addr: logAddr(ref, l)}, node: f}
	legacy := false
	for ctx.Err() == nil {
		fence := proto.Fence{Shard: wireRef(ref), Log: l, Generation: gen}
		var msg proto.InternalMessage = &proto.FencePosition{Fence: fence}
		if legacy {
			msg = &fence
		}
		ans, _, err := fol.request(ctx, msg)
		if err == nil {
			if a, done := fenceAnswerOf(ans, f, l, gen, own, &legacy); done {
				select {
				case out <- a:
				case <-ctx.Done():
				}
				return
			}
		}
		if !sleepCtx(ctx, replicaRetry) {
			return
		}
	}
}

// fenceAnswerOf reads a member's answer to a fence: done with the answer, or not (retry;
// legacy is set on UnsupportedKind). An answer at this leader's generation or later is its
// own records (it is the only leader at gen): it counts as the leader's own position. A
// legacy FenceOk carries no last generation: it is compared by durable_offset at the
// leader's own last generation.
func fenceAnswerOf(ans proto.InternalMessage, f string, l proto.ReplicaLog, gen uint64, own placement.Position,
	legacy *bool) (fenceAnswer, bool) {
	switch a := ans.(type) {
	case *proto.FencePositionOk:
		if a.Log != l || a.Generation != gen {
			return fenceAnswer{}, false
		}
		at := placement.Position{LastGeneration: a.LastGeneration, Durable: a.DurableOffset}
		if at.LastGeneration >= gen {
			at = own
		}
		return fenceAnswer{from: f, log: l, at: at}, true
	case *proto.FenceOk:
		if a.Log != l || a.Generation != gen {
			return fenceAnswer{}, false
		}
		return fenceAnswer{from: f, log: l, at: placement.Position{LastGeneration: own.LastGeneration, Durable: a.DurableOffset}}, true
	case *proto.UnsupportedKind:
		*legacy = true
	case *proto.ReplicateError:
		if a.Code == proto.InternalFencedEpoch {
			return fenceAnswer{from: f, log: l, code: a.Code}, true
		}
	}
	return fenceAnswer{}, false
}

// fenceRefusals are the refusals of the shards led here whose round refused to open, for
// the control-plane reports: the shard, the generation, and each member's durable_offset
// as answered (this broker's inherited position for itself).
func (r *replication) fenceRefusals() []shardRefusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []shardRefusal
	for ref, p := range r.promotions {
		if p.outcome.State != placement.FenceRefused {
			continue
		}
		nodes := append([]string{r.srv.nodeID()}, p.set...)
		held := make([]uint64, len(nodes))
		for i, n := range nodes {
			held[i] = p.held[n]
		}
		out = append(out, shardRefusal{acks: shardAcks{ref: ref, gen: p.gen, nodes: nodes, held: held},
			refusal: p.outcome.Refusal(p.gen, r.srv.nodeID())})
	}
	return out
}

// shardRefusal is one refused round as reported.
type shardRefusal struct {
	acks    shardAcks
	refusal placement.FenceRefusal
}

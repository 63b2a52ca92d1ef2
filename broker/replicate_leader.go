package broker

// The leader's side of replication (replicate.go): for one shard this node leads at one
// generation with a non-empty replica set, one shipper goroutine per follower. Each
// fences the follower (Fence → FenceOk's durable_offset is where shipping starts), then
// reads committed records from the leader's log (core.Engine.ReadReplica: never a
// client's buffer), sends ReplicateRecords through transport.Pool.Pipeline on the
// follower's ordered stream of the shard's log (orderKey) within the shipper's window of bytes in flight,
// feeds every answer to its replica.Shipper and every acknowledgement to the shard's
// replica.Tracker, and hands the quorum mark to core.Engine.Release (Quorum streams; a
// Leader stream releases at its local commit and is shipped all the same).

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"felix/cluster/replica"
	"felix/cluster/transport"
	"felix/core"
	"felix/proto"
	"felix/seglog"
)

// Shipping parameters of the leader (docs/replication.md, "Wiring").
const (
	// replicaWindow bounds the payload bytes in flight per follower (ShipperConfig.Window).
	replicaWindow = 1 << 20
	// replicaTimeout is how long a batch may stay unanswered before it is sent again.
	replicaTimeout = 2 * time.Second
	// replicaRetry paces a fence or a send the transport refused (nothing was sent), and
	// a shipper with nothing to do re-reads the log at least this often.
	replicaRetry = 100 * time.Millisecond
)

// leaderShard is the shippers of one shard at one generation, and its quorum tracker.
type leaderShard struct {
	srv        *Server
	ref        core.ShardRef
	addr       core.LogAddr
	gen        uint64
	replicaSet []string
	quorum     bool

	mu       sync.Mutex // guards tracker and released
	tracker  *replica.Tracker
	released uint64
	// genStart is where this leader's generation began in its log (Engine.LeadEpoch): the
	// rebuild policy's bound.
	genStart uint64

	ctx    context.Context // the shippers'; ended by halt
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startLeader attaches the replica set (a Quorum stream's records log) and starts one
// shipper per follower of the shard's log addr.
func (r *replication) startLeader(parent context.Context, addr core.LogAddr, w leaderWant) (*leaderShard, error) {
	s := r.srv
	ref := addr.Ref()
	if w.quorum && attachesReplicaSet(addr.Log) {
		if err := s.engine.SetReplicated(ref, true); err != nil {
			return nil, err
		}
	}
	genStart, err := s.engine.LeadEpoch(addr, w.gen)
	if err != nil {
		return nil, err
	}
	st, err := s.engine.ReplicaState(addr)
	if err != nil {
		return nil, err
	}
	members := append([]string{s.nodeID()}, w.replicaSet...)
	l := &leaderShard{srv: s, ref: ref, addr: addr, gen: w.gen, replicaSet: w.replicaSet, quorum: w.quorum,
		released: st.Released, genStart: genStart,
		tracker: replica.NewTracker(replica.TrackerConfig{Generation: w.gen, Leader: s.nodeID(), ReplicaSet: members,
			Floor: st.Released, MajorityAck: true})}
	ctx, cancel := context.WithCancel(parent)
	l.ctx, l.cancel = ctx, cancel
	for _, f := range w.replicaSet {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.ship(ctx, f)
		}()
	}
	s.log.Info("replication: shipping", "shard", ref.String(), "generation", w.gen, "replica_set", w.replicaSet, "quorum", w.quorum)
	return l, nil
}

// halt stops the shard's shippers: from its return nothing releases through this
// leaderShard any more (advance checks the context under l.mu) and their followers'
// halts are cleared; the goroutines end on their own (a dial in progress may take its
// handshake timeout) and wait reports when they did.
func (l *leaderShard) halt() {
	l.mu.Lock()
	l.cancel()
	l.mu.Unlock()
	for _, f := range l.replicaSet {
		l.srv.repl.setHalted(haltKey{shard: l.ref, log: l.addr.Log, follower: f}, "", time.Time{})
	}
}

// wait waits for the shard's shippers to end (after halt).
func (l *leaderShard) wait() { l.wg.Wait() }

// advance feeds the tracker (the leader's own durable offset, and a follower's
// acknowledgement when follower != "") and releases up to the quorum mark.
func (l *leaderShard) advance(durable uint64, follower string, acked uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx.Err() != nil {
		return // halted: the shard may have been detached or moved since
	}
	mark := l.tracker.LeaderDurable(durable)
	if follower != "" {
		mark = l.tracker.Acked(follower, l.gen, acked)
	}
	if !l.quorum || mark <= l.released {
		return
	}
	if err := l.srv.engine.ReleaseReplica(l.addr, mark); err != nil { // the records' or the producer keys' mark
		l.srv.log.Warn("replication: release failed", "shard", l.ref.String(), "mark", mark, "err", err)
		return
	}
	l.released = mark
}

// inflight is one request sent to a follower and not answered yet.
type inflight struct {
	corr    uint64
	pending *transport.Pending
	sentAt  time.Time
}

// follower is one shipper goroutine's state.
type follower struct {
	l     *leaderShard
	node  string
	key   haltKey
	stats *followerStats
	sh    *replica.Shipper
	corr  uint64
	queue []inflight
	wake  chan struct{} // the leader's log became durable past what was shipped
	// waiting is the offset a WhenDurable wake-up is registered for (0: none).
	waiting uint64
	// storage is the storage identity this follower's acknowledgements are counted under:
	// the one its connection named at the handshake when it answered the fence
	// (replicate_identity.go); refence is set when an answer came under another one.
	storage transport.StorageID
	refence bool
}

// ship runs one follower's shipping until ctx ends or the follower fences this leader.
func (l *leaderShard) ship(ctx context.Context, node string) {
	s := l.srv
	f := &follower{l: l, node: node, key: haltKey{shard: l.ref, log: l.addr.Log, follower: node}, wake: make(chan struct{}, 1)}
	f.stats = s.repl.statsFor(f.key)
	if _, known := s.peerAddr(node); !known {
		s.log.Warn("replication: no internal address for a follower (SetPlacement peers or FELIX_CLUSTER_PEERS); retrying",
			"shard", l.ref.String(), "follower", node)
	}
	for ctx.Err() == nil {
		start, ok := f.fence(ctx)
		if !ok {
			return
		}
		f.sh = replica.NewShipper(replica.ShipperConfig{Generation: l.gen, Window: replicaWindow, Timeout: replicaTimeout}, start)
		f.queue, f.refence = nil, false
		f.stats.lastAcks, f.stats.lastResends, f.stats.lastGaps, f.stats.lastC, f.stats.lastHalts = 0, 0, 0, 0, 0
		if !f.shipping(ctx) {
			return
		}
	}
}

// shipping runs the shipper until ctx ends or the follower fences this leader (false), or
// an answer came under another storage identity (true: fence it again and start over).
func (f *follower) shipping(ctx context.Context) bool {
	l, s, node := f.l, f.l.srv, f.node
	for ctx.Err() == nil && !f.refence {
		st, err := s.engine.ReplicaState(l.addr)
		if err != nil || st.Role != core.RoleLeader || st.Generation != l.gen {
			if !sleepCtx(ctx, replicaRetry) {
				return false
			}
			continue
		}
		l.advance(st.Durable, "", 0)
		wakeAt := f.send(ctx, st)
		f.observe(st)
		if state, _ := f.sh.State(); state == replica.Fenced {
			s.log.Warn("replication: fenced by a follower: this leader stops shipping to it", "shard", l.ref.String(), "follower", node)
			return false
		}
		f.await(ctx, st, wakeAt)
	}
	return f.refence && ctx.Err() == nil
}

// fence sends Fence until the follower answers FenceOk and returns where shipping starts:
// its durable_offset, capped one below where this generation began; ok=false when ctx ended or the follower knows a newer generation.
func (f *follower) fence(ctx context.Context) (uint64, bool) {
	l := f.l
	for ctx.Err() == nil {
		ans, id, err := f.request(ctx, &proto.Fence{Shard: wireRef(l.ref), Log: l.addr.Log, Generation: l.gen})
		if err == nil {
			switch a := ans.(type) {
			case *proto.FenceOk:
				f.attribute(id)
				// One record below the tail this generation inherited, or lower (as the
				// simulation's leader): there is always a batch to compare and acknowledge,
				// also for a follower that holds all of it already.
				return min(a.DurableOffset, max(l.genStart, 1)-1), true
			case *proto.ReplicateError:
				if a.Code == proto.InternalFencedEpoch {
					l.srv.log.Warn("replication: fence refused: a newer generation", "shard", l.ref.String(), "follower", f.node)
					return 0, false
				}
			case *proto.UnsupportedKind:
				f.l.srv.repl.setHalted(f.key, replica.HaltUnsupported, time.Now())
			}
		}
		if !sleepCtx(ctx, replicaRetry) {
			return 0, false
		}
	}
	return 0, false
}

// request sends msg on the follower's ordered stream and waits for its answer; id is the
// storage identity of the connection that carried it (transport.Pending.PeerStorageID).
func (f *follower) request(ctx context.Context, msg proto.InternalMessage) (proto.InternalMessage, transport.StorageID, error) {
	peer, ok := f.l.srv.peerAddr(f.node)
	if !ok {
		return nil, transport.StorageID{}, errNoPeerAddr
	}
	p, err := f.l.srv.Internal().Pool.Pipeline(ctx, transport.Peer{NodeID: f.node, Addr: peer}, f.orderKey(), msg)
	if err != nil {
		return nil, transport.StorageID{}, err
	}
	ans, err := p.Wait(ctx)
	return ans, p.PeerStorageID(), err
}

var errNoPeerAddr = errors.New("broker: no internal address for the follower")

// replicaStreams is how many ordered streams replication uses per peer and log (well
// under the transport's MaxOrderedStreams of 32 per connection): a shard always takes the
// same one, so its batches stay in order, and shards sharing one are handled in turn.
const replicaStreams = 8

// orderKey is the ordered stream of the follower's batches of this shard's log.
func (f *follower) orderKey() transport.OrderKey {
	h := fnv.New32a()
	_, _ = h.Write([]byte(f.l.ref.String()))
	return transport.OrderKey{Shard: "replication/" + strconv.Itoa(int(h.Sum32()%replicaStreamsOf(f.l.addr.Log))), Log: f.l.addr.Log}
}

// send pipelines what the shipper asks for while its window allows; it returns when to
// look again at the latest (zero: on an answer or a wake-up).
func (f *follower) send(ctx context.Context, st core.ReplicaState) time.Time {
	l := f.l
	for {
		now := time.Now()
		next := f.sh.Next(now.UnixNano(), st.Earliest, st.Committed)
		if next.Kind == replica.SendNothing {
			if rb, ok := f.rebuild(st); ok {
				next = rb
			}
		}
		var msg proto.InternalMessage
		var first, end, bytes uint64
		switch next.Kind {
		case replica.SendNothing:
			if next.WakeAt != 0 {
				return time.Unix(0, next.WakeAt)
			}
			return time.Time{}
		case replica.SendRecords:
			if l.srv.repl.shipHeld(f.node, next.From) {
				return now.Add(replicaRetry)
			}
			var payloads [][]byte
			payloads, end, bytes = f.readBatch(next)
			if len(payloads) == 0 {
				return now.Add(replicaRetry)
			}
			first = next.From
			msg = &proto.ReplicateRecords{Log: l.addr.Log, Shard: wireRef(l.ref), Epoch: l.gen, FirstOffset: first, Payloads: payloads}
		case replica.SendBootstrap:
			msg = &proto.ReplicateBootstrap{Log: l.addr.Log, Shard: wireRef(l.ref), Epoch: l.gen, BaseOffset: next.BaseOffset}
		case replica.SendRebuild:
			msg = &proto.ReplicateRebuild{Shard: wireRef(l.ref), Log: l.addr.Log, Generation: l.gen, BaseOffset: next.BaseOffset}
		}
		peer, ok := l.srv.peerAddr(f.node)
		if !ok {
			return now.Add(replicaRetry)
		}
		p, err := l.srv.Internal().Pool.Pipeline(ctx, transport.Peer{NodeID: f.node, Addr: peer}, f.orderKey(), msg)
		if err != nil {
			return now.Add(replicaRetry) // nothing was sent (shed, backoff, unreachable)
		}
		f.corr++
		f.queue = append(f.queue, inflight{corr: f.corr, pending: p, sentAt: now})
		if next.Kind == replica.SendRecords {
			f.sh.Sent(now.UnixNano(), f.corr, first, end, bytes)
		} else {
			f.sh.SentOffer(now.UnixNano(), f.corr, next.Kind, next.BaseOffset)
		}
	}
}

// rebuild is the ReplicateRebuild the policy allows for a halted follower
// (docs/replication.md, "The shipper", rebuild policy): the shipper allows it (halted as
// diverged or needs_bootstrap, not fenced) and a majority without this follower holds
// the leader's log past where this leader's generation began, or as far as the
// follower's copy can agree with it (DivergedBelow), so discarding that copy leaves every
// acknowledged record on a majority. The new copy starts at the leader's earliest offset.
func (f *follower) rebuild(st core.ReplicaState) (replica.Send, bool) {
	if !f.sh.RebuildAllowed() {
		return replica.Send{}, false
	}
	l := f.l
	l.mu.Lock()
	without := l.tracker.MarkWithout(f.node)
	l.mu.Unlock()
	below := f.sh.DivergedBelow()
	if without <= l.genStart && (below == 0 || without < below) {
		return replica.Send{}, false
	}
	snd := f.sh.Rebuild(st.Earliest)
	if snd.Kind != replica.SendRebuild {
		return replica.Send{}, false
	}
	l.srv.log.Warn("replication: rebuilding a halted follower", "shard", l.ref.String(), "follower", f.node,
		"base_offset", snd.BaseOffset)
	return snd, true
}

// readBatch reads the records [next.From, next.To) of the leader's log, as many as fit
// next.MaxBytes of payload (at least one), encoded for shipping; end is one past the
// last and bytes their payload size.
func (f *follower) readBatch(next replica.Send) (payloads [][]byte, end, bytes uint64) {
	end = next.From
	err := f.l.srv.engine.ReadReplica(f.l.addr, next.From, int(min(next.MaxBytes, 1<<30)), func(r *seglog.Record) bool {
		if r.Offset >= next.To || (len(payloads) > 0 && bytes+uint64(len(r.Payload)) > next.MaxBytes) {
			return false
		}
		payloads = append(payloads, core.AppendReplicaPayload(nil, r))
		bytes += uint64(len(r.Payload))
		end = r.Offset + 1
		return true
	})
	if err != nil {
		f.l.srv.log.Warn("replication: read of the leader's log failed", "shard", f.l.ref.String(), "from", next.From, "err", err)
		return nil, next.From, 0
	}
	return payloads, end, bytes
}

// answer feeds the oldest in-flight request's answer to the shipper (a transport failure
// as Unavailable: the shipper sends those records again after its retry delay), and an
// acknowledgement to the tracker.
func (f *follower) answer(ctx context.Context, st core.ReplicaState) {
	q := f.queue[0]
	f.queue = f.queue[1:]
	ans, err := q.pending.Wait(ctx)
	if err != nil {
		ans = &proto.ReplicateError{Code: proto.InternalUnavailable}
	} else if f.otherIdentity(q.pending.PeerStorageID()) {
		return // not counted: the follower is fenced again (shipping returns)
	}
	acked := f.sh.Answer(time.Now().UnixNano(), q.corr, ans)
	if _, has := f.sh.Acked(); has {
		f.l.advance(st.Durable, f.node, acked)
	}
}

// observe publishes the follower's lag, counters and halt.
func (f *follower) observe(st core.ReplicaState) {
	acked, _ := f.sh.Acked()
	f.stats.lag.Store(clampLag(st.Committed, acked))
	c := f.sh.Stats()
	f.stats.acks.Add(c.Acks - f.stats.lastAcks)
	f.stats.resends.Add(c.Resends - f.stats.lastResends)
	f.stats.gaps.Add(c.Gaps - f.stats.lastGaps)
	f.stats.conflicts.Add(c.Conflicts - f.stats.lastC)
	f.stats.halts.Add(c.Halts - f.stats.lastHalts)
	f.stats.lastAcks, f.stats.lastResends, f.stats.lastGaps, f.stats.lastC, f.stats.lastHalts = c.Acks, c.Resends, c.Gaps, c.Conflicts, c.Halts
	state, reason := f.sh.State()
	if state != replica.Halted {
		reason = ""
	}
	if f.l.srv.repl.setHalted(f.key, reason, time.Now()) {
		if reason != "" {
			f.l.srv.log.Warn("replication: follower halted", "shard", f.l.ref.String(), "log", f.l.addr.Log.String(),
				"follower", f.node, "reason", reason)
		} else {
			f.l.srv.log.Info("replication: follower resumed", "shard", f.l.ref.String(), "log", f.l.addr.Log.String(), "follower", f.node)
		}
	}
}

// await waits for the oldest answer, a wake-up from the leader's log, wakeAt, the oldest
// request's timeout, or replicaRetry, whichever comes first; then handles the answers
// that arrived.
func (f *follower) await(ctx context.Context, st core.ReplicaState, wakeAt time.Time) {
	if f.waiting == 0 || f.waiting <= st.Durable {
		f.waiting = max(st.Committed, st.Durable) + 1
		wake := f.wake
		if err := f.l.srv.engine.WhenDurable(f.l.addr, f.waiting, func() {
			select {
			case wake <- struct{}{}:
			default:
			}
		}); err != nil {
			f.waiting = 0
		}
	}
	deadline := time.Now().Add(replicaRetry)
	if !wakeAt.IsZero() && wakeAt.Before(deadline) {
		deadline = wakeAt
	}
	var answered <-chan struct{}
	if len(f.queue) > 0 {
		answered = f.queue[0].pending.Done()
		if t := f.queue[0].sentAt.Add(replicaTimeout); t.Before(deadline) {
			deadline = t
		}
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return
	case <-answered:
	case <-f.wake:
		f.waiting = 0
	case <-timer.C:
	}
	for len(f.queue) > 0 && isDone(f.queue[0].pending) && !f.refence {
		f.answer(ctx, st)
	}
}

func isDone(p *transport.Pending) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// sleepCtx waits d or until ctx ends; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

package broker

// The follower's side of replication (replicate.go): one handler for the records and
// bootstrap kinds of every log (replicate_logs.go), ReplicateRebuild (24) and Fence (25),
// the shard kind given by the log. It builds cluster/replica's FollowerState from the engine
// (core.Engine.ReplicaState and a ReadReplica-backed Reader), asks DecideFollower, carries
// out the action on the owning core (core.Engine.ApplyReplicated, TruncateReplica,
// ResetReplica, SetReplicaEpochs, WhenDurable) and answers exactly what the decision
// says, once what it acknowledges is fsynced.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"felix/cluster/replica"
	"felix/core"
	"felix/proto"
	"felix/seglog"
)

// followerMem is a follower log's volatile state: the ballot it accepted at its current
// generation when the table named no leader yet (a roll-forward), and how far a newer
// generation's batches were compared (replica.FollowerState.Compared).
type followerMem struct {
	ballot   replica.Ballot
	compared replica.Compared
}

// replicaWait bounds how long a handler waits for its fdatasync: past it the answer is
// Unavailable and the leader resends.
const replicaWait = 5 * time.Second

// replicaTarget is what a replication request names.
type replicaTarget struct {
	ref   core.ShardRef
	log   proto.ReplicaLog
	epoch uint64
}

// targetOf reads the shard, log and epoch of a replication request; ok=false for
// anything else or a shard number out of range.
func targetOf(req proto.InternalMessage) (replicaTarget, bool) {
	var sr proto.ShardRef
	var t replicaTarget
	switch m := req.(type) {
	case *proto.ReplicateRecords:
		sr, t.log, t.epoch = m.Shard, m.Log, m.Epoch
	case *proto.ReplicateBootstrap:
		sr, t.log, t.epoch = m.Shard, m.Log, m.Epoch
	case *proto.ReplicateRebuild:
		sr, t.log, t.epoch = m.Shard, m.Log, m.Generation
	case *proto.Fence:
		sr, t.log, t.epoch = m.Shard, m.Log, m.Generation
	default:
		return t, false
	}
	if uint64(sr.Shard) > math.MaxInt32 {
		return t, false
	}
	t.ref = core.ShardRef{Kind: shardKindOf(t.log), Name: core.StreamName{Tenant: string(sr.Tenant),
		Namespace: string(sr.Namespace), Stream: string(sr.Name)}, Shard: int(sr.Shard)}
	return t, true
}

// wireRef is ref as FLXI names it.
func wireRef(ref core.ShardRef) proto.ShardRef {
	return proto.ShardRef{Tenant: []byte(ref.Name.Tenant), Namespace: []byte(ref.Name.Namespace),
		Name: []byte(ref.Name.Stream), Shard: uint32(ref.Shard)}
}

func replicateError(corr uint64, code proto.InternalCode) *proto.ReplicateError {
	return &proto.ReplicateError{CorrelationID: corr, Code: code}
}

// handleReplicate is the transport.Handler of the replication kinds.
func (s *Server) handleReplicate(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
	if fp, ok := req.(*proto.FencePosition); ok {
		return s.handleFencePosition(ctx, peer, fp)
	}
	corr := req.Correlation()
	t, ok := targetOf(req)
	if !ok {
		return replicateError(corr, proto.InternalMalformed)
	}
	addr := logAddr(t.ref, t.log)
	a, named := s.owners.Lookup(t.ref)
	member := named && containsNode(a.ReplicaSet, s.nodeID())
	if !member && (!named || a.Generation < t.epoch) {
		// Not a member by a placement older than the sender's generation, or by none (it
		// has just started and not loaded its table, or the table has not moved yet): this
		// broker cannot say it is outside the replica set, so the sender retries shortly
		// (seed, "Errors": StaleRoute, the responder is behind). Unauthorized, which halts
		// the sender's shipping for good, is the answer only of a table at or past it.
		return replicateError(corr, proto.InternalStaleRoute)
	}
	st, err := s.engine.ReplicaState(addr)
	switch {
	case errors.Is(err, core.ErrInvalid):
		return &proto.UnsupportedKind{CorrelationID: corr, RefusedKind: req.Kind()} // a log not replicated yet
	case err != nil && !member:
		return replicateError(corr, proto.InternalUnauthorized)
	case errors.Is(err, core.ErrNotHere), errors.Is(err, core.ErrNotFound):
		return replicateError(corr, proto.InternalStaleRoute) // in the replica set, not open here yet
	case err != nil:
		return replicateError(corr, storageCode(err))
	case st.Role != core.RoleFollower:
		if t.epoch > st.Generation {
			return replicateError(corr, proto.InternalStaleRoute)
		}
		return replicateError(corr, proto.InternalFencedEpoch) // this broker leads it at that generation or later
	}
	fs, mem := s.repl.followerState(s, addr, st, a, member)
	d := replica.DecideFollower(&fs, peer, req.Kind(), req)
	if writes(d.Action) && t.epoch != st.Generation {
		// Accepted at a generation the shard is not open at here yet (after a fence): the
		// core stores only at the shard's generation, so the leader retries shortly.
		return replicateError(corr, proto.InternalStaleRoute)
	}
	if d.Ballot != nil && *d.Ballot != fs.Ballot {
		b := seglog.Ballot{Generation: d.Ballot.Generation, Leader: d.Ballot.Leader}
		if err := s.engine.SetReplicaBallot(addr, b); err != nil {
			// A fence this follower cannot keep across a restart is not accepted.
			s.log.Warn("replication: ballot not written", "log", addr.String(), "leader", peer, "err", err)
			return replicateError(corr, storageCode(err))
		}
	}
	ans := s.carryOut(ctx, addr, st.Generation, d)
	if d.Compared != nil || d.Ballot != nil {
		s.repl.mu.Lock()
		if d.Compared != nil {
			mem.compared = *d.Compared
		}
		if d.Ballot != nil {
			mem.ballot = *d.Ballot
		}
		s.repl.mu.Unlock()
	}
	if d.Action == replica.ActConflict || d.Action == replica.ActStorageFailed {
		s.log.Warn("replication: refused a batch", "shard", t.ref.String(), "log", t.log.String(), "leader", peer,
			"action", d.Action.String(), "reason", d.Reason)
	}
	return ans
}

// handleFencePosition serves FencePosition (34): decided and carried out exactly as the
// Fence (25) it carries, a FenceOk answered as FencePositionOk with the log's last
// generation below the durable_offset it answers (every other answer as it is).
func (s *Server) handleFencePosition(ctx context.Context, peer string, fp *proto.FencePosition) proto.InternalMessage {
	ans := s.handleReplicate(ctx, peer, &fp.Fence)
	ok, isOk := ans.(*proto.FenceOk)
	if !isOk {
		return ans
	}
	t, _ := targetOf(&fp.Fence)
	st, err := s.engine.ReplicaState(logAddr(t.ref, t.log))
	if err != nil {
		return replicateError(ok.CorrelationID, storageCode(err))
	}
	return &proto.FencePositionOk{FenceOk: *ok, LastGeneration: lastGenerationBelow(st, ok.DurableOffset, math.MaxUint64)}
}

// writes reports whether a follower action changes the log.
func writes(a replica.Action) bool {
	switch a {
	case replica.ActStore, replica.ActTruncateStore, replica.ActPlace, replica.ActRebuild:
		return true
	}
	return false
}

func containsNode(set []string, n string) bool {
	for _, m := range set {
		if m == n {
			return true
		}
	}
	return false
}

// storageCode is the FLXI code of an engine error while serving a replication request.
func storageCode(err error) proto.InternalCode {
	switch {
	case errors.Is(err, core.ErrStorageFailed):
		return proto.InternalStorageFailed
	case errors.Is(err, core.ErrOverloaded), errors.Is(err, seglog.ErrBusy):
		return proto.InternalOverload
	}
	return proto.InternalUnavailable
}

// followerState builds the decider's view of addr from the engine's state st and the
// table's assignment a (held under r.mu only while reading mem).
func (r *replication) followerState(s *Server, addr core.LogAddr, st core.ReplicaState, a Assignment, member bool) (replica.FollowerState, *followerMem) {
	r.mu.Lock()
	mem := r.followed[addr]
	if mem == nil {
		r.mu.Unlock()
		stored := storedBallot(s, addr) // the engine's core, not under r.mu
		r.mu.Lock()
		if mem = r.followed[addr]; mem == nil {
			mem = &followerMem{ballot: stored}
			r.followed[addr] = mem
		}
	}
	ballot := replica.Ballot{Generation: st.Generation}
	switch {
	case mem.ballot.Generation > st.Generation:
		ballot = mem.ballot // a fence accepted a newer generation before the reconciler moved the shard
	case a.Generation == st.Generation && a.Leader != "":
		ballot.Leader = a.Leader
	case mem.ballot.Generation == st.Generation:
		ballot.Leader = mem.ballot.Leader
	}
	compared := mem.compared
	r.mu.Unlock()
	eps := make([]replica.Epoch, len(st.Epochs))
	for i, e := range st.Epochs {
		eps[i] = replica.Epoch{Generation: e.Generation, StartOffset: e.StartOffset}
	}
	return replica.FollowerState{Kind: addr.Kind, Log: addr.Log, Member: member,
		HasLog: st.Tail > 0 || st.Earliest > 0, Start: st.Earliest, Tail: st.Tail, Durable: st.Durable,
		Epochs: eps, Ballot: ballot, Records: replicaReader{e: s.engine, addr: addr}, Compared: compared}, mem
}

// storedBallot is the ballot file of addr's log (core.Engine.ReplicaBallot) as the
// follower's memory starts from: a fence accepted before a restart still refuses the
// leaders it fenced out. Unreadable counts as empty (the file is not versioned with the
// segments; an older build never wrote it).
func storedBallot(s *Server, addr core.LogAddr) replica.Ballot {
	b, err := s.engine.ReplicaBallot(addr)
	if err != nil {
		return replica.Ballot{}
	}
	return replica.Ballot{Generation: b.Generation, Leader: b.Leader}
}

// replicaReader is the decider's Reader over the follower's stored records, each payload
// in the replicated encoding (core.AppendReplicaPayload) so that the overlap comparison
// is over the bytes the leader ships.
type replicaReader struct {
	e    *core.Engine
	addr core.LogAddr
}

// ReadRecords returns the payloads of [from, to).
func (rr replicaReader) ReadRecords(from, to uint64) ([][]byte, error) {
	var out [][]byte
	for next := from; next < to; {
		n := 0
		err := rr.e.ReadReplica(rr.addr, next, 4<<20, func(r *seglog.Record) bool {
			if r.Offset >= to {
				return false
			}
			out = append(out, core.AppendReplicaPayload(nil, r))
			next, n = r.Offset+1, n+1
			return true
		})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: records [%d, %d) of %v not readable", core.ErrStorageFailed, next, to, rr.addr)
		}
	}
	return out, nil
}

// carryOut performs d's action on the core and returns the answer to send: d.Answer once
// what it acknowledges is on disk, or a refusal when that failed.
func (s *Server) carryOut(ctx context.Context, addr core.LogAddr, gen uint64, d replica.Decision) proto.InternalMessage {
	corr := d.Answer.Correlation()
	var err error
	switch d.Action {
	case replica.ActTruncateStore:
		if err = s.engine.TruncateReplica(addr, gen, d.TruncateAt); err == nil {
			err = s.storeReplicated(ctx, addr, gen, d)
		}
	case replica.ActStore:
		err = s.storeReplicated(ctx, addr, gen, d)
	case replica.ActAlreadyStored:
		if ok, isOk := d.Answer.(*proto.ReplicateOk); isOk && d.Sync {
			err = s.waitDurable(ctx, addr, ok.DurableOffset)
		}
	case replica.ActPlace, replica.ActRebuild:
		err = s.engine.ResetReplica(addr, gen, d.PlaceAt)
	}
	if err != nil {
		s.log.Warn("replication: follower action failed", "log", addr.String(), "action", d.Action.String(), "err", err)
		if errors.Is(err, errBadPayload) {
			return replicateError(corr, proto.InternalMalformed)
		}
		return replicateError(corr, storageCode(err))
	}
	return d.Answer
}

// errBadPayload: a payload of the batch is not a record in the replicated encoding at its
// offset (answered Malformed; nothing is stored).
var errBadPayload = errors.New("broker: bad replicated payload")

// storeReplicated writes d's epochs, then appends d.Store at d.StoreAt verbatim and waits
// for the fdatasync covering it.
func (s *Server) storeReplicated(ctx context.Context, addr core.LogAddr, gen uint64, d replica.Decision) error {
	recs := make([]seglog.Record, len(d.Store))
	for i, p := range d.Store {
		r, err := core.DecodeReplicaPayload(p)
		if err != nil || r.Offset != d.StoreAt+uint64(i) {
			return fmt.Errorf("%w: payload %d of the batch at %d: %v", errBadPayload, i, d.StoreAt, err)
		}
		recs[i] = r
	}
	if d.Epochs != nil {
		eps := make([]seglog.Epoch, len(d.Epochs))
		for i, e := range d.Epochs {
			eps[i] = seglog.Epoch{Generation: e.Generation, StartOffset: e.StartOffset}
		}
		if err := s.engine.SetReplicaEpochs(addr, gen, eps); err != nil {
			return err
		}
	}
	if len(recs) == 0 {
		return nil
	}
	type result struct {
		durable uint64
		err     error
	}
	done := make(chan result, 1)
	if err := s.engine.ApplyReplicated(addr, gen, d.StoreAt, recs, func(durable uint64, err error) { done <- result{durable, err} }); err != nil {
		return err
	}
	timer := time.NewTimer(replicaWait)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("%w: no fdatasync of %v within %v", core.ErrOverloaded, addr, replicaWait)
	}
}

// waitDurable waits until addr's durable_offset reaches offset.
func (s *Server) waitDurable(ctx context.Context, addr core.LogAddr, offset uint64) error {
	done := make(chan struct{})
	if err := s.engine.WhenDurable(addr, offset, func() { close(done) }); err != nil {
		return err
	}
	timer := time.NewTimer(replicaWait)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return fmt.Errorf("%w: no fdatasync of %v within %v", core.ErrOverloaded, addr, replicaWait)
	}
}

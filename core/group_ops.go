package core

// Consumer groups on durable stream shards (docs/groups.md; spec/client-protocol.md
// §8.3). The state machine of one shard's groups is core/groups; package core keeps
// one groupShard per stream shard that has been used by a group operation, in the
// core's groupShards slot, with the shard's two companion logs (seglog "groups" and
// "dead-letters" directories), and drives it: appends its effects, releases answers
// once their records are durable, expires leases and answers parked polls from one
// core timer.
//
// The group code of package core is in four files:
//
//	group_ops.go    the requests and the Engine methods: GroupPoll, GroupAck, GroupNack, DeadLetters, Redrive, CreateGroup
//	group_poll.go   a poll on its core: leasing, parking, reading the leased records, giving back what does not fit
//	group_shard.go  one stream shard's group state: companion logs, replay, commit order, failure, close, compaction
//	group_table.go  a core's table of group shards and its timer: lease expiry, parked polls' deadlines and retries
//
// This file holds the request types, the Engine methods, and groupFuncOp, the one
// operation type behind every group call but the poll.

import (
	"errors"
	"fmt"
	"time"

	"felix/core/groups"
)

// GroupRecord is one record handed out by GroupPoll. Payload is a copy owned by the
// caller.
type GroupRecord struct {
	Offset          uint64
	Delivery        uint32 // 1 for the first delivery
	TimestampMicros int64
	Payload         []byte
}

// GroupPollRequest is one consumer's poll of a group on one durable stream shard.
type GroupPollRequest struct {
	Stream     StreamName
	Shard      int
	Group      string
	Consumer   uint64        // chosen by the caller, e.g. one per connection and group
	MaxRecords int           // 1..; capped by the group's max records per poll
	MaxWait    time.Duration // 0: answer at once, possibly empty; else park up to this long
	// MaxBytes bounds the payload bytes of one answer (0: no bound). The records
	// leased beyond it are given back (groups.Shard.Return: ready at once, delivery
	// count unchanged) for the next poll; the first record is handed out even when
	// it alone is larger. The broker derives it from its frame size, since an answer
	// too large to send would be lost every time it is redelivered.
	MaxBytes int
}

// GroupAckRequest acks (GroupAck) or nacks (GroupNack) leased records. A Ref with
// Delivery 0 means the consumer's current lease.
type GroupAckRequest struct {
	Stream   StreamName
	Shard    int
	Group    string
	Consumer uint64
	Refs     []groups.Ref
	// DelayMillis is a nack's redelivery delay; negative = the group's default.
	// Ignored by GroupAck.
	DelayMillis int64
}

// DeadLettersRequest lists a group's dead letters with offset >= From, at most Limit.
type DeadLettersRequest struct {
	Stream StreamName
	Shard  int
	Group  string
	From   uint64
	Limit  int
}

// RedriveRequest puts dead letters back into delivery.
type RedriveRequest struct {
	Stream  StreamName
	Shard   int
	Group   string
	Offsets []uint64
}

// GroupPoll leases up to req.MaxRecords records of the group to req.Consumer
// (docs/groups.md). The group is created on first use. With no record available and
// req.MaxWait > 0 the poll is parked on the core (which keeps serving) and answered
// when records commit or MaxWait passes (then with no records). done runs on the
// shard's core, after the delivery records are durable, and must not block.
// Errors (here or in done): ErrNotFound, ErrInvalid (in-memory stream, bad request,
// wrapping the groups error), ErrNotHere (the shard is not open here, or is a
// follower), ErrMoved (a parked poll whose shard changed role or closed:
// SetRole, CloseShard), ErrOverloaded, ErrClosed, ErrStorageFailed-wrapped.
func (e *Engine) GroupPoll(req GroupPollRequest, done func([]GroupRecord, error)) error {
	if req.MaxRecords < 1 || req.MaxWait < 0 || req.MaxBytes < 0 {
		return fmt.Errorf("%w: max records %d, max wait %v, max bytes %d", ErrInvalid, req.MaxRecords, req.MaxWait, req.MaxBytes)
	}
	s, err := e.groupStreamShard(req.Stream, req.Shard)
	if err != nil {
		return err
	}
	return e.post(s.c, message{kind: msgOp, op: &groupPollOp{shard: s, req: req, done: done}})
}

// GroupAck acknowledges leased records. done receives nil, or an error wrapping a
// *groups.OffsetsError for refused offsets (groups.ErrLeaseExpired /
// groups.ErrNotLeased; the other offsets were acked), groups.ErrUnknownGroup, or the
// errors of GroupPoll. It runs after the ack's cursor record is durable.
func (e *Engine) GroupAck(req GroupAckRequest, done func(error)) error {
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		return gs.sm.Ack(req.Group, groups.ConsumerID(req.Consumer), req.Refs, now)
	}, done)
}

// GroupNack gives leased records back for redelivery after req.DelayMillis (or
// dead-letters those that reached max deliveries). Errors as GroupAck.
func (e *Engine) GroupNack(req GroupAckRequest, done func(error)) error {
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		return gs.sm.Nack(req.Group, groups.ConsumerID(req.Consumer), req.Refs, req.DelayMillis, now)
	}, done)
}

// DeadLetters lists dead letters of a group in offset order; done receives them and
// the offset to continue from (spec/client-protocol.md §8.3 next_from).
// Errors: groups.ErrUnknownGroup, groups.ErrInvalidRequest, and those of GroupPoll.
func (e *Engine) DeadLetters(req DeadLettersRequest, done func([]groups.DeadLetter, uint64, error)) error {
	var list []groups.DeadLetter
	var next uint64
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, _ int64) (groups.Token, error) {
		var err error
		list, next, err = gs.sm.DeadLetters(nil, req.Group, req.From, req.Limit)
		return gs.sm.CurrentToken(), err
	}, func(err error) { done(list, next, err) })
}

// Redrive puts dead letters back into delivery; done receives how many were redriven
// and an error wrapping *groups.OffsetsError (groups.ErrNotDead) for the others.
func (e *Engine) Redrive(req RedriveRequest, done func(int, error)) error {
	n := 0
	return e.groupOp(req.Stream, req.Shard, func(gs *groupShard, now int64) (groups.Token, error) {
		var tok groups.Token
		var err error
		n, tok, err = gs.sm.Redrive(req.Group, req.Offsets, now)
		return tok, err
	}, func(err error) { done(n, err) })
}

// CreateGroup creates a group on one stream shard with cfg (zero fields take the
// defaults of docs/groups.md), starting at the shard's oldest retained offset. An
// existing group is left as it is (nil). done runs once the create record is durable.
// Errors: ErrInvalid wrapping groups.ErrInvalidGroupName / ErrInvalidRequest /
// ErrGroupIDCollision, and those of GroupPoll.
func (e *Engine) CreateGroup(name StreamName, shard int, group string, cfg groups.GroupConfig, done func(error)) error {
	return e.groupOp(name, shard, func(gs *groupShard, _ int64) (groups.Token, error) {
		return gs.sm.CreateGroup(group, cfg, gs.stream.records.EarliestOffset())
	}, done)
}

// groupStreamShard returns the durable stream shard a group operation targets.
func (e *Engine) groupStreamShard(name StreamName, shard int) (*streamShard, error) {
	meta := e.lookup(name)
	if meta == nil {
		return nil, ErrNotFound
	}
	if shard < 0 || shard >= len(meta.shards) {
		return nil, fmt.Errorf("%w: %s has no shard %d", ErrNotFound, name, shard)
	}
	if !meta.spec.Durable {
		return nil, fmt.Errorf("%w: consumer groups need a durable stream (%s)", ErrInvalid, name)
	}
	if p := meta.places[shard]; p.role != RoleLeader {
		return nil, notHere(ShardRef{Kind: ShardStream, Name: name, Shard: shard}, p.role)
	}
	return meta.shards[shard], nil
}

// groupOp posts fn to the shard's core; done gets fn's error once fn's token is durable.
func (e *Engine) groupOp(name StreamName, shard int, fn func(*groupShard, int64) (groups.Token, error), done func(error)) error {
	s, err := e.groupStreamShard(name, shard)
	if err != nil {
		return err
	}
	return e.post(s.c, message{kind: msgOp, op: &groupFuncOp{shard: s, fn: fn, done: done}})
}

type groupFuncOp struct {
	shard *streamShard
	fn    func(*groupShard, int64) (groups.Token, error)
	done  func(error)
}

func (o *groupFuncOp) fail(err error) { o.done(err) }

func (o *groupFuncOp) apply(c *core) {
	if err := c.streamRefusal(o.shard); err != nil {
		o.done(err)
		return
	}
	gs, err := c.groupShardOf(o.shard)
	if err != nil {
		o.done(err)
		return
	}
	if gs.promoting.park(func() { o.apply(c) }) { // replicate_promote.go
		return
	}
	tok, opErr := o.fn(gs, c.wallMillis())
	if opErr != nil && tok == 0 {
		o.done(groupError(opErr))
		return
	}
	gs.after(tok, func(err error) {
		if err == nil {
			err = groupError(opErr)
		}
		o.done(err)
	})
	gs.flush()
	if len(gs.parked) > 0 { // a nack or redrive may have made records ready
		gs.retryParked(c.clock.MonoNanos())
		c.groupTable().arm()
	}
}

// groupError maps state-machine errors onto the engine's sentinels where one fits;
// the groups sentinel stays reachable with errors.Is.
func groupError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, groups.ErrInvalidRequest), errors.Is(err, groups.ErrInvalidGroupName),
		errors.Is(err, groups.ErrGroupIDCollision):
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return err
}

func (c *core) wallMillis() int64 { return c.clock.WallMicros() / 1000 }

package core

// A group poll on its core (the overview of groups is at the top of group_ops.go):
// groupPollOp leases records from the state machine or parks until records commit or
// its MaxWait passes, then reads the leased payloads (readLeased) within MaxBytes and
// gives back the leases the answer cannot carry.

import (
	"errors"

	"felix/core/groups"
)

// groupPollOp is a GroupPoll on its core; parked in its groupShard while it waits.
type groupPollOp struct {
	shard    *streamShard
	req      GroupPollRequest
	done     func([]GroupRecord, error)
	gs       *groupShard
	deadline int64 // MonoNanos when a parked poll answers empty
	leases   []groups.Lease
}

func (o *groupPollOp) fail(err error) { o.done(nil, err) }

func (o *groupPollOp) apply(c *core) {
	if err := c.streamRefusal(o.shard); err != nil {
		o.done(nil, err)
		return
	}
	gs, err := c.groupShardOf(o.shard)
	if err != nil {
		o.done(nil, err)
		return
	}
	if gs.promoting.park(func() { o.apply(c) }) { // replicate_promote.go
		return
	}
	o.gs = gs
	o.deadline = c.clock.MonoNanos() + int64(o.req.MaxWait)
	if !o.try(o.req.MaxWait == 0) {
		gs.parked = append(gs.parked, o)
		c.groupTable().arm()
	}
}

// try polls the state machine. It reports whether the poll is answered: records
// were leased, an error occurred, or final (answer even when empty).
func (o *groupPollOp) try(final bool) bool {
	gs, log := o.gs, o.shard.records
	leases, tok, err := gs.sm.Poll(o.leases[:0], groups.PollRequest{
		Group:      o.req.Group,
		Consumer:   groups.ConsumerID(o.req.Consumer),
		MaxRecords: o.req.MaxRecords,
		NowMillis:  gs.c.wallMillis(),
		Window:     groups.Window{Earliest: log.EarliestOffset(), End: o.shard.releasedOffset()},
	})
	o.leases = leases
	if err != nil {
		o.done(nil, groupError(err))
		return true
	}
	if len(leases) == 0 && !final {
		gs.flush() // a create record, if the poll created the group
		return false
	}
	gs.after(tok, o.answer)
	gs.flush()
	return true
}

// answer reads the leased records' payloads and hands them out (their delivery
// records are durable now). Leases beyond req.MaxBytes are given back for the next
// poll, which a parked poll may be (the group timer retries those).
func (o *groupPollOp) answer(err error) {
	if err != nil {
		o.done(nil, err)
		return
	}
	recs, used, err := readLeased(o.shard.records, o.leases, o.req.MaxBytes)
	if err != nil {
		o.done(nil, storageError("read group records", err))
		return
	}
	if used < len(o.leases) {
		o.giveBack(o.leases[used:])
	}
	o.done(recs, nil)
}

// giveBack returns leases the answer could not carry to the group (groups.Shard.Return).
func (o *groupPollOp) giveBack(leases []groups.Lease) {
	gs := o.gs
	if gs.failed != nil {
		return
	}
	refs := make([]groups.Ref, len(leases))
	for i, l := range leases {
		refs[i] = groups.Ref{Offset: l.Offset, Delivery: l.Delivery}
	}
	if _, err := gs.sm.Return(o.req.Group, groups.ConsumerID(o.req.Consumer), refs, gs.c.wallMillis()); err != nil {
		return // the group is gone: nothing is leased any more
	}
	gs.c.groupTable().arm()
}

// readLeasedFirstBuf bounds the first allocation of readLeased's buffer: sizing it
// from the first record times the lease count reserved up to 256 × 16 MiB once.
const readLeasedFirstBuf = 4 << 20

// readLeased reads the payloads of leases (one log read per run of consecutive
// offsets) into one buffer, so a poll allocates a few times, not once per record.
// Records deleted by retention since they were leased are left out. With maxBytes > 0
// it stops before the first record that would take the payload bytes past maxBytes
// (the first record is always read); used is the number of leases covered, the
// others are to be given back.
func readLeased(log shardLog, leases []groups.Lease, maxBytes int) (recs []GroupRecord, used int, err error) {
	recs = make([]GroupRecord, 0, len(leases))
	ends := make([]int, 0, len(leases))
	var buf []byte
	full := false
	i := 0
	for i < len(leases) && !full {
		j := i + 1
		for j < len(leases) && leases[j].Offset == leases[j-1].Offset+1 {
			j++
		}
		k := i
		err := log.ReadCommitted(leases[i].Offset, 1<<30, func(off uint64, ts int64, p []byte) bool {
			if off != leases[k].Offset {
				return false
			}
			if maxBytes > 0 && len(recs) > 0 && len(buf)+len(p) > maxBytes {
				full = true
				return false
			}
			if buf == nil { // one buffer per poll, sized for records like the first
				size := min(len(p)*len(leases), max(readLeasedFirstBuf, len(p)))
				if maxBytes > 0 {
					size = min(size, max(maxBytes, len(p)))
				}
				buf = make([]byte, 0, size)
			}
			buf = append(buf, p...)
			ends = append(ends, len(buf))
			recs = append(recs, GroupRecord{Offset: off, Delivery: leases[k].Delivery, TimestampMicros: ts})
			k++
			return k < j
		})
		var trimmed *trimmedError
		if err != nil && !errors.As(err, &trimmed) {
			return nil, 0, err
		}
		if full {
			i = k // leases[k] did not fit
		} else {
			i = j
		}
	}
	start := 0
	for r := range recs {
		recs[r].Payload = buf[start:ends[r]:ends[r]]
		start = ends[r]
	}
	return recs, min(i, len(leases)), nil
}

package groups

import (
	"fmt"
	"slices"
)

// Options configure a Shard.
type Options struct {
	// Defaults is the configuration of groups that Poll creates on first use.
	// Zero fields take the package defaults (see GroupConfig).
	Defaults GroupConfig
}

// Shard is the consumer-group state of one stream shard: every group, its leases,
// delivery counts and dead letters. Only the owning core calls it; it is not safe for
// concurrent use. Build one with NewShard (empty logs) or Replayer.Finish.
type Shard struct {
	defaults GroupConfig
	groups   map[uint64]*group
	byName   map[string]*group
	dlEnd    uint64 // next offset of the dead-letter log
	fx       effectsBuffer
	keys     []uint64 // scratch for DeadLetters
}

// NewShard returns the state of a shard whose cursor and dead-letter logs are empty and
// whose dead-letter log's next offset is deadLetterLogEnd. Errors wrap ErrInvalidRequest
// when opts.Defaults is out of bounds.
func NewShard(opts Options, deadLetterLogEnd uint64) (*Shard, error) {
	d, err := opts.Defaults.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Shard{
		defaults: d,
		groups:   make(map[uint64]*group),
		byName:   make(map[string]*group),
		dlEnd:    deadLetterLogEnd,
		fx:       effectsBuffer{batch: 1},
	}, nil
}

// Window is the readable part of the stream shard's records log: offsets [Earliest, End).
// End is the committed offset (never deliver a record that could still be lost);
// Earliest is the oldest retained offset (retention may have deleted what is below).
type Window struct {
	Earliest uint64
	End      uint64
}

// Lease is one record handed to a consumer by Poll.
type Lease struct {
	Offset         uint64 // offset in the records log; the core reads its payload
	Delivery       uint32 // 1 for the first delivery, +1 per redelivery
	DeadlineMillis int64  // Unix ms when the lease expires unless acked or nacked
}

// PollRequest is one consumer's poll of one group.
type PollRequest struct {
	Group      string
	Consumer   ConsumerID
	MaxRecords int   // 1..; capped at the group's MaxPollRecords
	NowMillis  int64 // Unix ms
	Window     Window
}

// Ref names one leased record in an Ack or Nack. Delivery 0 means "the lease this
// consumer holds now"; a non-zero Delivery must equal the lease's delivery number, so a
// stale ack from an earlier lease of the same consumer is refused too.
type Ref struct {
	Offset   uint64
	Delivery uint32
}

// CreateGroup creates the group name with cfg (zero fields take the shard's defaults),
// starting at offset start of the records log. It is a no-op when the group exists
// (its configuration is not changed). Errors: ErrInvalidGroupName, ErrInvalidRequest,
// ErrGroupIDCollision. The create record is in the returned token's batch.
func (s *Shard) CreateGroup(name string, cfg GroupConfig, start uint64) (Token, error) {
	if _, err := s.ensureGroup(name, cfg, start); err != nil {
		return 0, err
	}
	return s.fx.batch, nil
}

// merged fills cfg's zero fields from the shard defaults.
func (s *Shard) merged(cfg GroupConfig) (GroupConfig, error) {
	if cfg.VisibilityTimeoutMillis == 0 {
		cfg.VisibilityTimeoutMillis = s.defaults.VisibilityTimeoutMillis
	}
	if cfg.MaxDeliveries == 0 {
		cfg.MaxDeliveries = s.defaults.MaxDeliveries
	}
	if cfg.RedeliveryDelayMillis == 0 {
		cfg.RedeliveryDelayMillis = s.defaults.RedeliveryDelayMillis
	}
	if cfg.MaxPollRecords == 0 {
		cfg.MaxPollRecords = s.defaults.MaxPollRecords
	}
	return cfg.withDefaults()
}

func (s *Shard) ensureGroup(name string, cfg GroupConfig, start uint64) (*group, error) {
	if g := s.byName[name]; g != nil {
		return g, nil
	}
	if err := checkGroupName(name); err != nil {
		return nil, err
	}
	cfg, err := s.merged(cfg)
	if err != nil {
		return nil, err
	}
	id := GroupID(name)
	if other := s.groups[id]; other != nil {
		return nil, fmt.Errorf("%w: %q and %q", ErrGroupIDCollision, name, other.name)
	}
	g := newGroup(name, cfg, start)
	s.addGroup(g)
	s.stageCursor(func(b []byte) []byte { return AppendCreateRecord(b, name, start, cfg, s.dlEnd) })
	return g, nil
}

func (s *Shard) addGroup(g *group) {
	s.groups[g.id] = g
	s.byName[g.name] = g
}

// lookup returns the named group or ErrUnknownGroup.
func (s *Shard) lookup(name string) (*group, error) {
	if g := s.byName[name]; g != nil {
		return g, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, name)
}

// Groups returns the names of the shard's groups, sorted.
func (s *Shard) Groups() []string {
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// DeadLetterLogEnd returns the next offset of the dead-letter log, counting staged records.
func (s *Shard) DeadLetterLogEnd() uint64 { return s.dlEnd }

// Poll leases up to req.MaxRecords records of req.Group to req.Consumer and appends them
// to dst: first offsets waiting for redelivery whose time has come (oldest ready time
// first), then never-delivered offsets of req.Window in offset order. Expired leases of
// the group are processed first (see Tick). The group is created with the shard's
// defaults, starting at req.Window.Earliest, when it does not exist.
//
// The deliveries are written to the cursor log (delivery counts are durable); the core
// should hand the records to the consumer once Durable(token) holds, so a restart
// never under-counts a delivery. Pending offsets below req.Window.Earliest (deleted by
// retention) are dropped. An empty result is not an error: the core parks the poll
// until the window grows or NextReady passes. Errors: ErrInvalidGroupName,
// ErrInvalidRequest (MaxRecords < 1), ErrGroupIDCollision.
func (s *Shard) Poll(dst []Lease, req PollRequest) ([]Lease, Token, error) {
	if req.MaxRecords < 1 {
		return dst, 0, fmt.Errorf("%w: max records %d", ErrInvalidRequest, req.MaxRecords)
	}
	g, err := s.ensureGroup(req.Group, GroupConfig{}, req.Window.Earliest)
	if err != nil {
		return dst, 0, err
	}
	s.expire(g, req.NowMillis)
	limit := min(req.MaxRecords, int(g.cfg.MaxPollRecords))
	rec := recordBuilder{s: s, g: g, kind: KindDeliver}
	deadline := req.NowMillis + g.cfg.VisibilityTimeoutMillis
	n := 0
	for n < limit && len(g.ready) > 0 && g.ready[0].at <= req.NowMillis {
		t := g.ready.pop()
		e, ok := g.entries[t.offset]
		if !current(e, ok, t, statePending) {
			continue
		}
		if t.offset < req.Window.Earliest {
			delete(g.entries, t.offset) // deleted by retention: nothing left to deliver
			continue
		}
		dst = s.grant(dst, g, &rec, t.offset, e.deliveries+1, req.Consumer, deadline)
		n++
	}
	off := max64(g.frontier, req.Window.Earliest)
	for ; n < limit && off < req.Window.End; off++ {
		if len(g.dead) > 0 {
			if _, dead := g.dead[off]; dead {
				continue // dead-lettered though the cursor log lost its delivery
			}
		}
		g.order.pushBack(off)
		dst = s.grant(dst, g, &rec, off, 1, req.Consumer, deadline)
		n++
	}
	if off > g.frontier {
		g.frontier = off
	}
	rec.finish()
	return dst, s.fx.batch, nil
}

func (s *Shard) grant(dst []Lease, g *group, rec *recordBuilder, off uint64, n uint32, c ConsumerID, deadline int64) []Lease {
	g.lease(off, n, c, deadline)
	rec.add(CursorEntry{Offset: off, Value: uint64(n)})
	return append(dst, Lease{Offset: off, Delivery: n, DeadlineMillis: deadline})
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// check decides whether consumer c may settle ref now. apply=false with a nil error
// means the offset is already acked (an idempotent repeat).
func check(g *group, c ConsumerID, ref Ref, now int64) (e entry, apply bool, err error) {
	e, ok := g.entries[ref.Offset]
	switch {
	case !ok && ref.Offset >= g.frontier:
		return e, false, ErrNotLeased
	case !ok:
		if _, dead := g.dead[ref.Offset]; dead {
			return e, false, ErrLeaseExpired
		}
		return e, false, nil
	case e.consumer != c:
		if ref.Delivery != 0 && ref.Delivery < e.deliveries {
			return e, false, ErrLeaseExpired
		}
		return e, false, ErrNotLeased
	case e.state != stateLeased,
		ref.Delivery != 0 && ref.Delivery != e.deliveries,
		now >= e.at:
		return e, false, ErrLeaseExpired
	}
	return e, true, nil
}

func refuse(list []Refusal, off uint64, err error) []Refusal {
	return append(list, Refusal{Offset: off, Err: err})
}

func refusedError(list []Refusal) error {
	if len(list) == 0 {
		return nil
	}
	return &OffsetsError{Refused: list}
}

// Ack acknowledges leased records of group for consumer at nowMillis. Every ref whose
// lease is current is acked; the others are refused and reported in an *OffsetsError
// (ErrLeaseExpired: the deadline passed or the offset was leased again since;
// ErrNotLeased: never delivered, or leased to another consumer). Acking an offset that
// is already acked succeeds and changes nothing. The answer to the consumer must wait
// for Durable(token): until then a crash redelivers the record.
// Errors: ErrUnknownGroup, *OffsetsError.
func (s *Shard) Ack(group string, consumer ConsumerID, refs []Ref, nowMillis int64) (Token, error) {
	g, err := s.lookup(group)
	if err != nil {
		return 0, err
	}
	var refused []Refusal
	rec := recordBuilder{s: s, g: g, kind: KindAck}
	for _, ref := range refs {
		_, apply, err := check(g, consumer, ref, nowMillis)
		if err != nil {
			refused = refuse(refused, ref.Offset, err)
			continue
		}
		if apply {
			delete(g.entries, ref.Offset)
			rec.add(CursorEntry{Offset: ref.Offset})
		}
	}
	rec.finish()
	return s.fx.batch, refusedError(refused)
}

// Nack gives leased records back for redelivery after delayMillis (negative: the group's
// RedeliveryDelayMillis; bounded by MaxVisibilityTimeoutMillis). A record whose delivery
// count has reached the group's MaxDeliveries is dead-lettered instead. Refusals as for
// Ack. Errors: ErrUnknownGroup, ErrInvalidRequest (delay too long), *OffsetsError.
func (s *Shard) Nack(group string, consumer ConsumerID, refs []Ref, delayMillis, nowMillis int64) (Token, error) {
	g, err := s.lookup(group)
	if err != nil {
		return 0, err
	}
	if delayMillis < 0 {
		delayMillis = g.cfg.RedeliveryDelayMillis
	}
	if delayMillis > MaxVisibilityTimeoutMillis {
		return 0, fmt.Errorf("%w: redelivery delay %d ms", ErrInvalidRequest, delayMillis)
	}
	var refused []Refusal
	rec := recordBuilder{s: s, g: g, kind: KindDead}
	for _, ref := range refs {
		e, apply, err := check(g, consumer, ref, nowMillis)
		if err != nil {
			refused = refuse(refused, ref.Offset, err)
			continue
		}
		if !apply {
			continue
		}
		if e.deliveries >= g.cfg.MaxDeliveries {
			s.deadLetter(g, &rec, ref.Offset, e.deliveries, nowMillis)
			continue
		}
		g.setPending(ref.Offset, e, nowMillis+delayMillis)
	}
	rec.finish()
	return s.fx.batch, refusedError(refused)
}

// Return gives back leases whose records the core could not hand to the consumer (the
// answer would have exceeded the bytes one answer may carry, core GroupPollRequest.MaxBytes):
// each ref whose lease is current for consumer becomes ready for redelivery at nowMillis
// with its delivery count lowered by one, as the delivery never happened. Nothing is
// written: the cursor log keeps the higher count, so a restart over-counts that delivery
// by one and never under-counts. Refs that are not current leases of consumer are
// skipped. It returns how many leases were given back. Errors: ErrUnknownGroup.
func (s *Shard) Return(group string, consumer ConsumerID, refs []Ref, nowMillis int64) (int, error) {
	g, err := s.lookup(group)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range refs {
		e, apply, err := check(g, consumer, ref, nowMillis)
		if err != nil || !apply {
			continue
		}
		if e.deliveries > 0 {
			e.deliveries--
		}
		g.setPending(ref.Offset, e, nowMillis)
		n++
	}
	return n, nil
}

// deadLetter gives up on off: a dead-letter record, then its entry in the open cursor
// record rec (kind KindDead).
func (s *Shard) deadLetter(g *group, rec *recordBuilder, off uint64, deliveries uint32, now int64) {
	delete(g.entries, off)
	g.dead[off] = DeadLetter{Offset: off, Deliveries: deliveries, AtMillis: now}
	seq := s.stageDeadLetter(DeadLetterRecord{Kind: DeadLettered, GroupID: g.id, Offset: off, Deliveries: deliveries, AtMillis: now})
	rec.add(CursorEntry{Offset: off, Value: seq})
}

// expire ends the group's leases whose deadline is at or before now: each becomes ready
// for redelivery at once, or is dead-lettered when its delivery count reached
// MaxDeliveries.
func (s *Shard) expire(g *group, now int64) {
	rec := recordBuilder{s: s, g: g, kind: KindDead}
	for len(g.leases) > 0 && g.leases[0].at <= now {
		t := g.leases.pop()
		e, ok := g.entries[t.offset]
		if !current(e, ok, t, stateLeased) {
			continue
		}
		if e.deliveries >= g.cfg.MaxDeliveries {
			s.deadLetter(g, &rec, t.offset, e.deliveries, now)
			continue
		}
		g.setPending(t.offset, e, t.at)
	}
	rec.finish()
}

// Tick expires every lease of every group whose deadline is at or before nowMillis
// (see Poll). The core calls it from its timer hook at NextExpiry. Dead letters it
// creates are in the batch of the returned token.
func (s *Shard) Tick(nowMillis int64) Token {
	for _, g := range s.groups {
		s.expire(g, nowMillis)
	}
	return s.fx.batch
}

// NextExpiry returns the earliest lease deadline (Unix ms) over all groups; ok=false
// when no lease is out. Superseded leases are dropped on the way. The core arms its
// timer for it and calls Tick then.
func (s *Shard) NextExpiry() (atMillis int64, ok bool) {
	for _, g := range s.groups {
		if t, has := g.nextExpiry(); has && (!ok || t < atMillis) {
			atMillis, ok = t, true
		}
	}
	return atMillis, ok
}

// NextReady returns the earliest time (Unix ms) a nacked or expired record becomes
// ready for redelivery over all groups; ok=false when none waits. A time in the past
// means a Poll of that record's group would return it now.
func (s *Shard) NextReady() (atMillis int64, ok bool) {
	for _, g := range s.groups {
		if t, has := g.nextReady(); has && (!ok || t < atMillis) {
			atMillis, ok = t, true
		}
	}
	return atMillis, ok
}

// DeadLetters appends to dst up to limit dead letters of group with offset >= from, in
// offset order, and returns the offset to continue from (last returned + 1, or from when
// none). Errors: ErrUnknownGroup, ErrInvalidRequest (limit < 1).
func (s *Shard) DeadLetters(dst []DeadLetter, group string, from uint64, limit int) ([]DeadLetter, uint64, error) {
	g, err := s.lookup(group)
	if err != nil {
		return dst, from, err
	}
	if limit < 1 {
		return dst, from, fmt.Errorf("%w: limit %d", ErrInvalidRequest, limit)
	}
	s.keys = s.keys[:0]
	for off := range g.dead {
		if off >= from {
			s.keys = append(s.keys, off)
		}
	}
	slices.Sort(s.keys)
	next := from
	for i, off := range s.keys {
		if i == limit {
			break
		}
		dst = append(dst, g.dead[off])
		next = off + 1
	}
	return dst, next, nil
}

// Redrive puts dead letters of group back into delivery: each becomes ready at once
// with its delivery count reset to 0. Offsets that are not dead letters are refused
// with ErrNotDead in an *OffsetsError; the count of offsets redriven is returned.
// Errors: ErrUnknownGroup, *OffsetsError.
func (s *Shard) Redrive(group string, offsets []uint64, nowMillis int64) (int, Token, error) {
	g, err := s.lookup(group)
	if err != nil {
		return 0, 0, err
	}
	var refused []Refusal
	rec := recordBuilder{s: s, g: g, kind: KindRedrive}
	n := 0
	for _, off := range offsets {
		if _, dead := g.dead[off]; !dead {
			refused = refuse(refused, off, ErrNotDead)
			continue
		}
		delete(g.dead, off)
		seq := s.stageDeadLetter(DeadLetterRecord{Kind: Redriven, GroupID: g.id, Offset: off, AtMillis: nowMillis})
		g.revive(off, 0, nowMillis)
		rec.add(CursorEntry{Offset: off, Value: seq})
		n++
	}
	rec.finish()
	return n, s.fx.batch, refusedError(refused)
}

// revive makes a done offset outstanding again, ready at readyAt with the given
// delivery count. An offset at or above the frontier is simply left to fresh delivery.
func (g *group) revive(off uint64, deliveries uint32, readyAt int64) {
	if off >= g.frontier {
		return
	}
	g.order.insert(off)
	g.setPending(off, entry{deliveries: deliveries}, readyAt)
}

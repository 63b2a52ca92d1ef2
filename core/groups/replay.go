package groups

import (
	"fmt"
	"slices"
)

func slicesSort(s []uint64) { slices.Sort(s) }

// ReplayReport describes what opening a shard found. docs/groups.md, "Opening a shard".
type ReplayReport struct {
	Groups int // groups on the shard
	// Repaired names the groups whose cursor depended on dead-letter records the
	// dead-letter log no longer has: those offsets are delivered again (never skipped).
	// A checkpoint record per repaired group is staged; the core must make it durable
	// before it serves the shard.
	Repaired []string
	// LostDeadLetters counts the dead-letter (and redrive) events of the cursor log whose
	// dead-letter record is missing.
	LostDeadLetters int
	// OrphanDeadLetters counts dead-letter records of groups the cursor log does not
	// know (their create record was lost with the cursor log's tail); they are dropped.
	OrphanDeadLetters int
	// Outstanding counts offsets waiting for redelivery after the restart (every lease
	// ends at a restart; delivery counts are kept).
	Outstanding int
	// SkippedRecords counts cursor records of groups with no create record before them
	// (left behind by compaction); they are ignored.
	SkippedRecords int
}

// Replayer rebuilds a Shard from its dead-letter log and its cursor log. Feed every
// record of each log in log order (the two logs in either order), then call Finish.
type Replayer struct {
	s        *Shard
	dead     map[uint64]map[uint64]DeadLetter // group id → offset → dead letter
	repaired map[uint64]bool
	report   ReplayReport
}

// NewReplayer starts replaying a shard whose dead-letter log ends (next offset) at
// deadLetterLogEnd, i.e. after the seglog recovery of that log. Errors as NewShard.
func NewReplayer(opts Options, deadLetterLogEnd uint64) (*Replayer, error) {
	s, err := NewShard(opts, deadLetterLogEnd)
	if err != nil {
		return nil, err
	}
	return &Replayer{
		s:        s,
		dead:     make(map[uint64]map[uint64]DeadLetter),
		repaired: make(map[uint64]bool),
	}, nil
}

// DeadLetter replays one dead-letter log record. Errors: *RecordError (ErrCorrupt).
func (r *Replayer) DeadLetter(payload []byte) error {
	d, err := DecodeDeadLetterRecord(payload)
	if err != nil {
		return err
	}
	m := r.dead[d.GroupID]
	if m == nil {
		m = make(map[uint64]DeadLetter)
		r.dead[d.GroupID] = m
	}
	if d.Kind == DeadLettered {
		m[d.Offset] = DeadLetter{Offset: d.Offset, Deliveries: d.Deliveries, AtMillis: d.AtMillis}
	} else {
		delete(m, d.Offset)
	}
	return nil
}

// Cursor replays one cursor log record. A record of a group whose create record has not
// been seen is skipped (ReplayReport.SkippedRecords). Errors: *RecordError (ErrCorrupt)
// for a record that does not decode, or two names with one id.
func (r *Replayer) Cursor(payload []byte) error {
	rec, err := DecodeCursorRecord(payload)
	if err != nil {
		return err
	}
	if rec.Kind == KindCreate {
		return r.create(&rec)
	}
	g := r.s.groups[rec.GroupID]
	if g == nil {
		// Its create record was in a head segment dropped by compaction; the snapshot
		// at the tail recreates the group.
		r.report.SkippedRecords++
		return nil
	}
	switch rec.Kind {
	case KindDeliver:
		r.deliver(g, &rec)
	case KindAck:
		for i := 0; i < int(rec.Count); i++ {
			delete(g.entries, rec.Entry(i).Offset)
		}
	case KindDead:
		r.deadEvents(g, &rec)
	case KindRedrive:
		r.redriveEvents(g, &rec)
	case KindCheckpoint:
		delete(r.repaired, g.id) // the group's state is replaced: earlier repairs are moot
		clear(g.entries)
		g.frontier = rec.Frontier()
		for i := 0; i < int(rec.Count); i++ {
			e := rec.Entry(i)
			g.entries[e.Offset] = entry{deliveries: uint32(e.Value)}
		}
	}
	return nil
}

func (r *Replayer) create(rec *CursorRecord) error {
	c, err := rec.Create()
	if err != nil {
		return err
	}
	if g := r.s.groups[rec.GroupID]; g != nil {
		if g.name != string(c.Name) {
			return corruptCursor("group id %016x names both %q and %q", rec.GroupID, g.name, c.Name)
		}
		return nil // repeated by a compaction snapshot
	}
	cfg, err := c.Config.withDefaults()
	if err != nil {
		return corruptCursor("group %q: %v", c.Name, err)
	}
	r.s.addGroup(newGroup(string(c.Name), cfg, c.StartOffset))
	return nil
}

func (r *Replayer) deliver(g *group, rec *CursorRecord) {
	for i := 0; i < int(rec.Count); i++ {
		e := rec.Entry(i)
		if e.Offset >= g.frontier {
			g.frontier = e.Offset + 1
		}
		g.entries[e.Offset] = entry{deliveries: uint32(e.Value)}
	}
}

// deadEvents applies dead-letter events; one whose dead-letter record is lost (its
// dead-letter log offset is at or past the log's end) leaves the offset outstanding
// with its delivery count lowered to MaxDeliveries-1: it is delivered once more rather
// than skipped (seeds: group_cursor_dependencies).
func (r *Replayer) deadEvents(g *group, rec *CursorRecord) {
	intact := rec.DeadLetterEnd <= r.s.dlEnd
	for i := 0; i < int(rec.Count); i++ {
		e := rec.Entry(i)
		if intact || e.Value < r.s.dlEnd {
			delete(g.entries, e.Offset)
			continue
		}
		r.report.LostDeadLetters++
		r.repaired[g.id] = true
		if e.Offset >= g.frontier {
			continue
		}
		// One more delivery: a failure of it dead-letters the offset again.
		g.entries[e.Offset] = entry{deliveries: min(g.entries[e.Offset].deliveries, g.cfg.MaxDeliveries-1)}
	}
}

// redriveEvents applies redrives; a redrive whose dead-letter record is lost did not
// happen (the dead-letter log, which still lists the offset, decides).
func (r *Replayer) redriveEvents(g *group, rec *CursorRecord) {
	intact := rec.DeadLetterEnd <= r.s.dlEnd
	for i := 0; i < int(rec.Count); i++ {
		e := rec.Entry(i)
		if !intact && e.Value >= r.s.dlEnd {
			r.report.LostDeadLetters++
			r.repaired[g.id] = true
			continue
		}
		if e.Offset < g.frontier {
			g.entries[e.Offset] = entry{}
		}
	}
}

// Finish ends the replay at nowMillis and returns the shard. No lease survives a
// restart: a restart ends each lease as an expiry would, so an outstanding offset whose
// delivery count reached MaxDeliveries is dead-lettered now, and every other one is
// ready for redelivery at once with its count kept. The dead-letter log decides which offsets are dead letters. Each repaired group gets a
// checkpoint record. Records owed are staged in the shard's first Effects batch; the
// core must make them durable before it serves the shard.
func (r *Replayer) Finish(nowMillis int64) (*Shard, ReplayReport, error) {
	s := r.s
	for id, dead := range r.dead {
		g := s.groups[id]
		if g == nil {
			r.report.OrphanDeadLetters += len(dead)
			continue
		}
		for off, d := range dead {
			delete(g.entries, off)
			g.dead[off] = d
		}
	}
	for _, name := range s.Groups() {
		g := s.byName[name]
		r.rebuild(g, nowMillis)
		if r.repaired[g.id] {
			r.report.Repaired = append(r.report.Repaired, name)
			s.stageCheckpoint(g)
		}
	}
	r.report.Groups = len(s.groups)
	return s, r.report, nil
}

// rebuild ends every lease of g at now (see Finish) and rebuilds the queues.
func (r *Replayer) rebuild(g *group, now int64) {
	keys := sortedKeys(g.entries)
	g.order.items = keys
	rec := recordBuilder{s: r.s, g: g, kind: KindDead}
	for _, off := range keys {
		e := g.entries[off]
		if e.deliveries >= g.cfg.MaxDeliveries {
			r.s.deadLetter(g, &rec, off, e.deliveries, now)
			continue
		}
		g.setPending(off, e, now)
		r.report.Outstanding++
	}
	rec.finish()
}

// String summarises the report for logs.
func (rep ReplayReport) String() string {
	return fmt.Sprintf("groups=%d repaired=%v lost_dead_letters=%d orphan_dead_letters=%d outstanding=%d skipped=%d",
		rep.Groups, rep.Repaired, rep.LostDeadLetters, rep.OrphanDeadLetters, rep.Outstanding, rep.SkippedRecords)
}

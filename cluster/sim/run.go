package sim

import (
	"fmt"
	"time"
)

// AddNodes adds n running nodes with empty disks, numbered after the last
// node added, and returns their ids. Each machine's Start (if any) runs
// right after it is built.
func (s *Sim[M]) AddNodes(n int) []NodeID {
	var added []NodeID
	for range n {
		id := NodeID(len(s.ids) + 1)
		nd := &node[M]{id: id, disk: NewDisk()}
		s.nodes[id] = nd
		s.ids = append(s.ids, id)
		s.tracef("%v add %v", s.now, id)
		s.boot(nd)
		added = append(added, id)
		s.check(fmt.Sprintf("add %v", id))
	}
	return added
}

func (s *Sim[M]) boot(nd *node[M]) {
	id := nd.id
	logf := func(format string, args ...any) {
		if s.cfg.Trace != nil {
			s.tracef("%v %v: %s", s.now, id, fmt.Sprintf(format, args...))
		}
	}
	env := Env{ID: id, Disk: nd.disk, Rand: s.rand.Fork(), Incarnation: nd.incarnation, Logf: logf}
	nd.machine = s.cfg.New(env)
	if st, ok := nd.machine.(Starter[M]); ok {
		s.sendAll(nd.id, st.Start(s.now))
	}
}

// Send injects msg on from->to as if from had sent it now: it takes the
// link's faults like any other message. from is External or a running node.
// Errors: ErrUnknownNode, ErrNodeDown (for from), ErrNoCorrupt.
func (s *Sim[M]) Send(from, to NodeID, msg M) error {
	if from != External {
		n, ok := s.nodes[from]
		if !ok {
			return fmt.Errorf("%w %v", ErrUnknownNode, from)
		}
		if n.machine == nil {
			return fmt.Errorf("%w: %v", ErrNodeDown, from)
		}
	}
	if err := s.send(from, to, msg); err != nil {
		return err
	}
	s.check(fmt.Sprintf("send %v->%v", from, to))
	return nil
}

func (s *Sim[M]) sendAll(from NodeID, out []Envelope[M]) {
	for _, e := range out {
		if err := s.send(from, e.To, e.Msg); err != nil && s.err == nil {
			s.err = err
		}
	}
}

// send draws the message's fate and queues its copies.
func (s *Sim[M]) send(from, to NodeID, msg M) error {
	s.stats.Sent++
	text := s.format(msg)
	fate := s.faults.Decide(from, to, s.rand)
	if fate.Drop != "" {
		s.stats.Dropped++
		s.tracef("%v %v->%v drop (%s) %s", s.now, from, to, fate.Drop, text)
		return nil
	}
	for i, c := range fate.Copies {
		ev := &event[M]{at: s.now.Add(c.Delay), seq: s.seq, from: from, to: to, msg: msg}
		s.seq++
		if i > 0 {
			s.stats.Duplicated++
			ev.note = "dup"
		}
		if c.Corrupt {
			if err := s.corrupt(ev); err != nil {
				return err
			}
		}
		s.queue.push(ev)
		s.tracef("%v %v->%v send %s%s", s.now, from, to, text, sendNote(ev, c, s.now))
	}
	return nil
}

func sendNote[M any](ev *event[M], c Copy, now Time) string {
	note := ""
	if ev.note != "" {
		note += " (" + ev.note + ")"
	}
	if c.Reordered {
		note += " (reordered)"
	}
	if ev.at != now {
		note += fmt.Sprintf(" due %v", ev.at)
	}
	return note
}

func (s *Sim[M]) corrupt(ev *event[M]) error {
	var note string
	if s.cfg.Corrupt != nil {
		ev.msg, note = s.cfg.Corrupt(ev.msg, s.rand)
	} else {
		var ok bool
		if ev.msg, note, ok = corruptDefault(ev.msg, s.rand); !ok {
			return ErrNoCorrupt
		}
	}
	s.stats.Corrupted++
	if ev.note != "" {
		ev.note += ", "
	}
	ev.note += "corrupt: " + note
	return nil
}

// Step processes the next event: the earliest queued message, or the next
// tick of every running node when it is due first (a delivery due at the
// same time goes first). It returns false, doing nothing, once the run has
// failed or when there is nothing left to do (no nodes and no messages).
func (s *Sim[M]) Step() bool {
	if s.err != nil {
		return false
	}
	switch {
	case len(s.queue) > 0 && (len(s.ids) == 0 || s.queue.peek().at <= s.nextTick):
		s.deliver(s.queue.pop())
	case len(s.ids) > 0:
		s.tick()
	default:
		return false
	}
	return s.err == nil
}

func (s *Sim[M]) tick() {
	s.now = max(s.now, s.nextTick)
	s.nextTick = s.now.Add(s.cfg.TickInterval)
	s.stats.Ticks++
	for _, id := range s.ids {
		if n := s.nodes[id]; n.machine != nil {
			s.sendAll(id, n.machine.Tick(s.now))
		}
	}
	s.check("tick")
}

// deliver hands one message copy to its receiver, or drops it when the
// receiver is down or the link got blocked while it was in flight.
func (s *Sim[M]) deliver(ev *event[M]) {
	s.now = max(s.now, ev.at)
	text := s.format(ev.msg)
	label := fmt.Sprintf("%v %v->%v", s.now, ev.from, ev.to)
	note := ""
	if ev.note != "" {
		note = " (" + ev.note + ")"
	}
	if ev.to == External {
		s.stats.Delivered++
		s.tracef("%s deliver %s%s", label, text, note)
		if s.cfg.External != nil {
			s.cfg.External(s.now, ev.from, ev.msg)
		}
		s.check("deliver " + label)
		return
	}
	n, ok := s.nodes[ev.to]
	reason := ""
	switch {
	case !ok:
		reason = "unknown node"
	case n.machine == nil:
		reason = DropDown
	case ev.from != External && s.faults.Blocked(ev.from, ev.to):
		reason = DropPartition
	}
	if reason != "" {
		s.stats.Dropped++
		s.events++
		s.tracef("%s drop (%s) %s%s", label, reason, text, note)
		return
	}
	s.stats.Delivered++
	s.tracef("%s deliver %s%s", label, text, note)
	s.sendAll(ev.to, n.machine.Step(s.now, ev.from, ev.msg))
	s.check("deliver " + label)
}

// RunFor processes every event due within d of now, in order, then sets the
// clock to now+d. It returns the number of events processed. It stops early
// when the run fails (see Err), and fails it with ErrLivelock past
// Options.MaxEvents events.
func (s *Sim[M]) RunFor(d time.Duration) int {
	until := s.now.Add(d)
	count := 0
	for s.err == nil && s.hasEventBy(until) {
		if count == s.cfg.MaxEvents {
			s.err = ErrLivelock
			break
		}
		s.Step()
		count++
	}
	if s.err == nil {
		s.now = max(s.now, until)
	}
	return count
}

func (s *Sim[M]) hasEventBy(t Time) bool {
	if len(s.queue) > 0 && s.queue.peek().at <= t {
		return true
	}
	return len(s.ids) > 0 && s.nextTick <= t
}

// RunTicks runs until n more ticks have happened (and the messages due
// before each), leaving the clock at the last tick. It returns the number of
// events processed; failures as RunFor.
func (s *Sim[M]) RunTicks(n int) int {
	if n <= 0 || len(s.ids) == 0 {
		return 0
	}
	d := s.nextTick.Sub(s.now) + time.Duration(n-1)*s.cfg.TickInterval
	return s.RunFor(d)
}

// Deliver delivers queued messages, and the messages their receivers send
// in turn, in (due time, send order), until the queue is empty or max
// copies were handled (max <= 0: no limit but Options.MaxEvents, past which
// the run fails with ErrLivelock). The clock moves to each delivery's due
// time but no tick runs: ticks that fall due meanwhile are skipped, not made
// up. It returns the number of copies handled (delivered or dropped).
func (s *Sim[M]) Deliver(max int) int {
	count := 0
	for s.err == nil && len(s.queue) > 0 && (max <= 0 || count < max) {
		if count == s.cfg.MaxEvents {
			s.err = ErrLivelock
			break
		}
		s.deliver(s.queue.pop())
		count++
	}
	if s.nextTick < s.now {
		iv := Time(s.cfg.TickInterval)
		s.nextTick = (s.now + iv - 1) / iv * iv
	}
	return count
}

package placement

import (
	"fmt"
	"strings"
	"time"
)

// lease duration=DUR drift-ppm=N
func (s *script) leaseCmd(a args) string {
	s.lease = LeaseConfig{Duration: dur(a, "duration"), MaxDriftPPM: int64(a.u64("drift-ppm", 0))}
	s.held = Lease{}
	return fmt.Sprintf("holder expiry for a request at 0: %v\ngrantor expiry for a grant at 0: %v\n",
		time.Duration(s.lease.HolderExpiry(0)), time.Duration(s.lease.GrantorExpiry(0)))
}

// grant gen=G requested=DUR: the holder renews its lease.
func (s *script) grant(a args) string {
	s.held = s.held.Renew(s.lease, a.u64("gen", 0), a.nanos("requested", 0))
	return fmt.Sprintf("lease at generation %d until %v\n", s.held.Generation, time.Duration(s.held.Expiry))
}

// at now=DUR gen=G: the gates on the holder's clock.
func (s *script) leaseAt(a args) string {
	now, gen := a.nanos("now", 0), a.u64("gen", 0)
	return fmt.Sprintf("valid=%v ack-before-majority_ack=%v ack-with-majority_ack=%v leader-read=%s\n",
		s.held.Valid(now, gen), s.held.MayAck(now, gen, false), s.held.MayAck(now, gen, true),
		errString(s.held.LeaderRead(now, gen)))
}

// reads gen=G self=ID set=(IDS) [without=(...)]
func (s *script) readsCmd(a args) string {
	r, err := NewReadConfirmer(ReadConfig{Generation: a.u64("gen", 0), Self: a.str("self", ""),
		ReplicaSet: a.list("set"), without: a.without()})
	s.reads, s.rounds = r, nil
	return errString(err) + "\n"
}

// take id=N produced=N
func (s *script) take(a args) string {
	s.reads.Take(ReadID(a.u64("id", 0)), a.u64("produced", 0))
	return s.ready()
}

// start-round
func (s *script) startRound(a args) string {
	id, ok := s.reads.StartRound()
	if !ok {
		return "no read waits for a round\n"
	}
	s.rounds = append(s.rounds, id)
	return fmt.Sprintf("round %d\n", id) + s.ready()
}

// round-answer round=N from=ID gen=G
func (s *script) roundAnswer(a args) string {
	s.reads.RoundAnswer(RoundID(a.u64("round", 0)), a.str("from", ""), a.u64("gen", 0))
	return s.ready()
}

// round-failed round=N
func (s *script) roundFailed(a args) string {
	s.reads.RoundFailed(RoundID(a.u64("round", 0)))
	return s.ready()
}

// mark to=N
func (s *script) mark(a args) string {
	s.reads.SetMark(a.u64("to", 0))
	return s.ready()
}

// ready lists the reads answered now and how many still wait.
func (s *script) ready() string {
	var parts []string
	for _, r := range s.reads.Ready() {
		parts = append(parts, fmt.Sprintf("read %d: %s", r.ID, errString(r.Err)))
	}
	parts = append(parts, fmt.Sprintf("waiting: %d", s.reads.Waiting()))
	return strings.Join(parts, "\n") + "\n"
}

package placement

import (
	"fmt"
	"strings"
	"time"

	"felix/proto"
)

// detector suspect=DUR down=DUR
func (s *script) detector(a args) string {
	s.det = NewDetector(DetectorConfig{SuspectAfter: dur(a, "suspect"), DownAfter: dur(a, "down")})
	c := s.det.Config()
	return fmt.Sprintf("suspect after %v, down after %v\n", c.SuspectAfter, c.DownAfter)
}

func dur(a args, key string) time.Duration { return time.Duration(a.nanos(key, 0)) }

// heartbeat node=ID at=DUR [draining]
func (s *script) heartbeat(a args) string {
	return errString(s.det.Heartbeat(a.str("node", ""), a.nanos("at", 0), a.has("draining"))) + "\n"
}

// state node=ID now=DUR
func (s *script) state(a args) string {
	var out []string
	for _, n := range a.list("node") {
		out = append(out, n+"="+s.det.State(n, a.nanos("now", 0)).String())
	}
	return strings.Join(out, " ") + "\n"
}

// shard gen=G leader=ID followers=(IDS) [highest=G] [lease-until=DUR] [window=DUR]
func (s *script) newShard(a args) string {
	s.shard = Shard{Generation: a.u64("gen", 0), Leader: a.str("leader", ""), Followers: a.list("followers"),
		HighestGeneration: a.u64("highest", 0), LeaseUntil: a.nanos("lease-until", 0)}
	s.cfg = Config{ReportWindow: dur(a, "window")}
	return "ok\n"
}

// replica id=ID [storage=S] [inc=N] [state=live|suspect|down|draining] [highest=G]
// [rebuild=N] [restarted kept=N]
func (s *script) replica(a args) string {
	states := map[string]Liveness{"live": Live, "suspect": Suspect, "down": Down, "draining": Draining}
	l, ok := states[a.str("state", "live")]
	if !ok {
		a.t.Fatalf("%s: bad state", a.d.Pos)
	}
	s.shard.Replicas = append(s.shard.Replicas, Replica{NodeID: a.str("id", ""), StorageID: a.str("storage", ""),
		Incarnation: a.u64("inc", 1), Liveness: l, HighestGeneration: a.u64("highest", 0),
		RebuildIncarnation: a.u64("rebuild", 0), Restarted: a.has("restarted"), Kept: a.u64("kept", 0)})
	return "ok\n"
}

// report leader=ID gen=G at=DUR [stamped] [serves-by-round]
func (s *script) report(a args) string {
	s.shard.HasReport = true
	s.shard.Report = Report{Leader: a.str("leader", s.shard.Leader), Generation: a.u64("gen", s.shard.Generation),
		AtNanos: a.nanos("at", 0), Stamped: a.has("stamped"), ServesByRound: a.has("serves-by-round")}
	return "ok\n"
}

// entry id=ID durable=N [storage=S] [inc=N] [rebuild=N] [halted=REASON] [corrupt]
func (s *script) entry(a args) string {
	s.shard.Report.Entries = append(s.shard.Report.Entries, ReportEntry{NodeID: a.str("id", ""),
		StorageID: a.str("storage", ""), Durable: a.u64("durable", 0), Incarnation: a.u64("inc", 1),
		RebuildIncarnation: a.u64("rebuild", 0), Halted: a.str("halted", ""), Corrupt: a.has("corrupt")})
	return "ok\n"
}

// refusal gen=G by=ID ahead=ID at=POS
func (s *script) refusal(a args) string {
	s.shard.Refusal = &FenceRefusal{Generation: a.u64("gen", 0), By: a.str("by", ""), Ahead: a.str("ahead", ""),
		AheadAt: a.position("at")}
	return "ok\n"
}

// decide now=DUR [without=(switches)]
func (s *script) decide(a args) string {
	cfg := s.cfg
	cfg.without = a.without()
	d, err := Decide(&s.shard, a.nanos("now", 0), cfg)
	if err != nil {
		return errString(err) + "\n"
	}
	return fmtDecision(d)
}

// fence gen=G self=ID set=(IDS) own=(LOG:POS ...) [majority-ack] [without=(...)]
func (s *script) fence(a args) string {
	own := map[proto.ReplicaLog]Position{}
	for _, o := range a.list("own") {
		l, p, _ := strings.Cut(o, ":")
		lg, ok := logByName[l]
		if !ok {
			a.t.Fatalf("%s: bad own %q (want LOG:DURABLE@GEN)", a.d.Pos, o)
		}
		own[lg] = parsePosition(a, p)
	}
	s.fcfg = FenceConfig{Generation: a.u64("gen", 0), Self: a.str("self", ""), ReplicaSet: a.list("set"),
		Own: own, MajorityAck: a.has("majority-ack"), without: a.without()}
	r, err := NewFenceRound(s.fcfg)
	if err != nil {
		return errString(err) + "\n"
	}
	s.round = r
	return fmtOutcome(r.Outcome())
}

// answer from=ID log=LOG gen=G at=POS
func (s *script) answer(a args) string {
	return fmtOutcome(s.round.Answer(a.str("from", ""),
		FenceAnswer{Log: a.log("log"), Generation: a.u64("gen", 0), At: a.position("at")}))
}

// refuse from=ID code=FencedEpoch|Unauthorized
func (s *script) refuse(a args) string {
	code := proto.InternalUnauthorized
	if a.str("code", "") == "FencedEpoch" {
		code = proto.InternalFencedEpoch
	}
	return fmtOutcome(s.round.Refused(a.str("from", ""), code))
}

func fmtOutcome(o FenceOutcome) string {
	out := fmt.Sprintf("%v (%d of %d): %s\n", o.State, o.Answered, o.Majority, o.Reason)
	if o.State == FenceRefused {
		out += fmt.Sprintf("refusal: ahead=%s at %v on the %v log\n", o.Ahead, o.AheadAt, o.AheadLog)
	}
	return out
}

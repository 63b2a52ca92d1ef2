package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

// TestShipper runs testdata/shipper/*.txt: a leader's shipper for one (follower, log) driven
// command by command (new, next, sent, offer, answer, rebuild); each prints what to send or
// the state after. Each case's header names the seed table and row it covers.
func TestShipper(t *testing.T) {
	datadriven.Walk(t, "testdata/shipper", func(t *testing.T, path string) {
		var s *Shipper
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := args{t: t, d: d}
			if d.Cmd == "new" {
				s = NewShipper(ShipperConfig{Generation: a.u64("gen", 1), Window: a.u64("window", 0),
					RetryDelay: a.dur("delay"), Timeout: a.dur("timeout")}, a.u64("start", 0))
				return fmtShipper(s)
			}
			now := int64(a.dur("now"))
			switch d.Cmd {
			case "next":
				return fmtSend(s.Next(now, a.u64("earliest", 0), a.u64("tail", 0)))
			case "rebuild":
				return fmtSend(s.Rebuild(a.u64("earliest", 0)))
			case "sent":
				s.Sent(now, a.u64("corr", 0), a.u64("first", 0), a.u64("end", 0), a.u64("bytes", 1))
			case "offer":
				kind := SendBootstrap
				if a.str("kind", "bootstrap") == "rebuild" {
					kind = SendRebuild
				}
				s.SentOffer(now, a.u64("corr", 0), kind, a.u64("base", 0))
			case "answer":
				s.Answer(now, a.u64("corr", 0), answerArg(a))
			default:
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			return fmtShipper(s)
		})
	})
}

func (a args) dur(key string) time.Duration {
	s := a.str(key, "")
	if s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.d.Pos, key, s, err)
	}
	return v
}

// answerArg builds the follower's answer: ok=D, gap=E, code=NAME or unsupported.
func answerArg(a args) proto.InternalMessage {
	corr := a.u64("corr", 0)
	switch {
	case a.has("ok"):
		return &proto.ReplicateOk{CorrelationID: corr, DurableOffset: a.u64("ok", 0)}
	case a.has("gap"):
		return &proto.ReplicateError{CorrelationID: corr, Code: proto.InternalLogGap, ExpectedOffset: a.u64("gap", 0)}
	case a.has("unsupported"):
		return &proto.UnsupportedKind{CorrelationID: corr, RefusedKind: proto.KindReplicateRebuild}
	}
	name := a.str("code", "")
	for c := proto.InternalCode(1); c <= proto.InternalUnsupportedKind; c++ {
		if codeName(c) == name {
			return &proto.ReplicateError{CorrelationID: corr, Code: c}
		}
	}
	a.t.Fatalf("%s: unknown answer", a.d.Pos)
	return nil
}

func fmtShipper(s *Shipper) string {
	st, reason := s.State()
	acked, has := s.Acked()
	ack := "none"
	if has {
		ack = fmt.Sprint(acked)
	}
	out := fmt.Sprintf("%v next=%d acked=%s in-flight=%dB", st, s.NextOffset(), ack, s.InFlight())
	if reason != "" {
		out += " reason=" + reason
	}
	if s.RebuildAllowed() {
		out += " rebuild-allowed"
	}
	if d := s.DivergedBelow(); d > 0 {
		out += fmt.Sprintf(" diverged-below=%d", d)
	}
	return out + "\n"
}

func fmtSend(s Send) string {
	switch s.Kind {
	case SendRecords:
		return fmt.Sprintf("send records [%d, %d) up to %dB\n", s.From, s.To, s.MaxBytes)
	case SendBootstrap:
		return fmt.Sprintf("send ReplicateBootstrap base_offset=%d\n", s.BaseOffset)
	case SendRebuild:
		return fmt.Sprintf("send ReplicateRebuild base_offset=%d\n", s.BaseOffset)
	}
	if s.WakeAt != 0 {
		return fmt.Sprintf("nothing until %v\n", time.Duration(s.WakeAt))
	}
	return "nothing\n"
}

package replica

import "felix/proto"

// Answer applies the follower's answer to request corr, received at now, and returns the
// acknowledged offset afterwards (Acked). An answer to an unknown or expired request is
// ignored, except that a ReplicateOk still counts up to the end of the batch it answers
// while that batch is remembered.
func (s *Shipper) Answer(now int64, corr uint64, ans proto.InternalMessage) uint64 {
	f, known := s.flights[corr]
	if !known || s.state == Fenced {
		return s.acked
	}
	s.drop(corr, f)
	switch a := ans.(type) {
	case *proto.ReplicateOk:
		s.answerOk(f, a.DurableOffset)
	case *proto.ReplicateError:
		s.answerError(now, f, a)
	case *proto.UnsupportedKind:
		s.halt(HaltUnsupported) // "predates the kind": it stays halted
	}
	return s.acked
}

// answerOk: a records batch [first, end) answered with durable_offset d counts the follower
// at min(d, end): a longer tail it held from before was not sent by this leader and never
// counts; the next batch goes on from where this leader's batches end, so those offsets are
// compared. A bootstrap or rebuild answered d places the follower at d.
func (s *Shipper) answerOk(f *flight, d uint64) {
	s.stats.Acks++
	s.bad = 0
	if f.kind != SendRecords {
		s.bootstrp = false
		if s.state == Halted {
			s.state, s.reason = Shipping, ""
		}
		s.next = d
		s.acked, s.hasAck = d, true
		return
	}
	held := min(d, f.end)
	if !s.hasAck || held > s.acked {
		s.acked, s.hasAck = held, true
	}
	if f.probe {
		s.probeLo = max(s.probeLo, held) // the follower agrees below held
		s.probing = s.probeHi > s.probeLo+1
		return
	}
	if d < f.end && f.live {
		// The follower does not hold the whole batch (it lost it since): send it again.
		s.rewind(d)
	}
}

// answerError: the leader's column of the seed's tables.
func (s *Shipper) answerError(now int64, f *flight, a *proto.ReplicateError) {
	if f.probe && a.Code != proto.InternalLogConflict {
		s.probing = false
	}
	switch a.Code {
	case proto.InternalMalformed:
		if s.bad++; f.kind == SendRecords && s.bad < MaxMalformed {
			s.stats.Resends++
			s.rewind(f.first) // resend the same records
			return
		}
		s.halt(HaltUnsupported) // an old peer refusing a kind it cannot read
	case proto.InternalLogGap:
		s.stats.Gaps++
		s.rewind(a.ExpectedOffset)
		s.next = a.ExpectedOffset
	case proto.InternalLogConflict:
		s.stats.Conflicts++
		if f.kind == SendBootstrap {
			s.halt(HaltNeedsBootstrap)
		} else {
			s.conflicted(f)
		}
	case proto.InternalFencedEpoch:
		s.state, s.reason = Fenced, "fenced"
	case proto.InternalStaleRoute, proto.InternalUnavailable, proto.InternalOverload:
		s.stats.StaleRoutes++
		if f.kind == SendRecords {
			s.rewind(f.first)
		}
		if s.state == Shipping {
			s.state, s.retryAt = Retrying, now+int64(s.cfg.RetryDelay)
		}
	case proto.InternalUnauthorized:
		s.halt(HaltUnauthorized)
	default:
		s.halt(HaltStorageFailed)
	}
}

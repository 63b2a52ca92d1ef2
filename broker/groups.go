package broker

import (
	"errors"
	"time"

	"felix/auth"
	"felix/core"
	"felix/core/groups"
	"felix/netq"
	"felix/proto"
)

// maxGroupWait bounds a parked group_poll (max_wait_ms) at 30 s, and at a quarter of the
// drain budget (FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS), because a drain waits for parked polls.
func (s *session) maxGroupWait() time.Duration {
	return min(30*time.Second, time.Duration(s.h.s.cfg.ShutdownDrainTimeoutMS)*time.Millisecond/4)
}

// The consumer-group messages of spec/client-protocol.md §8.3 are served on an
// authenticated bi stream, one handler each in the handler table. Permission: stream.subscribe on
// the stream (spec/auth.md §4, PROPOSED). The consumer is the connection: records polled on
// one connection are acked or nacked from any stream of it. Refused offsets (lease
// expired, not leased, not a dead letter) answer error {code: "malformed", request_id}
// naming them; the other offsets of the call were applied.

// handleGroupPoll leases up to max_records records to the connection's consumer, parked
// up to max_wait_ms (maxGroupWait) when none is ready, and answers group_records: a binary
// frame (proto.FlagBinaryGroupRecords) when the poll asked with binary_records, else JSON
// (docs/client-protocol.md D19).
func (s *session) handleGroupPoll(m *proto.GroupPoll) {
	if !s.groupAllowed(m.TenantID, m.Namespace, m.Stream, m.RequestID) || s.groupRedirected(m.TenantID, m.Namespace, m.Stream, m.Shard, m.RequestID) {
		return
	}
	id := m.RequestID
	wait := min(time.Duration(m.MaxWaitMs)*time.Millisecond, s.maxGroupWait())
	req := core.GroupPollRequest{Stream: streamName(m.TenantID, m.Namespace, m.Stream), Shard: int(m.Shard),
		Group: m.Group, Consumer: s.h.consumer, MaxRecords: max(int(m.MaxRecords), 1), MaxWait: wait,
		MaxBytes: groupAnswerBytes(s.h.s.cfg.MaxFrameBytes, max(int(m.MaxRecords), 1), m.BinaryRecords)}
	s.groupCall(id, func() error {
		return s.svc.GroupPoll(req, func(recs []core.GroupRecord, err error) {
			defer s.opDone()
			if err != nil {
				s.groupError(err, id)
				return
			}
			out := &proto.GroupRecords{RequestID: id, Group: m.Group, Shard: m.Shard, Records: make([]proto.GroupRecord, len(recs))}
			for i, r := range recs {
				out.Records[i] = proto.GroupRecord{Offset: r.Offset, Payload: r.Payload, Delivery: r.Delivery}
			}
			if m.BinaryRecords {
				s.sendFrame(func(dst []byte) []byte { return proto.AppendGroupRecordsFrame(dst, out) })
				return
			}
			s.send(out)
		})
	})
}

// handleGroupAck acks leased offsets of the connection's consumer (§8.3).
func (s *session) handleGroupAck(m *proto.GroupAck) {
	if !s.groupAllowed(m.TenantID, m.Namespace, m.Stream, m.RequestID) || s.groupRedirected(m.TenantID, m.Namespace, m.Stream, m.Shard, m.RequestID) {
		return
	}
	req := core.GroupAckRequest{Stream: streamName(m.TenantID, m.Namespace, m.Stream), Shard: int(m.Shard),
		Group: m.Group, Consumer: s.h.consumer, Refs: refs(m.Offsets)}
	id := m.RequestID
	s.groupCall(id, func() error { return s.svc.GroupAck(req, s.groupOK(id)) })
}

// handleGroupNack gives leased offsets back, redelivered after redeliver_after_ms (§8.3).
func (s *session) handleGroupNack(m *proto.GroupNack) {
	if !s.groupAllowed(m.TenantID, m.Namespace, m.Stream, m.RequestID) || s.groupRedirected(m.TenantID, m.Namespace, m.Stream, m.Shard, m.RequestID) {
		return
	}
	delay := int64(-1)
	if m.RedeliverAfterMs != nil {
		delay = int64(min(*m.RedeliverAfterMs, 1<<40))
	}
	req := core.GroupAckRequest{Stream: streamName(m.TenantID, m.Namespace, m.Stream), Shard: int(m.Shard),
		Group: m.Group, Consumer: s.h.consumer, Refs: refs(m.Offsets), DelayMillis: delay}
	id := m.RequestID
	s.groupCall(id, func() error { return s.svc.GroupNack(req, s.groupOK(id)) })
}

// handleDeadLettersList pages the group's dead letters from from_offset (§8.3).
func (s *session) handleDeadLettersList(m *proto.DeadLettersList) {
	if !s.groupAllowed(m.TenantID, m.Namespace, m.Stream, m.RequestID) || s.groupRedirected(m.TenantID, m.Namespace, m.Stream, m.Shard, m.RequestID) {
		return
	}
	req := core.DeadLettersRequest{Stream: streamName(m.TenantID, m.Namespace, m.Stream), Shard: int(m.Shard),
		Group: m.Group, From: m.FromOffset, Limit: max(int(m.Limit), 1)}
	id := m.RequestID
	s.groupCall(id, func() error {
		return s.svc.DeadLetters(req, func(list []groups.DeadLetter, next uint64, err error) {
			defer s.opDone()
			if err != nil {
				s.groupError(err, id)
				return
			}
			out := &proto.DeadLetters{RequestID: id, Group: m.Group, Shard: m.Shard, Entries: make([]proto.DeadLetter, len(list))}
			for i, d := range list {
				out.Entries[i] = proto.DeadLetter{Offset: d.Offset, Deliveries: d.Deliveries, DeadLetteredAtMs: uint64(max(d.AtMillis, 0))}
			}
			if len(list) == req.Limit {
				out.NextFrom = &next
			}
			s.send(out)
		})
	})
}

// handleDeadLettersRedrive puts dead letters back for delivery and answers group_ok with the count (§8.3).
func (s *session) handleDeadLettersRedrive(m *proto.DeadLettersRedrive) {
	if !s.groupAllowed(m.TenantID, m.Namespace, m.Stream, m.RequestID) || s.groupRedirected(m.TenantID, m.Namespace, m.Stream, m.Shard, m.RequestID) {
		return
	}
	req := core.RedriveRequest{Stream: streamName(m.TenantID, m.Namespace, m.Stream), Shard: int(m.Shard),
		Group: m.Group, Offsets: m.Offsets}
	id := m.RequestID
	s.groupCall(id, func() error {
		return s.svc.Redrive(req, func(n int, err error) {
			defer s.opDone()
			if err != nil {
				s.groupError(err, id)
				return
			}
			count := uint64(n)
			s.send(&proto.GroupOK{RequestID: id, Count: &count})
		})
	})
}

// groupAnswerBytes is the payload bytes one group_records answer may carry so that
// its frame stays within maxFrame (FELIX_MAX_FRAME_BYTES). JSON: payloads travel in base64
// (4 bytes per 3), each record takes at most groupRecordJSONBytes besides, and the
// envelope (group name escaped) at most groupEnvelopeBytes. Binary (D19): payloads as
// they are, proto.GroupRecordBytes per record and proto.GroupRecordsEnvelope besides (no
// publisher is sent). A larger answer would be refused by the client and lost each time
// its records are redelivered (docs/soak.md, finding 5). At least 1: the first record is
// always handed out.
func groupAnswerBytes(maxFrame uint32, maxRecords int, binary bool) int {
	n := int64(min(maxRecords, 1<<16))
	if binary {
		return int(max(int64(maxFrame)-proto.GroupRecordsEnvelope-n*proto.GroupRecordBytes, 1))
	}
	room := int64(maxFrame) - groupEnvelopeBytes - n*groupRecordJSONBytes
	return int(max(room/4*3, 1))
}

// sendFrame queues one whole frame built by appendFrame, under the same bound as send.
func (s *session) sendFrame(appendFrame func(dst []byte) []byte) {
	if s.w == nil {
		return
	}
	if err := s.w.Append(appendFrame); errors.Is(err, netq.ErrWriterFull) {
		s.h.s.m.protocolErrors.Inc()
		s.in.CancelRead(netq.CodeSlowConsumer)
		if s.out != nil {
			s.out.CancelWrite(netq.CodeSlowConsumer)
		}
	}
}

const (
	groupEnvelopeBytes   = 8 << 10 // type, request_id, shard, group name (≤ 255 bytes, escaped)
	groupRecordJSONBytes = 96      // {"offset":u64,"payload":"","delivery":u32}, and a comma
)

func streamName(t, ns, s string) core.StreamName {
	return core.StreamName{Tenant: t, Namespace: ns, Stream: s}
}

// refs names the consumer's current lease of each offset (Delivery 0).
func refs(offsets []uint64) []groups.Ref {
	out := make([]groups.Ref, len(offsets))
	for i, o := range offsets {
		out[i] = groups.Ref{Offset: o}
	}
	return out
}

func (s *session) groupAllowed(t, ns, stream string, id uint64) bool {
	if err := s.principal.Allow(auth.ActionStreamSubscribe, t, ns, stream); err != nil {
		s.sendError(proto.CodeUnauthorized, auth.WireText(err), &id)
		return false
	}
	return true
}

func (s *session) groupCall(id uint64, call func() error) {
	s.inflight.Add(1)
	s.h.s.inflight.Add(1)
	if err := call(); err != nil {
		s.opDone()
		s.groupError(err, id)
	}
}

func (s *session) groupOK(id uint64) func(error) {
	return func(err error) {
		defer s.opDone()
		if err != nil {
			s.groupError(err, id)
			return
		}
		s.send(&proto.GroupOK{RequestID: id})
	}
}

// groupError answers a failed group operation with a correlatable error (§8.8).
func (s *session) groupError(err error, id uint64) {
	var oe *groups.OffsetsError
	switch {
	case errors.As(err, &oe):
		s.sendError(proto.CodeMalformed, err.Error(), &id)
	case errors.Is(err, groups.ErrUnknownGroup):
		s.sendError(proto.CodeNotFound, "unknown group", &id)
	case errors.Is(err, groups.ErrInvalidGroupName), errors.Is(err, groups.ErrInvalidRequest):
		s.sendError(proto.CodeMalformed, err.Error(), &id)
	default:
		code, text := s.h.s.errorCode(err)
		s.sendError(code, text, &id)
	}
}

package client

// Consumer-group rules against the fake broker (fake_test.go): a poll, ack and
// dead-letter round trip, and which group requests are re-sent after a lost answer.

import (
	"errors"
	"testing"
	"time"

	"felix/proto"
)

func TestGroupsRoundTrip(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.GroupPoll:
			x.reply(&proto.GroupRecords{RequestID: m.RequestID, Group: m.Group, Shard: m.Shard, Records: []proto.GroupRecord{
				{Offset: 41, Payload: []byte("a"), Delivery: 1}, {Offset: 42, Payload: []byte("b"), Delivery: 3, Publisher: "p"}}})
		case *proto.GroupAck:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.GroupNack:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.DeadLettersList:
			next := uint64(43)
			x.reply(&proto.DeadLetters{RequestID: m.RequestID, Group: m.Group, Shard: m.Shard,
				Entries: []proto.DeadLetter{{Offset: 42, Deliveries: 5, DeadLetteredAtMs: 1767225600000}}, NextFrom: &next})
		case *proto.DeadLettersRedrive:
			n := uint64(len(m.Offsets))
			x.reply(&proto.GroupOK{RequestID: m.RequestID, Count: &n})
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	recs, err := c.Poll(ctx, "orders", 1, "billing", 100, 1500*time.Millisecond)
	if err != nil || len(recs) != 2 || recs[1].Offset != 42 || recs[1].Delivery != 3 || recs[1].Publisher != "p" || recs[0].Shard != 1 || string(recs[0].Payload) != "a" {
		t.Fatalf("poll: %+v %v", recs, err)
	}
	poll := fb.messages(proto.TypeGroupPoll)[0].(*proto.GroupPoll)
	if poll.MaxRecords != 100 || poll.MaxWaitMs != 1500 || poll.Group != "billing" || poll.Stream != "orders" || poll.Shard != 1 {
		t.Fatalf("poll request %+v", poll)
	}
	if err := c.Ack(ctx, "orders", 1, "billing", 41); err != nil {
		t.Fatal(err)
	}
	if err := c.Nack(ctx, "orders", 1, "billing", 500*time.Millisecond, 42); err != nil {
		t.Fatal(err)
	}
	if nack := fb.messages(proto.TypeGroupNack)[0].(*proto.GroupNack); nack.RedeliverAfterMs == nil || *nack.RedeliverAfterMs != 500 || nack.Offsets[0] != 42 {
		t.Fatalf("nack request %+v", nack)
	}
	entries, next, more, err := c.DeadLetters(ctx, "orders", 1, "billing", 0, 10)
	if err != nil || len(entries) != 1 || entries[0].Deliveries != 5 || !more || next != 43 || entries[0].DeadLetteredAt.UnixMilli() != 1767225600000 {
		t.Fatalf("dead letters: %+v %d %v %v", entries, next, more, err)
	}
	if n, err := c.Redrive(ctx, "orders", 1, "billing", 42, 44); err != nil || n != 2 {
		t.Fatalf("redrive: %d %v", n, err)
	}
	if _, err := c.Poll(ctx, "orders", 1, "billing", 0, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("poll max 0: %v", err)
	}
}

// Poll is not re-sent after a lost answer; Ack is.
func TestGroupRetryRules(t *testing.T) {
	fb := startFake(t, dropFirst(func(x *exchange, m proto.Message) {
		switch m := m.(type) {
		case *proto.GroupAck:
			x.reply(&proto.GroupOK{RequestID: m.RequestID})
		case *proto.GroupPoll:
			x.reply(&proto.GroupRecords{RequestID: m.RequestID})
		}
	}))
	c := fb.dial()
	ctx := testCtx(t)
	_, err := c.Poll(ctx, "s", 0, "g", 1, 0)
	mustErrIs(t, err, ErrIndeterminate)
	if err := c.Ack(ctx, "s", 0, "g", 1); err != nil {
		t.Fatal(err)
	}
	if fb.count(proto.TypeGroupPoll) != 1 || fb.count(proto.TypeGroupAck) != 2 {
		t.Fatalf("polls %d (want 1), acks %d (want 2)", fb.count(proto.TypeGroupPoll), fb.count(proto.TypeGroupAck))
	}
}

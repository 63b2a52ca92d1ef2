package client

import (
	"context"
	"fmt"
	"time"

	"felix/proto"
)

// Consumer groups (spec/client-protocol.md §8.3, docs/groups.md; broker feature "groups",
// else ErrUnsupported). A group consumes one stream shard: Poll leases records, Ack
// removes them, Nack returns them for redelivery; an offset delivered too often is
// dead-lettered, listed by DeadLetters and put back by Redrive. Permission:
// stream.subscribe.
//
// The broker treats a connection as one consumer (docs/operations.md, "Consumer groups"):
// records polled on a connection must be acked or nacked on it. The SDK therefore sends
// every group operation on the first connection of its pool; when that connection is
// replaced, leases of the old one expire and their records are redelivered. A shard led by
// another broker is answered not_leader: the SDK sends the request to that broker (one
// connection per broker, bounded hops) and sends the shard's later requests there
// (redirect_ops.go).
//
// Retries after an indeterminate outcome: Ack and DeadLetters land on the same state twice
// and are re-sent; Poll (a second poll leases more records and raises delivery counts),
// Nack and Redrive are not: a lost answer is ErrIndeterminate.

// GroupRecord is one leased record.
type GroupRecord struct {
	Shard    uint32
	Offset   uint64
	Payload  []byte
	Delivery uint32 // 1 on the first delivery
	// Publisher is the publishing principal when asked for (GroupPollOptions) and recorded.
	Publisher string
}

// GroupPollOptions tune Poll.
type GroupPollOptions struct {
	// WithPublisher asks for each record's publisher (feature "publishers").
	WithPublisher bool
}

// DeadLetter is one dead-lettered offset.
type DeadLetter struct {
	Offset         uint64
	Deliveries     uint32
	DeadLetteredAt time.Time
}

// Poll leases up to max records (1..65535) of stream shard to group, waiting up to wait
// (rounded to milliseconds) for the first one. An empty result is not an error. Never
// re-sent after an indeterminate outcome. It asks for the binary answer (payloads as they
// are, so a record up to the frame limit arrives; docs/client-protocol.md D19) and reads
// the JSON one an older broker sends.
func (c *Client) Poll(ctx context.Context, stream string, shard uint32, group string, max int, wait time.Duration, opts ...GroupPollOptions) ([]GroupRecord, error) {
	if max < 1 || max > 65535 || wait < 0 {
		return nil, fmt.Errorf("%w: poll max %d wait %v", ErrInvalidArgument, max, wait)
	}
	if err := c.requireFeature(ctx, proto.FeatureGroups); err != nil {
		return nil, err
	}
	var withPub bool
	for _, o := range opts {
		withPub = withPub || o.WithPublisher
	}
	if withPub && !c.Capabilities().Has(proto.FeaturePublishers) {
		return nil, fmt.Errorf("%w: feature %q", ErrUnsupported, proto.FeaturePublishers)
	}
	m, err := c.groupRoundTrip(ctx, stream, shard, false, func(id uint64) proto.Message {
		return &proto.GroupPoll{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, Shard: shard, Group: group,
			MaxRecords: uint32(max), MaxWaitMs: uint64(wait / time.Millisecond), WithPublisher: withPub,
			BinaryRecords: true, RequestID: id} // a binary answer: payloads without base64 (D19)
	})
	if err != nil {
		return nil, err
	}
	gr, ok := m.(*proto.GroupRecords)
	if !ok {
		return nil, unexpected(m, "group_records")
	}
	out := make([]GroupRecord, len(gr.Records))
	for i, r := range gr.Records {
		out[i] = GroupRecord{Shard: gr.Shard, Offset: r.Offset, Payload: r.Payload, Delivery: r.Delivery, Publisher: r.Publisher}
	}
	return out, nil
}

// Ack acknowledges leased offsets of group on stream shard: they are not delivered again.
// Re-sent after an indeterminate outcome (acking twice is harmless).
func (c *Client) Ack(ctx context.Context, stream string, shard uint32, group string, offsets ...uint64) error {
	if len(offsets) == 0 {
		return nil
	}
	if err := c.requireFeature(ctx, proto.FeatureGroups); err != nil {
		return err
	}
	m, err := c.groupRoundTrip(ctx, stream, shard, true, func(id uint64) proto.Message {
		return &proto.GroupAck{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, Shard: shard, Group: group, Offsets: offsets, RequestID: id}
	})
	return groupOK(m, err)
}

// Nack returns leased offsets for redelivery after redeliverAfter (rounded down to
// milliseconds; 0 = at once: the wire carries an explicit redeliver_after_ms 0, since an
// absent field means the group's default delay, 1 s). Errors: ErrInvalidArgument for a
// negative delay. Never re-sent after an indeterminate outcome.
func (c *Client) Nack(ctx context.Context, stream string, shard uint32, group string, redeliverAfter time.Duration, offsets ...uint64) error {
	if len(offsets) == 0 {
		return nil
	}
	if redeliverAfter < 0 {
		return fmt.Errorf("%w: negative redelivery delay", ErrInvalidArgument)
	}
	if err := c.requireFeature(ctx, proto.FeatureGroups); err != nil {
		return err
	}
	ms := uint64(redeliverAfter / time.Millisecond)
	after := &ms
	m, err := c.groupRoundTrip(ctx, stream, shard, false, func(id uint64) proto.Message {
		return &proto.GroupNack{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, Shard: shard, Group: group, Offsets: offsets, RedeliverAfterMs: after, RequestID: id}
	})
	return groupOK(m, err)
}

// DeadLetters lists up to limit (1..65535) dead letters of group from offset from; next is
// where the following page starts, more=false when there are no more entries. Re-sent
// after an indeterminate outcome.
func (c *Client) DeadLetters(ctx context.Context, stream string, shard uint32, group string, from uint64, limit int) (entries []DeadLetter, next uint64, more bool, err error) {
	if limit < 1 || limit > 65535 {
		return nil, 0, false, fmt.Errorf("%w: limit %d", ErrInvalidArgument, limit)
	}
	if err := c.requireFeature(ctx, proto.FeatureGroups); err != nil {
		return nil, 0, false, err
	}
	m, err := c.groupRoundTrip(ctx, stream, shard, true, func(id uint64) proto.Message {
		return &proto.DeadLettersList{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, Shard: shard, Group: group, FromOffset: from, Limit: uint32(limit), RequestID: id}
	})
	if err != nil {
		return nil, 0, false, err
	}
	dl, ok := m.(*proto.DeadLetters)
	if !ok {
		return nil, 0, false, unexpected(m, "dead_letters")
	}
	entries = make([]DeadLetter, len(dl.Entries))
	for i, e := range dl.Entries {
		entries[i] = DeadLetter{Offset: e.Offset, Deliveries: e.Deliveries, DeadLetteredAt: time.UnixMilli(int64(e.DeadLetteredAtMs))}
	}
	if dl.NextFrom != nil {
		return entries, *dl.NextFrom, true, nil
	}
	return entries, 0, false, nil
}

// Redrive puts dead-lettered offsets back into group and returns how many were redriven.
// Never re-sent after an indeterminate outcome.
func (c *Client) Redrive(ctx context.Context, stream string, shard uint32, group string, offsets ...uint64) (int, error) {
	if len(offsets) == 0 {
		return 0, nil
	}
	if err := c.requireFeature(ctx, proto.FeatureGroups); err != nil {
		return 0, err
	}
	m, err := c.groupRoundTrip(ctx, stream, shard, false, func(id uint64) proto.Message {
		return &proto.DeadLettersRedrive{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, Shard: shard, Group: group, Offsets: offsets, RequestID: id}
	})
	if err := groupOK(m, err); err != nil {
		return 0, err
	}
	if n := m.(*proto.GroupOK).Count; n != nil {
		return int(*n), nil
	}
	return 0, nil
}

func groupOK(m proto.Message, err error) error {
	if err != nil {
		return err
	}
	if _, ok := m.(*proto.GroupOK); !ok {
		return unexpected(m, "group_ok")
	}
	return nil
}

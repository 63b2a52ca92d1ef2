package client

import (
	"bytes"
	"testing"
	"time"

	"felix/proto"
)

// A record of the largest size the SDK publishes (the frame bound less 4 KiB) reaches a group consumer through
// the binary group_records answer (issue 23 item 12, docs/client-protocol.md D19): with
// FELIX_MAX_FRAME_BYTES at 1 MiB, base64 made the JSON answer 1.4 MiB, over the bound, so
// the SDK refused it and the record was redelivered in the same too large answer forever.
// An older client's poll, without binary_records, is still answered in JSON.
func TestGroupRecordAtTheFrameLimit(t *testing.T) {
	const frame = 1 << 20
	b := startBroker(t, "", "FELIX_MAX_FRAME_BYTES=1048576")
	b.createStream("jobs", true)
	c := b.dial(WithMaxFrameBytes(frame))
	ctx := testCtx(t)
	p, err := c.NewPublisher("jobs", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	size := frame - 4096 // the largest payload the SDK publishes (Publisher.Publish)
	big := bytes.Repeat([]byte{'b'}, size)
	if _, err := p.PublishSync(ctx, big); err != nil {
		t.Fatalf("publish of %d bytes: %v", size, err)
	}
	if _, err := p.PublishSync(ctx, []byte("small")); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	recs, err := c.Poll(ctx, "jobs", 0, "g", 1, 2*time.Second)
	if err != nil || len(recs) != 1 || recs[0].Offset != 0 || !bytes.Equal(recs[0].Payload, big) || recs[0].Delivery != 1 {
		t.Fatalf("poll of the %d-byte record: %d records, %v", size, len(recs), err)
	}
	if err := c.Ack(ctx, "jobs", 0, "g", 0); err != nil {
		t.Fatal(err)
	}
	// The old JSON path: a poll without binary_records gets the JSON group_records.
	m, err := c.groupRoundTrip(ctx, "jobs", 0, false, func(id uint64) proto.Message {
		return &proto.GroupPoll{TenantID: "default", Namespace: "default", Stream: "jobs", Group: "g", MaxRecords: 8, MaxWaitMs: 2000, RequestID: id}
	})
	gr, ok := m.(*proto.GroupRecords)
	if err != nil || !ok || len(gr.Records) != 1 || gr.Records[0].Offset != 1 || string(gr.Records[0].Payload) != "small" {
		t.Fatalf("JSON poll: %#v, %v", m, err)
	}
}

// decodeAnswer reads both answers to a poll: the binary frame (0x8000) and the JSON one,
// to the same *proto.GroupRecords; a truncated binary answer is ErrProtocol.
func TestDecodeAnswerGroupRecordsBothWays(t *testing.T) {
	want := &proto.GroupRecords{RequestID: 7, Group: "g", Shard: 2, Records: []proto.GroupRecord{{Offset: 5, Delivery: 1, Payload: []byte("x")}}}
	var ack proto.PublishAck
	for _, frame := range [][]byte{proto.AppendGroupRecordsFrame(nil, want), proto.AppendMessage(nil, want)} {
		hdr, err := proto.DecodeHeader(frame, proto.DefaultMaxFrameBytes)
		if err != nil {
			t.Fatal(err)
		}
		r, id, ok, err := decodeAnswer(hdr, frame[proto.HeaderSize:], &ack)
		gr, isGR := r.msg.(*proto.GroupRecords)
		if err != nil || !ok || id != 7 || !isGR || len(gr.Records) != 1 || string(gr.Records[0].Payload) != "x" || gr.Shard != 2 {
			t.Fatalf("flags %#x: %#v id %d ok %v, %v", hdr.Flags, r.msg, id, ok, err)
		}
	}
	frame := proto.AppendGroupRecordsFrame(nil, want)
	hdr, _ := proto.DecodeHeader(frame, proto.DefaultMaxFrameBytes)
	if _, _, _, err := decodeAnswer(hdr, frame[proto.HeaderSize:len(frame)-1], &ack); err == nil {
		t.Fatal("truncated binary answer accepted")
	}
}

package broker

import (
	"strings"
	"testing"

	"felix/core/groups"
	"felix/proto"
)

// A group_records answer whose payloads fill groupAnswerBytes still fits the frame
// bound, for the largest group name and offsets and delivery numbers of full width
// (docs/soak.md finding 5: a larger answer is refused by the client and lost).
func TestGroupAnswerBytesFitsTheFrame(t *testing.T) {
	for _, c := range []struct {
		frame   uint32
		records int
	}{{16 << 20, 256}, {16 << 20, 1}, {1 << 20, 1000}, {64 << 10, 10}} {
		budget := groupAnswerBytes(c.frame, c.records, false)
		out := &proto.GroupRecords{RequestID: ^uint64(0), Group: strings.Repeat("\x01", groups.MaxGroupNameBytes), Shard: ^uint32(0)}
		left := budget
		for i := 0; i < c.records; i++ {
			n := left / (c.records - i)
			left -= n
			out.Records = append(out.Records, proto.GroupRecord{Offset: ^uint64(0), Payload: make([]byte, n), Delivery: ^uint32(0)})
		}
		if got := len(out.AppendJSON(nil)); got > int(c.frame) {
			t.Errorf("frame %d, %d records, %d payload bytes: answer of %d bytes", c.frame, c.records, budget, got)
		}
		if budget < int(c.frame)/2 {
			t.Errorf("frame %d, %d records: budget %d is needlessly small", c.frame, c.records, budget)
		}
	}
}

// The binary group_records answer (D19) filled to groupAnswerBytes fits the frame bound
// too, and carries nearly the whole frame: a record of the frame bound less its envelope
// fits in one answer, where base64 held three quarters.
func TestBinaryGroupAnswerBytesFitsTheFrame(t *testing.T) {
	for _, c := range []struct {
		frame   uint32
		records int
	}{{16 << 20, 256}, {16 << 20, 1}, {1 << 20, 1000}, {64 << 10, 10}} {
		budget := groupAnswerBytes(c.frame, c.records, true)
		out := &proto.GroupRecords{RequestID: ^uint64(0), Group: strings.Repeat("g", groups.MaxGroupNameBytes), Shard: ^uint32(0)}
		left := budget
		for i := 0; i < c.records; i++ {
			n := left / (c.records - i)
			left -= n
			out.Records = append(out.Records, proto.GroupRecord{Offset: ^uint64(0), Payload: make([]byte, n), Delivery: ^uint32(0)})
		}
		if got := len(proto.AppendGroupRecordsFrame(nil, out)) - proto.HeaderSize; got > int(c.frame) {
			t.Errorf("frame %d, %d records, %d payload bytes: body of %d bytes", c.frame, c.records, budget, got)
		}
		if c.records == 1 && budget != int(c.frame)-proto.GroupRecordsEnvelope-proto.GroupRecordBytes {
			t.Errorf("frame %d: one record may carry %d bytes", c.frame, budget)
		}
	}
}

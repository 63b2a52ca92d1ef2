package sim

// Corruption faults with the real FLXI codec: what a replication machine
// whose messages are FLXI frames sees when the simulator flips a byte.

import (
	"bytes"
	"testing"

	"felix/proto"
)

// flxiRecordsFrame is one encoded ReplicateRecords frame with two payloads.
func flxiRecordsFrame(t *testing.T) []byte {
	t.Helper()
	m := &proto.ReplicateRecords{Log: proto.LogStream, CorrelationID: 7, Epoch: 3, FirstOffset: 100,
		Shard:    proto.ShardRef{Tenant: []byte("t"), Namespace: []byte("ns"), Name: []byte("orders"), Shard: 2},
		Payloads: [][]byte{[]byte("first record"), []byte("second record")}}
	m.Checksum = proto.BatchChecksum(m.Payloads)
	frame, err := proto.AppendInternalFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	return frame
}

// flxiOutcome decodes a frame as a follower would and says what it saw:
// "rejected" (header or body does not decode), "checksum" (decodes, batch
// checksum fails) or "accepted" (decodes and passes).
func flxiOutcome(frame []byte) string {
	h, err := proto.DecodeInternalHeader(frame, 1<<20)
	if err != nil || int(h.Length) != len(frame)-proto.InternalHeaderSize {
		return "rejected"
	}
	var r proto.ReplicateRecords
	if err := proto.DecodeReplicateRecords(h.Kind, frame[proto.InternalHeaderSize:], &r); err != nil {
		return "rejected"
	}
	if !r.ChecksumOK() {
		return "checksum"
	}
	return "accepted"
}

// TestFLXICorruption: a byte flipped inside the payloads always fails the
// batch checksum; a byte flipped in the fields before them (shard, epoch,
// first offset, correlation id) is not covered by any checksum and can be
// accepted as a different, valid message. The harness of a replication
// machine over FLXI frames should therefore corrupt payload bytes only (see
// corruptPayloadByte): on the wire QUIC's packet protection already turns
// corruption into loss, and what a checksum has to catch is damage to the
// records themselves.
func TestFLXICorruption(t *testing.T) {
	frame := flxiRecordsFrame(t)
	if got := flxiOutcome(frame); got != "accepted" {
		t.Fatalf("clean frame: %s", got)
	}
	payloadStart := len(frame) - len("first record") - len("second record") - 8 // two u32 length prefixes
	r := NewRand(1)
	counts := map[string]map[string]int{"payloads": {}, "fields": {}}
	for range 2000 {
		bad, _ := FlipByte(frame, r)
		i := 0
		for i < len(frame) && bad[i] == frame[i] {
			i++
		}
		where := "fields"
		if i >= payloadStart {
			where = "payloads"
		}
		counts[where][flxiOutcome(bad)]++
	}
	t.Logf("byte flips in the payloads: %v; before them: %v", counts["payloads"], counts["fields"])
	if counts["payloads"]["accepted"] != 0 || counts["payloads"]["checksum"] == 0 {
		t.Fatalf("a flipped payload byte must fail the batch checksum: %v", counts["payloads"])
	}
	for range 200 {
		bad, _ := corruptPayloadByte(frame, r)
		if got := flxiOutcome(bad); got == "accepted" || bytes.Equal(bad, frame) {
			t.Fatalf("corruptPayloadByte gave a frame the follower %s", got)
		}
	}
}

// corruptPayloadByte is the shape of a Config.Corrupt for FLXI
// ReplicateRecords frames: it flips one byte of the payload area (the
// length-prefixed payloads after the fields; here the test frame's, whose
// size is known), so the follower's batch checksum is what must notice. A
// real harness finds the area by decoding the frame.
func corruptPayloadByte(frame []byte, r *Rand) ([]byte, string) {
	tail := len("first record") + len("second record") + 8
	out := append([]byte(nil), frame...)
	head := len(out) - tail
	flipped, note := FlipByte(out[head:], r)
	copy(out[head:], flipped)
	return out, "payload " + note
}

package meta

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
)

// Snapshot format (docs/controlplane.md, "Snapshot format"), big-endian:
//
//	header (36 bytes): magic "FLXM" | version u16 (1) | reserved u16 (0) |
//	  index u64 | feed epoch u64 | record count u32 | body length u32 |
//	  crc32c u32 of the header's first 32 bytes and the body
//	body: records, each [type u16][length u32][strict JSON]
//
// Records come in type order, each table sorted by key, so one state always
// encodes to the same bytes.
const (
	SnapshotMagic     = "FLXM"
	SnapshotVersion   = 1
	SnapshotHeaderLen = 36
)

// The snapshot record types. Numbers are never reused.
const (
	RecordMeta       uint16 = 1
	RecordTenant     uint16 = 2
	RecordNamespace  uint16 = 3
	RecordStream     uint16 = 4
	RecordCache      uint16 = 5
	RecordTombstone  uint16 = 6
	RecordBroker     uint16 = 7
	RecordAssignment uint16 = 8
	RecordReport     uint16 = 9
	RecordFeature    uint16 = 10
	RecordMember     uint16 = 11
	RecordGeneration uint16 = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is a point-in-time snapshot of the state machine: the state
// (immutable) and the feed epoch when it was taken.
type Snapshot struct {
	State *State
	Epoch uint64
}

// Snapshot takes a point-in-time snapshot in O(1) (the current State, a
// frozen go-memdb snapshot); Encode it off the apply goroutine.
func (f *FSM) Snapshot() *Snapshot { return &Snapshot{State: f.state, Epoch: f.feed.epoch} }

// generationRecord is one RecordGeneration body.
type generationRecord struct {
	Key        string `json:"key"`
	Generation uint64 `json:"generation"`
}

// Encode gives the snapshot's bytes.
func (sn *Snapshot) Encode() ([]byte, error) {
	s := sn.State
	body := []byte{}
	count := uint32(0)
	add := func(typ uint16, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		body = binary.BigEndian.AppendUint16(body, typ)
		body = binary.BigEndian.AppendUint32(body, uint32(len(b)))
		body = append(body, b...)
		count++
		return nil
	}
	if err := add(RecordMeta, s.meta); err != nil {
		return nil, err
	}
	var err error
	each := func(typ uint16, vals []any) {
		for _, v := range vals {
			if err == nil {
				err = add(typ, v)
			}
		}
	}
	each(RecordTenant, anys(s.tenants.values()))
	each(RecordNamespace, anys(s.namespaces.values()))
	each(RecordStream, anys(s.streams.values()))
	each(RecordCache, anys(s.caches.values()))
	each(RecordTombstone, anys(s.tombstones.values()))
	each(RecordBroker, anys(s.brokers.values()))
	each(RecordAssignment, anys(s.assignments.values()))
	each(RecordReport, anys(s.reports.values()))
	each(RecordFeature, anys(s.features.values()))
	each(RecordMember, anys(s.members.values()))
	each(RecordGeneration, anys(s.generations.values()))
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, SnapshotHeaderLen)
	copy(hdr, SnapshotMagic)
	binary.BigEndian.PutUint16(hdr[4:], SnapshotVersion)
	binary.BigEndian.PutUint64(hdr[8:], s.index)
	binary.BigEndian.PutUint64(hdr[16:], sn.Epoch)
	binary.BigEndian.PutUint32(hdr[24:], count)
	binary.BigEndian.PutUint32(hdr[28:], uint32(len(body)))
	binary.BigEndian.PutUint32(hdr[32:], crcOf(hdr[:32], body))
	return append(hdr, body...), nil
}

// crcOf is the snapshot checksum: CRC-32C of the header's first 32 bytes
// and the body.
func crcOf(hdr, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, body)
}

func anys[V any](vs []V) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// SnapshotError refuses snapshot bytes: Reason is "short", "bad magic",
// "unknown version", "bad checksum", "unknown record type" or "malformed
// record" (Type, Offset in the body).
type SnapshotError struct {
	Reason string
	Type   uint16
	Offset int
	Err    error
}

// Error names the reason and where.
func (e *SnapshotError) Error() string {
	s := "meta: snapshot: " + e.Reason
	if e.Type != 0 {
		s += fmt.Sprintf(" (record type %d at body offset %d)", e.Type, e.Offset)
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap gives the decoding error.
func (e *SnapshotError) Unwrap() error { return e.Err }

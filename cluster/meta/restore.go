package meta

import (
	"encoding/binary"
	"fmt"
)

// DecodeSnapshot reads snapshot bytes into a State and its epoch. Errors:
// *SnapshotError for a short or over-long input, a bad magic, a version
// this build does not know, a bad checksum, an unknown record type, a
// record that does not decode strictly.
func DecodeSnapshot(data []byte) (*State, uint64, error) {
	if len(data) < SnapshotHeaderLen {
		return nil, 0, &SnapshotError{Reason: "short"}
	}
	hdr := data[:SnapshotHeaderLen]
	if string(hdr[:4]) != SnapshotMagic {
		return nil, 0, &SnapshotError{Reason: "bad magic"}
	}
	if v := binary.BigEndian.Uint16(hdr[4:]); v != SnapshotVersion {
		return nil, 0, &SnapshotError{Reason: "unknown version", Err: fmt.Errorf("version %d, this build reads %d", v, SnapshotVersion)}
	}
	body := data[SnapshotHeaderLen:]
	if n := binary.BigEndian.Uint32(hdr[28:]); int(n) != len(body) {
		return nil, 0, &SnapshotError{Reason: "short", Err: fmt.Errorf("body of %d bytes, header says %d", len(body), n)}
	}
	if crcOf(hdr[:32], body) != binary.BigEndian.Uint32(hdr[32:]) {
		return nil, 0, &SnapshotError{Reason: "bad checksum"}
	}
	s := &State{index: binary.BigEndian.Uint64(hdr[8:])}
	count := binary.BigEndian.Uint32(hdr[24:])
	for off, n := 0, uint32(0); off < len(body) || n < count; n++ {
		if len(body)-off < 6 || n >= count {
			return nil, 0, &SnapshotError{Reason: "short", Offset: off}
		}
		typ := binary.BigEndian.Uint16(body[off:])
		l := int(binary.BigEndian.Uint32(body[off+2:]))
		if len(body)-off-6 < l {
			return nil, 0, &SnapshotError{Reason: "short", Type: typ, Offset: off}
		}
		if err := s.restoreRecord(typ, body[off+6:off+6+l]); err != nil {
			return nil, 0, &SnapshotError{Reason: err.reason, Type: typ, Offset: off, Err: err.err}
		}
		off += 6 + l
	}
	s.seal()
	return s, binary.BigEndian.Uint64(hdr[16:]), nil
}

type recordErr struct {
	reason string
	err    error
}

func restoreInto[V any](t *table[V], rec []byte, key func(V) string) *recordErr {
	var v V
	if err := strictJSON(rec, &v); err != nil {
		return &recordErr{"malformed record", err}
	}
	t.put(key(v), v)
	return nil
}

func (s *State) restoreRecord(typ uint16, rec []byte) *recordErr {
	switch typ {
	case RecordMeta:
		if err := strictJSON(rec, &s.meta); err != nil {
			return &recordErr{"malformed record", err}
		}
		return nil
	case RecordTenant:
		return restoreInto(&s.tenants, rec, func(v Tenant) string { return v.TenantID })
	case RecordNamespace:
		return restoreInto(&s.namespaces, rec, func(v Namespace) string { return v.TenantID + "/" + v.Namespace })
	case RecordStream:
		return restoreInto(&s.streams, rec, func(v Stream) string { return v.TenantID + "/" + v.Namespace + "/" + v.Stream })
	case RecordCache:
		return restoreInto(&s.caches, rec, func(v Cache) string { return v.TenantID + "/" + v.Namespace + "/" + v.Cache })
	case RecordTombstone:
		return restoreInto(&s.tombstones, rec, func(v Tombstone) string {
			return v.Kind + "/" + v.TenantID + "/" + v.Namespace + "/" + v.Name
		})
	case RecordBroker:
		return restoreInto(&s.brokers, rec, func(v Broker) string { return v.NodeID })
	case RecordAssignment:
		return restoreInto(&s.assignments, rec, func(v Assignment) string { return v.Key() })
	case RecordReport:
		return restoreInto(&s.reports, rec, func(v Report) string { return v.Key() })
	case RecordFeature:
		return restoreInto(&s.features, rec, func(v FeatureState) string { return v.Name })
	case RecordMember:
		return restoreInto(&s.members, rec, func(v Member) string { return v.ID })
	case RecordGeneration:
		var g generationRecord
		if err := strictJSON(rec, &g); err != nil {
			return &recordErr{"malformed record", err}
		}
		s.generations.put(g.Key, g.Generation)
		return nil
	}
	return &recordErr{reason: "unknown record type"}
}

// Restore replaces the state with the snapshot's (hashicorp/raft's
// FSM.Restore; issue 17 item 2). The feed restarts empty: every cursor at or
// below the snapshot's index is Gone. The feed epoch becomes one above both
// the current and the snapshot's epoch when the snapshot is older than the
// state it replaces, so brokers ahead of it reload; otherwise the larger of
// the two. Errors: DecodeSnapshot's *SnapshotError, with the state
// unchanged.
func (f *FSM) Restore(data []byte) error {
	s, epoch, err := DecodeSnapshot(data)
	if err != nil {
		return err
	}
	newEpoch := max(epoch, f.feed.epoch)
	if s.index < f.state.index {
		newEpoch++
	}
	f.state = s
	f.feed = feed{retention: f.cfg.ChangeRetention, through: s.index, epoch: newEpoch}
	return nil
}

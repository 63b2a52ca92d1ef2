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
	db := freshDB()
	w := db.Txn(true)
	defer w.Abort() // a no-op after the commit
	s := bind(&store{w: w}, binary.BigEndian.Uint64(hdr[8:]), Meta{})
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
	if s.st.err != nil {
		return nil, 0, &SnapshotError{Reason: "malformed record", Err: s.st.err}
	}
	w.Commit()
	return committed(db, s.index, s.meta), binary.BigEndian.Uint64(hdr[16:]), nil
}

type recordErr struct {
	reason string
	err    error
}

func restoreInto[V any](t table[V], rec []byte) *recordErr {
	var v V
	if err := strictJSON(rec, &v); err != nil {
		return &recordErr{"malformed record", err}
	}
	t.put(v)
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
		return restoreInto(s.tenants, rec)
	case RecordNamespace:
		return restoreInto(s.namespaces, rec)
	case RecordStream:
		return restoreInto(s.streams, rec)
	case RecordCache:
		return restoreInto(s.caches, rec)
	case RecordTombstone:
		return restoreInto(s.tombstones, rec)
	case RecordBroker:
		return restoreInto(s.brokers, rec)
	case RecordAssignment:
		return restoreInto(s.assignments, rec)
	case RecordReport:
		return restoreInto(s.reports, rec)
	case RecordFeature:
		return restoreInto(s.features, rec)
	case RecordMember:
		return restoreInto(s.members, rec)
	case RecordGeneration:
		return restoreInto(s.generations, rec)
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
	f.db = s.st.db.Snapshot() // written from here on; s keeps its own frozen view
	f.state = s
	f.feed = feed{retention: f.cfg.ChangeRetention, through: s.index, epoch: newEpoch}
	return nil
}

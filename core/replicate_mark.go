package core

// The release mark across a restart (issue 18; docs/replication.md, "Wiring", "A
// restarted Quorum leader"). A Quorum shard with a replica set releases only up to the
// quorum mark, but a shard reopens with its release mark at its recovered tail (the
// single node's rule: committed = released = next offset), which would release records
// no majority confirmed. So attaching a replica set (Engine.SetReplicated on) writes the
// release-mark file beside the records log — the release mark at that moment, all of it
// released already; a close rewrites it with the mark reached — and detaching removes it. A durable Quorum shard that reopens with
// the file opens attached, with its release mark (and its live start) at the recorded
// mark: every record above it is held until Engine.Release brings the replica set's
// quorum mark. Without the file (a single node, never attached) it opens as before.

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"

	"felix/internal/vfs"
)

// ReleaseMarkFileName is the release-mark file of a replicated Quorum shard's records
// log directory: magic FLRM, u16 version 1, u64 release mark, CRC-32 (IEEE) of the
// prior bytes, big-endian. Absent, short or failing its checksum: the shard was never
// attached (it opens releasing at its tail, as a single node).
const ReleaseMarkFileName = "release-mark"

const releaseMarkMagic uint32 = 0x464C524D // "FLRM"

// encodeReleaseMark returns the release-mark file bytes of mark.
func encodeReleaseMark(mark uint64) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 18), releaseMarkMagic)
	b = binary.BigEndian.AppendUint16(b, 1)
	b = binary.BigEndian.AppendUint64(b, mark)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeReleaseMark parses a release-mark file; ok=false for anything damaged.
func decodeReleaseMark(b []byte) (mark uint64, ok bool) {
	if len(b) != 18 || binary.BigEndian.Uint32(b) != releaseMarkMagic || binary.BigEndian.Uint16(b[4:]) != 1 ||
		crc32.ChecksumIEEE(b[:14]) != binary.BigEndian.Uint32(b[14:]) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[6:]), true
}

// releaseMarkPath is the file system and path of s's release-mark file; ok=false on a
// disk that keeps no files (the test disks).
func (s *streamShard) releaseMarkPath() (vfs.FS, string, bool) {
	return s.records.stateFile(ReleaseMarkFileName)
}

// keepReleaseMark writes (attached) or removes (detached) s's release-mark file, on
// its core. Errors wrap ErrStorageFailed.
func (s *streamShard) keepReleaseMark(attached bool) error {
	fsys, p, ok := s.releaseMarkPath()
	if !ok {
		return nil
	}
	if attached {
		return storageError("release mark", vfs.WriteFileAtomic(fsys, p, encodeReleaseMark(s.released), 0o644))
	}
	if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return storageError("release mark", err)
	}
	return nil
}

// closeReleaseMark records, as a shard closes attached, the release mark it reached, so
// a clean restart holds back only what was not released yet. Best effort: a failed write
// leaves the older mark, which is lower, never higher.
func (s *streamShard) closeReleaseMark() {
	if s.hasReplicaSet && s.durable && s.consistency == ConsistencyQuorum {
		_ = s.keepReleaseMark(true)
	}
}

// reopenReleaseMark applies the release-mark file to a durable Quorum shard that just
// opened (committed = released = its tail): with a readable file it opens attached,
// its release mark and live start at the recorded mark (within [earliest, tail]).
func (s *streamShard) reopenReleaseMark() {
	if !s.durable || s.consistency != ConsistencyQuorum {
		return
	}
	fsys, p, ok := s.releaseMarkPath()
	if !ok {
		return
	}
	b, err := vfs.ReadFile(fsys, p)
	if err != nil {
		return
	}
	mark, ok := decodeReleaseMark(b)
	if !ok {
		return
	}
	mark = min(max(mark, s.records.EarliestOffset()), s.committed)
	s.hasReplicaSet = true
	s.gateKeys(true) // producer_gate.go
	s.released, s.fanoutNext = mark, mark
}

// fanoutRecovered hands live subscribers the recovered records in [s.fanoutNext, end):
// held at reopen below the release mark, they have no batch of their own. At most 256
// records per delivery. A record that cannot be read back ends the subscribers (no
// silent gap), as releaseBatch does.
func (s *streamShard) fanoutRecovered(end uint64) {
	for s.fanoutNext < end {
		if len(s.subs) == 0 {
			s.fanoutNext = end
			return
		}
		first := s.fanoutNext
		n := min(end-first, 256)
		var b frameBuilder
		b.reset(true, first, 4096)
		err := s.records.ReadCommitted(first, 1<<30, func(off uint64, _ int64, p []byte) bool {
			if off >= first+n {
				return false
			}
			b.add(p)
			return true
		})
		if err != nil || uint64(b.count) != n {
			s.endSubscribers(storageError("read back", errors.Join(err, errors.New("recovered records not readable as data"))))
			s.fanoutNext = first + n
			continue
		}
		s.fanout(first, int(n), b.finish())
	}
}

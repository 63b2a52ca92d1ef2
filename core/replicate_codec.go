package core

import (
	"fmt"

	"felix/seglog"
)

// ReplicaPayloadVersion is the seglog record format version replicated payloads are
// encoded in (seglog.AppendRecord): the newest this build reads, which holds every
// record kind and a publisher, so a payload carries a stored record whole whatever the
// version of the segment it was read from (issue 18: "the payloads of every
// Replicate*Records body are the stored records in their log encoding").
const ReplicaPayloadVersion = seglog.MaxReadVersion

// AppendReplicaPayload appends r's replicated payload to dst: its log encoding in
// ReplicaPayloadVersion (a 32-byte header with length, offset, timestamp in µs, kind,
// flags and checksums, then the publisher when present and the payload). Two logs
// holding the same record at the same offset give the same bytes: the follower's
// overlap comparison is over them.
func AppendReplicaPayload(dst []byte, r *seglog.Record) []byte {
	return seglog.AppendRecord(dst, ReplicaPayloadVersion, r)
}

// DecodeReplicaPayload parses one replicated payload into a record (its slices alias b)
// and checks it is that record exactly (no trailing bytes). Errors: a
// *seglog.CorruptionError (truncated, bad header or body checksum, invalid kind or
// flags, too large) or ErrInvalid for trailing bytes: a peer's bad payload is refused,
// never stored.
func DecodeReplicaPayload(b []byte) (seglog.Record, error) {
	r, n, err := seglog.DecodeRecord(b, ReplicaPayloadVersion)
	if err != nil {
		return seglog.Record{}, err
	}
	if n != len(b) {
		return seglog.Record{}, fmt.Errorf("%w: replicated payload of %d bytes holds a record of %d", ErrInvalid, len(b), n)
	}
	return r, nil
}

package seglog

// WalkRecord is one good record as Walk reads it from disk: its offset, timestamp
// (Unix microseconds, the leader's), kind, flags, stored checksum, and body (the
// record's stored bytes after its header: publisher and payload as the format lays them
// out; valid only during the callback).
type WalkRecord struct {
	Offset    uint64
	Timestamp int64
	Kind      RecordKind
	Flags     byte
	Checksum  uint32
	Body      []byte
}

// Walk calls fn for each good record of the log in dir, oldest segment first and in
// offset order within each, from opts.From, until fn returns false. It is read-only and
// opens no Log (a broker may be stopped or crashed; its torn tail is skipped like Dump
// skips it). Damaged records are passed to bad when it is not nil. Replica comparisons
// use it: two replicas of a log hold the same records when their WalkRecords agree up to
// an offset (docs/replication.md: a follower's log is record-for-record the leader's).
// Errors: ErrStorageFailed (unreadable directory or file).
func Walk(dir string, opts ToolOptions, fn func(r *WalkRecord) bool, bad func(*CorruptionError)) error {
	stopped := false
	return walkSegments(opts.fs(), dir, func(info *SegmentInfo, f File, h SegmentHeader) error {
		walkRecords(f, info, h, func(rh *recordHeader, rec []byte) {
			if stopped || rh.offset < opts.From {
				return
			}
			w := WalkRecord{Offset: rh.offset, Timestamp: rh.ts, Kind: rh.kind, Flags: rh.flags, Checksum: rh.checksum,
				Body: rec[RecordHeaderLen(h.Version):]}
			stopped = !fn(&w)
		}, func(ce *CorruptionError) {
			if bad != nil && !stopped {
				bad(ce)
			}
		})
		return nil
	})
}

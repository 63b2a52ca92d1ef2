package core

// ShardStats is one shard's log as Engine.StreamStats reads it on the shard's
// core (`felix stream describe`; issue 23 item 5).
type ShardStats struct {
	Shard int
	// Open is false for a shard not open on this engine (another node's, or
	// one closed); its other fields are zero.
	Open bool
	// FirstOffset is the oldest retained offset; NextOffset is one past the
	// last committed record. Records = NextOffset - FirstOffset: the offsets
	// the shard holds (a durable shard's generation-start records included).
	// Empty when Records is 0.
	FirstOffset uint64
	NextOffset  uint64
	Records     uint64
	// Bytes is the record log's segment bytes (durable; what retention
	// bounds), 0 for an in-memory shard.
	Bytes int64
}

// StreamStats returns the retained range and size of each shard of stream
// name open here, read on the shards' cores. Errors: ErrNotFound, ErrClosed.
func (e *Engine) StreamStats(name StreamName) ([]ShardStats, error) {
	meta := e.lookup(name)
	if meta == nil {
		return nil, ErrNotFound
	}
	out := make([]ShardStats, len(meta.shards))
	for i, s := range meta.shards {
		out[i].Shard = i
		if s == nil {
			continue
		}
		err := e.runOn(s.c, func(*core) error {
			if s.closed {
				return nil
			}
			out[i] = s.stats()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stats reads the shard's retained range and log size (core goroutine).
func (s *streamShard) stats() ShardStats {
	st := ShardStats{Shard: s.index, Open: true, FirstOffset: s.earliestOffset(), NextOffset: s.committedOffset()}
	if s.durable && s.unservable == nil && s.records != nil {
		if l := s.records.seglog(); l != nil {
			st.Bytes = l.Bytes()
		}
	}
	if st.NextOffset > st.FirstOffset {
		st.Records = st.NextOffset - st.FirstOffset
	}
	return st
}

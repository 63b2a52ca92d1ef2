package broker

// ShardStats is one shard of a stream as GET .../streams/{s} shows it in "shard_stats"
// (issue 23 item 5; `felix stream describe`), read from this broker's engine: the oldest
// retained offset, the last committed one, the offsets held between them (records; a
// durable shard's generation-start records included) and the record log's segment
// bytes (what retention bounds; 0 for an in-memory shard). A shard not open on this
// broker shows open false and zeros; an empty shard has no first/last offset.
type ShardStats struct {
	Shard       int     `json:"shard"`
	Open        bool    `json:"open"`
	FirstOffset *uint64 `json:"first_offset,omitempty"`
	LastOffset  *uint64 `json:"last_offset,omitempty"`
	Records     uint64  `json:"records"`
	Bytes       int64   `json:"bytes"`
}

// describedStreamStats is a stream's catalog entry with its damaged shards and its
// per-shard stats (the GET .../streams/{s} answer).
type describedStreamStats struct {
	describedStream
	ShardStats []ShardStats `json:"shard_stats,omitempty"`
}

// StreamStatser is what an Admin.Streams that holds the streams' logs (the Server)
// also implements: StreamStats returns one stream's per-shard stats on this broker, nil
// when none is open here.
type StreamStatser interface {
	StreamStats(tenant, namespace, stream string) []ShardStats
}

// describe adds what this broker holds of stream s to its catalog entry: its damaged
// shards (Admin.Damage) and per-shard stats (Admin.Streams when a StreamStatser).
func (a *Admin) describe(s Stream) describedStreamStats {
	out := describedStreamStats{describedStream: describedStream{Stream: s}}
	if a.Damage != nil {
		out.Damaged = a.Damage(s.TenantID, s.Namespace, s.Stream)
	}
	if st, ok := a.Streams.(StreamStatser); ok {
		out.ShardStats = st.StreamStats(s.TenantID, s.Namespace, s.Stream)
	}
	return out
}

// StreamStats is the Server's StreamStatser: the engine's per-shard stats of one stream
// (nil when the engine is not open or the stream not open here).
func (s *Server) StreamStats(tenant, namespace, stream string) []ShardStats {
	if s.engine == nil {
		return nil
	}
	stats, err := s.engine.StreamStats(streamName(tenant, namespace, stream))
	if err != nil {
		return nil
	}
	out := make([]ShardStats, len(stats))
	for i, st := range stats {
		out[i] = ShardStats{Shard: st.Shard, Open: st.Open, Records: st.Records, Bytes: st.Bytes}
		if st.Records > 0 {
			first, last := st.FirstOffset, st.NextOffset-1
			out[i].FirstOffset, out[i].LastOffset = &first, &last
		}
	}
	return out
}

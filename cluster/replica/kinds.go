package replica

import "felix/proto"

// ShardKind says whose shard a follower's log belongs to: a stream's or a cache's. It is
// proto.ShardKind (one definition for proto, core and this package; String, HasLog). A
// stream and a cache may share a name, so the decider checks the message's kind against it
// (seeds/internal-protocol.txt, "Replicating a cache").
type ShardKind = proto.ShardKind

// Shard kinds; the zero value is invalid.
const (
	ShardStream = proto.ShardStream
	ShardCache  = proto.ShardCache
)

// Epoch is one entry of a log's generation history (the epochs file, storage-format.md §7):
// Generation began at StartOffset. A history is in increasing order of both fields.
type Epoch struct {
	Generation  uint64
	StartOffset uint64
}

// Ballot is what a replica accepted its current generation at, and from whom (the ballot
// file, storage-format.md §7). An empty Leader is a ballot written by an older build: the
// first leader to reach the replica at that generation is recorded (roll-forward).
type Ballot struct {
	Generation uint64
	Leader     string
}

// lastEpoch returns the newest entry of h and whether there is one.
func lastEpoch(h []Epoch) (Epoch, bool) {
	if len(h) == 0 {
		return Epoch{}, false
	}
	return h[len(h)-1], true
}

// cutEpochs returns the entries of h that began below offset (the history of a log
// truncated to offset), as a new slice.
func cutEpochs(h []Epoch, offset uint64) []Epoch {
	out := make([]Epoch, 0, len(h)+1)
	for _, e := range h {
		if e.StartOffset < offset {
			out = append(out, e)
		}
	}
	return out
}

package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"felix/testbed/corpus"
	"sync"
	"sync/atomic"
	"time"

	"felix/client"
)

const tenant, namespace = "default", "default"

// index maps a record key to its corpus entry.
type index struct {
	byPath map[string]int32
	files  []corpus.File
}

func newIndex(files []corpus.File) *index {
	ix := &index{byPath: make(map[string]int32, len(files)), files: files}
	for i, f := range files {
		ix.byPath[f.Path] = int32(i)
	}
	return ix
}

// lookup returns the corpus entry of a delivered payload, or -1 when it is not a record
// some publisher sent (unknown key, or content whose SHA-256 differs).
func (ix *index) lookup(p []byte) int32 {
	key, content, err := corpus.DecodeRecord(p)
	if err != nil {
		return -1
	}
	i, ok := ix.byPath[string(key)]
	if !ok || sha256.Sum256(content) != ix.files[i].Sum {
		return -1
	}
	return i
}

// shardSub follows one shard through an SDK Subscription from earliest. The SDK
// re-subscribes from the last delivered offset + 1 after a lost connection; should the
// Subscription itself fail, a new one starts at the next offset this test expects.
type shardSub struct {
	shard       uint32
	next        atomic.Uint64 // next expected offset
	recs        []int32       // corpus index per offset (-1 = foreign, -2 = never delivered)
	gaps        int           // offsets that never arrived (a record past next)
	reportedGap uint64        // Record.Gap sums (drops the SDK noticed)
	dups        int           // offsets delivered again (a record below next)
	noOffset    int           // records without an offset
	restarts    int           // Subscriptions created after the first
	lastErr     error
}

// run reads until ctx ends.
func (s *shardSub) run(ctx context.Context, cl *client.Client, ix *index, stream string) {
	start := client.Earliest
	for ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		sub, err := cl.Subscribe(sctx, stream, start, client.SubscribeOptions{Shards: []uint32{s.shard}})
		cancel()
		if err == nil {
			err = s.read(ctx, sub, ix)
			sub.Close()
		}
		if ctx.Err() != nil {
			return
		}
		s.lastErr = err
		s.restarts++
		start = client.Offset(s.next.Load())
		sleepCtx(ctx, 50*time.Millisecond)
	}
}

func (s *shardSub) read(ctx context.Context, sub *client.Subscription, ix *index) error {
	for {
		r, err := sub.Next(ctx)
		if err != nil {
			return err
		}
		if !r.HasOffset {
			s.noOffset++
			continue
		}
		s.reportedGap += r.Gap
		next := s.next.Load()
		switch {
		case r.Offset < next:
			s.dups++
			continue
		case r.Offset > next:
			s.gaps += int(r.Offset - next)
			for ; next < r.Offset; next++ {
				s.recs = append(s.recs, -2)
			}
		}
		s.recs = append(s.recs, ix.lookup(r.Payload))
		s.next.Store(next + 1)
	}
}

// groupState is what the two consumers of the group saw, shared between them.
type groupState struct {
	mu          sync.Mutex
	deliveries  []map[uint64]uint32 // per shard: offset → deliveries seen
	foreign     int                 // delivered payloads no publisher sent
	refused     int                 // acks the broker refused (lease ended by a restart)
	pollErrors  int
	lastPollErr error
	maxCount    uint32
}

func newGroupState(shards int) *groupState {
	g := &groupState{deliveries: make([]map[uint64]uint32, shards)}
	for i := range g.deliveries {
		g.deliveries[i] = map[uint64]uint32{}
	}
	return g
}

// covered reports whether the group delivered every offset below end[shard].
func (g *groupState) covered(end []uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s, e := range end {
		for off := uint64(0); off < e; off++ {
			if g.deliveries[s][off] == 0 {
				return false
			}
		}
	}
	return true
}

// consume is one consumer of the group: its own SDK client with a single connection (the
// broker's consumer is the connection, so Poll and Ack must travel on the same one). It
// polls every shard in turn and acks what it got, until ctx ends.
func (g *groupState) consume(ctx context.Context, cl *client.Client, ix *index, stream, group string, shards int) {
	for shard := uint32(0); ctx.Err() == nil; shard = (shard + 1) % uint32(shards) {
		octx, cancel := context.WithTimeout(ctx, 20*time.Second)
		recs, err := cl.Poll(octx, stream, shard, group, 256, 50*time.Millisecond)
		cancel()
		if err != nil {
			g.mu.Lock()
			g.pollErrors++
			g.lastPollErr = err
			g.mu.Unlock()
			sleepCtx(ctx, 20*time.Millisecond)
			continue
		}
		if len(recs) == 0 {
			continue
		}
		offs := make([]uint64, len(recs))
		g.mu.Lock()
		for i, r := range recs {
			offs[i] = r.Offset
			if ix.lookup(r.Payload) < 0 {
				g.foreign++
			}
			g.deliveries[shard][r.Offset]++
			g.maxCount = max(g.maxCount, r.Delivery)
		}
		g.mu.Unlock()
		octx, cancel = context.WithTimeout(ctx, 20*time.Second)
		err = cl.Ack(octx, stream, shard, group, offs...)
		cancel()
		if errors.Is(err, client.ErrRefused) {
			g.mu.Lock()
			g.refused++
			g.mu.Unlock()
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// delivered returns how many distinct offsets the group delivered.
func (g *groupState) delivered() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, m := range g.deliveries {
		n += len(m)
	}
	return n
}

// missing returns up to max offsets below end[shard] the group has not delivered yet, per
// shard.
func (g *groupState) missing(end []uint64, limit int) [][]uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([][]uint64, len(end))
	for s, e := range end {
		for off := uint64(0); off < e && len(out[s]) < limit; off++ {
			if g.deliveries[s][off] == 0 {
				out[s] = append(out[s], off)
			}
		}
	}
	return out
}

// redriveDeadLetters does what an application does with its dead letters: it lists them
// and redrives them, so they are delivered again. A record dead-letters without the test
// ever seeing it when max_deliveries (5) poll answers carrying it were lost to crashes
// (docs/groups.md: the delivery count is durable, written before the answer). It returns
// how many offsets it redrove.
func (g *groupState) redriveDeadLetters(ctx context.Context, cl *client.Client, stream, group string, shards int) (int, error) {
	total := 0
	for shard := uint32(0); shard < uint32(shards); shard++ {
		var from uint64
		for {
			octx, cancel := context.WithTimeout(ctx, 20*time.Second)
			entries, next, more, err := cl.DeadLetters(octx, stream, shard, group, from, 1000)
			cancel()
			if err != nil {
				return total, err
			}
			if len(entries) > 0 {
				offs := make([]uint64, len(entries))
				for i, e := range entries {
					offs[i] = e.Offset
				}
				octx, cancel := context.WithTimeout(ctx, 20*time.Second)
				n, err := cl.Redrive(octx, stream, shard, group, offs...)
				cancel()
				if err != nil {
					return total, err
				}
				total += n
			}
			if !more {
				break
			}
			from = next
		}
	}
	return total, nil
}

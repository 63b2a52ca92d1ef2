package forwarding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"felix/client"
	"felix/testbed/history"
	"felix/testbed/scenario"
)

// opTimeout bounds one client operation of the workload.
const opTimeout = 20 * time.Second

// run is one recorded workload: the history recorder, the process ids handed out, and
// the end of every stream shard's acknowledged log (the highest acked offset + 1), which
// the subscribers' final reads must reach.
type run struct {
	rec   *history.Recorder
	procs atomic.Int64

	mu    sync.Mutex
	acked map[string]map[uint32]uint64 // stream → shard → highest acked offset + 1
}

func newRun(rec *history.Recorder) *run {
	return &run{rec: rec, acked: map[string]map[uint32]uint64{}}
}

// process returns a fresh logical process id (one per worker goroutine).
func (r *run) process() int { return int(r.procs.Add(1) - 1) }

// ackedEnd is stream shard's highest acked offset + 1 (0: nothing acked).
func (r *run) ackedEnd(stream string, shard uint32) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked[stream][shard]
}

func (r *run) noteAck(stream string, shard uint32, offset uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.acked[stream] == nil {
		r.acked[stream] = map[uint32]uint64{}
	}
	r.acked[stream][shard] = max(r.acked[stream][shard], offset+1)
}

// tally counts a worker's outcomes, and the ok ones invoked after a moment (the kill).
type tally struct {
	ok, info, fail, okAfter atomic.Int64
	dups                    atomic.Int64 // publishes acked duplicate: a re-send the owner's window held
	after                   atomic.Pointer[time.Time]
}

func (t *tally) note(o history.Outcome, invoked time.Time) {
	switch o {
	case history.OK:
		t.ok.Add(1)
		if a := t.after.Load(); a != nil && invoked.After(*a) {
			t.okAfter.Add(1)
		}
	case history.Info:
		t.info.Add(1)
	default:
		t.fail.Add(1)
	}
}

func (t *tally) String() string {
	return fmt.Sprintf("%d ok (%d invoked after the kill, %d acked duplicate), %d info, %d fail", t.ok.Load(), t.okAfter.Load(), t.dups.Load(), t.info.Load(), t.fail.Load())
}

// produce publishes n keyed records of stream through p, one operation each (the key
// drawn from keys), and records them: ok with the shard and offset from the ack, else
// scenario.PublishOutcome of the error. Payloads are name/i, unique in the stream.
func (r *run) produce(ctx context.Context, p *client.Publisher, name, stream string, n, keys int, rng *rand.Rand, t *tally) {
	proc := r.process()
	for i := range n {
		key := fmt.Sprintf("key-%d", rng.IntN(keys))
		payload := fmt.Sprintf("%s/%d", name, i)
		invoked := time.Now()
		op := r.rec.Invoke(proc, name, history.KindPublish, history.Input{Stream: stream, Key: history.Bytes(key), Payloads: history.Payloads(payload)})
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		pd, err := p.PublishKeyed(octx, []byte(key), []byte(payload))
		if err != nil {
			cancel()
			_ = op.Fail(err)
			t.note(history.Fail, invoked)
			continue
		}
		res, err := pd.Wait(octx)
		cancel()
		if err != nil {
			o := scenario.PublishOutcome(err)
			_ = op.Complete(o, history.Output{}, err)
			t.note(o, invoked)
			continue
		}
		if res.Duplicate {
			t.dups.Add(1)
		}
		r.noteAck(stream, res.Shard, res.FirstOffset)
		_ = op.Ok(history.Output{Shard: int(res.Shard), Offsets: []uint64{res.FirstOffset}})
		t.note(history.OK, invoked)
	}
}

// subscribe reads stream shard from the earliest record through cl, one subscribe-read
// operation per record (subscription id name), until done is closed and the shard's acked
// end was reached; reads after done are final. Errors: the subscription's, or ctx's.
func (r *run) subscribe(ctx context.Context, cl *client.Client, name, stream string, shard uint32, done <-chan struct{}) error {
	proc := r.process()
	sub, err := cl.Subscribe(ctx, stream, client.Earliest, client.SubscribeOptions{Shards: []uint32{shard}})
	if err != nil {
		return fmt.Errorf("%s: subscribe: %w", name, err)
	}
	defer sub.Close()
	live, stopLive := context.WithCancel(ctx) // ends when done closes: the final phase begins
	defer stopLive()
	go func() {
		select {
		case <-done:
		case <-live.Done():
		}
		stopLive()
	}()
	from, next := uint64(0), uint64(0)
	for {
		final := isClosed(done)
		if final && next >= r.ackedEnd(stream, shard) {
			return nil
		}
		rctx := live
		if final {
			rctx = ctx
		}
		rec, err := sub.Next(rctx)
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			continue // done closed while waiting: the final phase begins
		}
		if err != nil {
			return fmt.Errorf("%s: after offset %d: %w", name, next, err)
		}
		out := history.Output{Records: []history.Record{{Offset: rec.Offset, Payload: history.Bytes(bytes.Clone(rec.Payload))}}}
		if rec.Gap > 0 {
			out.Skipped = []history.OffsetRange{{From: rec.Offset - rec.Gap, To: rec.Offset}}
		}
		in := history.Input{Stream: stream, Shard: int(shard), Subscription: name, From: &from, Final: final}
		if err := r.rec.Record(proc, name, history.KindSubscribeRead, in, history.OK, out); err != nil {
			return err
		}
		next = rec.Offset + 1
	}
}

// subscribers are the subscribe workers of one phase, one per shard of a stream.
type subscribers struct {
	wg   sync.WaitGroup
	done chan struct{}
	errs chan error
}

// startSubscribers starts one subscribe worker per shard of stream through cl
// (subscription ids sub-<stream>-<shard>).
func (r *run) startSubscribers(ctx context.Context, cl *client.Client, stream string, shards int) *subscribers {
	s := &subscribers{done: make(chan struct{}), errs: make(chan error, shards)}
	for sh := range uint32(shards) {
		s.wg.Go(func() { s.errs <- r.subscribe(ctx, cl, fmt.Sprintf("sub-%s-%d", stream, sh), stream, sh, s.done) })
	}
	return s
}

// finish waits for the phase's other workers (work), then starts the final reads and
// waits for them; a subscriber's error fails t.
func (s *subscribers) finish(t *testing.T, work *sync.WaitGroup) {
	t.Helper()
	work.Wait()
	close(s.done)
	s.wg.Wait()
	close(s.errs)
	for err := range s.errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// cacheOps runs n random cache operations of cache through cl on keys (puts of unique
// values, gets, counter adds of positive deltas, counter gets) and records them with
// scenario.SDKOutcome (cl is dialled WithMaxAttempts(1): nothing is re-sent silently).
func (r *run) cacheOps(ctx context.Context, cl *client.Client, name, cache string, keys []string, n int, rng *rand.Rand, t *tally) {
	proc := r.process()
	for i := range n {
		key := keys[rng.IntN(len(keys))]
		in := history.Input{Cache: cache, Key: history.Bytes(key)}
		var kind history.Kind
		var call func(context.Context) (history.Output, error)
		switch rng.IntN(4) {
		case 0:
			kind, in.Value = history.KindCachePut, history.Bytes(fmt.Sprintf("%s/%d", name, i))
			call = func(c context.Context) (history.Output, error) {
				return history.Output{}, cl.Put(c, cache, key, in.Value, 0)
			}
		case 1:
			kind = history.KindCacheGet
			call = func(c context.Context) (history.Output, error) {
				v, found, err := cl.Get(c, cache, key)
				return history.Output{Found: found, Value: history.Bytes(bytes.Clone(v))}, err
			}
		case 2:
			kind, in.Delta, in.Key = history.KindCounterAdd, int64(1+rng.IntN(5)), history.Bytes("n-"+key)
			call = func(c context.Context) (history.Output, error) {
				sum, err := cl.CounterAdd(c, cache, "n-"+key, in.Delta)
				return history.Output{Sum: sum}, err
			}
		default:
			kind, in.Key = history.KindCounterGet, history.Bytes("n-"+key)
			call = func(c context.Context) (history.Output, error) {
				sum, found, err := cl.CounterGet(c, cache, "n-"+key)
				return history.Output{Found: found, Sum: sum}, err
			}
		}
		r.do(ctx, proc, name, kind, in, call, t)
	}
}

// do records one cache operation around call.
func (r *run) do(ctx context.Context, proc int, name string, kind history.Kind, in history.Input, call func(context.Context) (history.Output, error), t *tally) {
	invoked := time.Now()
	op := r.rec.Invoke(proc, name, kind, in)
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	out, err := call(octx)
	cancel()
	o := scenario.SDKOutcome(err)
	if o != history.OK {
		out = history.Output{}
	}
	_ = op.Complete(o, out, err)
	t.note(o, invoked)
}

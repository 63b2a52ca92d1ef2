package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"felix/client"
	"felix/testbed/history"
)

// load runs the load phase: a subscriber per shard, the publish and cache goroutines
// until r.total operations were invoked and completed, and the killer meanwhile. A
// killer error (a broker that did not come back, a stuck load) cancels the load.
func (r *snkRun) load(ctx context.Context) (KillLog, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx, stopSubs := context.WithCancel(lctx)
	var subs sync.WaitGroup
	for s := range snkShards {
		subs.Add(1)
		go func() { defer subs.Done(); r.subscriber(sctx, s, false, 0) }()
	}
	var workers sync.WaitGroup
	for w := range snkPublishers + snkCacheWorkers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			if w < snkPublishers {
				r.publishWorker(lctx)
			} else {
				r.cacheWorker(lctx, r.env.Rand(uint64(100+w)))
			}
		}()
	}
	go func() { workers.Wait(); r.tr.Finish() }()
	var pokes sync.WaitGroup
	kl, err := Killer(lctx, snkTarget{r, lctx, &pokes}, r.tr, r.env.Sizes.Kills, r.total, r.env.Rand(1))
	if err != nil {
		cancel()
	}
	workers.Wait()
	pokes.Wait()
	stopSubs()
	subs.Wait()
	return kl, err
}

// snkTarget is the broker as the killer sees it: after each restart it pokes every client.
type snkTarget struct {
	r     *snkRun
	ctx   context.Context
	pokes *sync.WaitGroup
}

// Kill SIGKILLs the broker (Broker.Kill).
func (t snkTarget) Kill(ctx context.Context) error { return t.r.b.Kill(ctx) }

// Restart restarts the broker, then starts one recorded Get of the current window's first
// key on each client's
// connection. A SIGKILLed broker sends no close: a client whose requests were all sent
// (and acknowledged by QUIC) before the kill hears nothing until its keepalive (10 s)
// makes the new process answer with a stateless reset. The poke's packets get that
// reset at once, so the client's stalled requests fail (or are re-sent) right after the
// restart. Pokes are history operations like any other, not counted by the tracker.
func (t snkTarget) Restart(ctx context.Context) error {
	if err := t.r.b.Restart(ctx); err != nil {
		return err
	}
	for _, c := range []struct {
		id string
		cl *client.Client
	}{{"publisher", t.r.pubCl}, {"cache", t.r.cacheCl}, {"subscriber", t.r.subCl}} {
		t.pokes.Add(1)
		go func() { defer t.pokes.Done(); t.r.poke(t.ctx, c.id, c.cl) }()
	}
	return nil
}

// poke records one Get of the current window's first key through cl (its own process).
func (r *snkRun) poke(ctx context.Context, clientID string, cl *client.Client) {
	key := keyName(min(r.tickets.Load(), r.total-1)/snkKeyWindow, 0)
	op := r.env.History.Invoke(r.newProcess(), clientID+"-poke", history.KindCacheGet, history.Input{Cache: snkCache, Key: history.Bytes(key)})
	octx, cancel := context.WithTimeout(ctx, snkOpTimeout)
	v, found, err := cl.Get(octx, snkCache, key)
	cancel()
	outcome, out := SDKOutcome(err), history.Output{}
	if outcome == history.OK {
		out = history.Output{Found: found, Value: history.Bytes(bytes.Clone(v))}
	}
	op.Complete(outcome, out, err)
	r.count("poke (cache-get)", outcome)
}

// ticket returns the number of the load's next operation, or false when all were taken.
func (r *snkRun) ticket() (int64, bool) {
	n := r.tickets.Add(1) - 1
	return n, n < r.total
}

// publishWorker publishes one record per operation (payload "p<n>", unique in the
// stream) through the shared idempotent Publisher and waits for its ack.
func (r *snkRun) publishWorker(ctx context.Context) {
	proc := r.newProcess()
	for {
		n, ok := r.ticket()
		if !ok || ctx.Err() != nil {
			return
		}
		r.do(ctx, &proc, "publisher", history.KindPublish, history.Input{Stream: snkStream, Payloads: history.Payloads(fmt.Sprintf("p%d", n))},
			func(octx context.Context) (history.Outcome, history.Output, error) {
				pend, err := r.pub.Publish(octx, fmt.Appendf(nil, "p%d", n))
				if err != nil {
					return history.Fail, history.Output{}, err // nothing was queued
				}
				res, err := pend.Wait(octx)
				if err == nil && (!res.HasOffsets || !res.HasShard) {
					return history.Info, history.Output{}, errors.New("ack without its offset or shard")
				}
				return PublishOutcome(err), history.Output{Shard: int(res.Shard), Offsets: []uint64{res.FirstOffset}}, err
			})
	}
}

// keyName and counterName name key i and counter i of window w.
func keyName(w int64, i int) string     { return fmt.Sprintf("k%d-%d", w, i) }
func counterName(w int64, i int) string { return fmt.Sprintf("c%d-%d", w, i) }

// cacheWorker runs cache and counter operations on the current window's keys (operation
// n uses window n/snkKeyWindow), chosen by rng:
// 30 % Put (value "v<n>", unique), 25 % Get, 10 % Delete, 20 % CounterAdd (delta 1..5:
// positive, so a sum of 0 means an absent counter, which the SDK's CounterGet cannot
// tell apart), 15 % CounterGet. No TTL: nothing expires during the run.
func (r *snkRun) cacheWorker(ctx context.Context, rng *rand.Rand) {
	proc := r.newProcess()
	for {
		n, ok := r.ticket()
		if !ok || ctx.Err() != nil {
			return
		}
		key, ctr := keyName(n/snkKeyWindow, rng.IntN(snkKeys)), counterName(n/snkKeyWindow, rng.IntN(snkCounters))
		switch x := rng.IntN(100); {
		case x < 30:
			r.cachePut(ctx, &proc, key, fmt.Sprintf("v%d", n))
		case x < 55:
			r.cacheGet(ctx, &proc, key)
		case x < 65:
			r.cacheDelete(ctx, &proc, key)
		case x < 85:
			r.counterAdd(ctx, &proc, ctr, int64(1+rng.IntN(5)))
		default:
			r.counterGet(ctx, &proc, ctr)
		}
	}
}

func (r *snkRun) cachePut(ctx context.Context, proc *int, key, value string) {
	r.do(ctx, proc, "cache", history.KindCachePut, history.Input{Cache: snkCache, Key: history.Bytes(key), Value: history.Bytes(value)},
		func(octx context.Context) (history.Outcome, history.Output, error) {
			err := r.cacheCl.Put(octx, snkCache, key, []byte(value), 0)
			return SDKOutcome(err), history.Output{}, err
		})
}

// cacheGet records one Get; it reports whether the Get completed ok.
func (r *snkRun) cacheGet(ctx context.Context, proc *int, key string) bool {
	return r.do(ctx, proc, "cache", history.KindCacheGet, history.Input{Cache: snkCache, Key: history.Bytes(key)},
		func(octx context.Context) (history.Outcome, history.Output, error) {
			v, found, err := r.cacheCl.Get(octx, snkCache, key)
			return SDKOutcome(err), history.Output{Found: found, Value: history.Bytes(bytes.Clone(v))}, err
		}) == history.OK
}

func (r *snkRun) cacheDelete(ctx context.Context, proc *int, key string) {
	r.do(ctx, proc, "cache", history.KindCacheDelete, history.Input{Cache: snkCache, Key: history.Bytes(key)},
		func(octx context.Context) (history.Outcome, history.Output, error) {
			old, found, err := r.cacheCl.Delete(octx, snkCache, key)
			return SDKOutcome(err), history.Output{Found: found, Value: history.Bytes(bytes.Clone(old))}, err
		})
}

func (r *snkRun) counterAdd(ctx context.Context, proc *int, key string, delta int64) {
	r.do(ctx, proc, "cache", history.KindCounterAdd, history.Input{Cache: snkCache, Key: history.Bytes(key), Delta: delta},
		func(octx context.Context) (history.Outcome, history.Output, error) {
			sum, err := r.cacheCl.CounterAdd(octx, snkCache, key, delta)
			return SDKOutcome(err), history.Output{Sum: sum}, err
		})
}

// counterGet records one CounterGet (found as the SDK reports it: absent is not 0);
// it reports whether it completed ok.
func (r *snkRun) counterGet(ctx context.Context, proc *int, key string) bool {
	return r.do(ctx, proc, "cache", history.KindCounterGet, history.Input{Cache: snkCache, Key: history.Bytes(key)},
		func(octx context.Context) (history.Outcome, history.Output, error) {
			sum, found, err := r.cacheCl.CounterGet(octx, snkCache, key)
			return SDKOutcome(err), history.Output{Found: found, Sum: sum}, err
		}) == history.OK
}

// do runs one client operation: it records the invocation (history and tracker), runs
// call under snkOpTimeout, and records the completion with call's outcome (the answer
// only for ok). After an info outcome *proc moves to a new process id. It returns the
// outcome.
func (r *snkRun) do(ctx context.Context, proc *int, clientID string, kind history.Kind, in history.Input,
	call func(context.Context) (history.Outcome, history.Output, error)) history.Outcome {
	op := r.env.History.Invoke(*proc, clientID, kind, in)
	epoch := r.tr.Invoke()
	octx, cancel := context.WithTimeout(ctx, snkOpTimeout)
	outcome, out, err := call(octx)
	cancel()
	if outcome != history.OK {
		out = history.Output{}
	}
	op.Complete(outcome, out, err)
	r.tr.Complete(epoch, outcome == history.OK)
	r.count(kind, outcome)
	if outcome == history.Info {
		*proc = r.newProcess()
	}
	return outcome
}

// maxResubscribes bounds how often one subscriber makes a new Subscription after its
// previous one failed (the SDK already re-subscribes after lost connections by itself).
const maxResubscribes = 50

// subscriber reads shard from the earliest offset (0: nothing is trimmed in this run),
// one subscribe-read operation per record, until ctx ends or, when until > 0, the
// offset until-1 was read. A failed Subscription is replaced by a new one (a new
// subscription id, From = the next offset). final marks the reads as the final phase's.
// It returns the next offset it would read, and the last error when it gave up early.
func (r *snkRun) subscriber(ctx context.Context, shard int, final bool, until uint64) (uint64, error) {
	var next uint64
	var lastErr error
	for attempt := 0; attempt <= maxResubscribes && ctx.Err() == nil; attempt++ {
		if until > 0 && next >= until {
			return next, nil
		}
		id := fmt.Sprintf("s%d-%d", shard, attempt)
		if final {
			id = fmt.Sprintf("final-s%d-%d", shard, attempt)
		}
		start := client.Offset(next)
		if next == 0 {
			start = client.Earliest
		}
		sub, err := r.subClient().Subscribe(ctx, snkStream, start, client.SubscribeOptions{Shards: []uint32{uint32(shard)}})
		if err == nil {
			next, err = r.readSubscription(ctx, sub, id, shard, next, final, until)
			sub.Close()
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
			r.mu.Lock()
			r.subs.resubscribes++
			r.subs.lastErr = err
			r.mu.Unlock()
		}
	}
	return next, lastErr
}

// readSubscription records sub's records from offset from until it fails, ctx ends or
// offset until-1 was read (until > 0). It returns the next offset to read.
func (r *snkRun) readSubscription(ctx context.Context, sub *client.Subscription, id string, shard int, from uint64, final bool, until uint64) (uint64, error) {
	next := from
	proc := r.newProcess()
	in := history.Input{Stream: snkStream, Shard: shard, Subscription: id, From: history.Offset(from), Final: final}
	for until == 0 || next < until {
		op := r.env.History.Invoke(proc, "subscriber", history.KindSubscribeRead, in)
		rec, err := sub.Next(ctx)
		if err == nil && !rec.HasOffset {
			err = errors.New("record without an offset")
		}
		if err != nil {
			op.Info(history.Output{}, err)
			return next, err
		}
		out := history.Output{Records: []history.Record{{Offset: rec.Offset, Payload: history.Bytes(bytes.Clone(rec.Payload))}}}
		if rec.Gap > 0 && rec.Gap <= rec.Offset {
			out.Skipped = []history.OffsetRange{{From: rec.Offset - rec.Gap, To: rec.Offset}}
		}
		op.Ok(out)
		next = rec.Offset + 1
		if !final {
			r.mu.Lock()
			r.subs.reads++
			r.mu.Unlock()
		}
	}
	return next, nil
}

// subClient is the client subscriptions use: the load's, then the final phase's.
func (r *snkRun) subClient() *client.Client {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.subCl
}

package failover

import (
	"context"
	"fmt"
	"time"

	"felix/client"
)

// check waits until the followers are durable at the final leader's commit, then reads
// the leader's log of shard 0 from its start through a subscription: every acknowledged
// payload is there exactly once, and no payload is there twice (an idempotent producer's
// re-send is never a second record).
func (f *fixture) check(ctx context.Context, p *producers) {
	f.t.Helper()
	a, ok := f.assignment(ctx)
	if !ok {
		f.t.Fatal("no assignment for shard 0")
	}
	f.waitRoles(ctx, a)
	f.waitDurable(ctx, a)
	lead, ok := f.open(ctx, f.broker(a.Leader))
	if !ok || lead.Committed == 0 {
		f.t.Fatalf("the final leader %s: %+v", a.Leader, lead)
	}
	seen, at := f.readLog(ctx, a.Leader, lead.Committed)
	p.mu.Lock()
	defer p.mu.Unlock()
	var missing []string
	for payload := range p.acked {
		if seen[payload] != 1 {
			off := p.offset[payload]
			missing = append(missing, fmt.Sprintf("%s×%d (began %s, acked %s at offset %d, where the log holds %q)",
				payload, seen[payload], p.began[payload].Format("15:04:05.000"), p.acked[payload].Format("15:04:05.000"),
				off, at[off]))
		}
	}
	for payload, n := range seen {
		if n > 1 {
			missing = append(missing, fmt.Sprintf("%s×%d (duplicate)", payload, n))
		}
	}
	if len(missing) > 0 {
		f.t.Fatalf("the final leader %s's log (%d records) lacks or repeats %d acknowledged payloads: %v",
			a.Leader, lead.Committed, len(missing), missing[:min(len(missing), 20)])
	}
	f.t.Logf("final leader %s at generation %d: %d records, every one of %d acknowledged payloads once; followers %v durable at %d",
		a.Leader, a.Generation, lead.Committed, len(p.acked), a.Followers, lead.Committed)
}

// readLog subscribes to shard 0 on broker id and counts each payload of offsets 0 through
// committed − 1 (≤ 60 s), and returns the payload at each offset too. A delivery that skips an offset (a subscriber gap) is not a
// hole in the log: the subscription is opened again at the first offset not seen.
func (f *fixture) readLog(ctx context.Context, id string, committed uint64) (map[string]int, map[uint64]string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, f.broker(id).addr, client.WithFingerprint(f.cert.Fingerprint), client.WithTenant(tenant),
		client.WithNamespace(namespace), client.WithDialTimeout(5*time.Second))
	if err != nil {
		f.t.Fatalf("dial %s: %v", id, err)
	}
	defer cl.Close()
	seen, at := map[string]int{}, map[uint64]string{}
	next, reopened := uint64(0), 0
	for next < committed {
		got := f.readFrom(ctx, cl, id, next, committed, seen, at)
		if got == next {
			f.t.Fatalf("reading %s's log: nothing delivered at offset %d", id, next)
		}
		if next = got; next < committed {
			reopened++
		}
	}
	if reopened > 0 {
		f.t.Logf("reading %s's log: the subscription skipped offsets %d times and was reopened there", id, reopened)
	}
	return seen, at
}

// readFrom reads from offset next in order until committed or an offset is skipped, counts
// the payloads, and returns the first offset not read.
func (f *fixture) readFrom(ctx context.Context, cl *client.Client, id string, next, committed uint64, seen map[string]int,
	at map[uint64]string) uint64 {
	f.t.Helper()
	sub, err := cl.Subscribe(ctx, streamName, client.Offset(next), client.SubscribeOptions{})
	if err != nil {
		f.t.Fatalf("subscribe on %s at %d: %v", id, next, err)
	}
	defer sub.Close()
	for next < committed {
		rec, err := sub.Next(ctx)
		if err != nil {
			f.t.Fatalf("read %s's log at %d: %v", id, next, err)
		}
		if !rec.HasOffset {
			f.t.Fatalf("record without an offset from %s", id)
		}
		if rec.Offset != next {
			return next
		}
		seen[string(rec.Payload)]++
		at[rec.Offset] = string(rec.Payload)
		next++
	}
	return next
}

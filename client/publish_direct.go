package client

// Direct-to-owner publishing (PublisherOptions.Direct; docs/client-protocol.md D17, issue
// 19 item 6): a keyed batch is sent to the broker that leads its key's shard, so it is not
// forwarded. The Publisher learns the routes with route_lookup on the dialled broker, in
// the background: until the first answer (and whenever the routes cannot be used) batches
// go to the dialled broker, which forwards them. Only the first keyed batch waits for the
// first lookup (bounded by routeLookupTimeout); later lookups run while the old routes are
// used, and a Direct publisher never fails for want of routes.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

const (
	// routeRefresh is how old a route table may get before the next keyed batch asks for a
	// fresh one (in the background; the old one is used meanwhile).
	routeRefresh = 10 * time.Second
	// routeRetry is how long after a failed or unusable lookup (the broker lacks the
	// redirects feature or predates route.routing) the next one is tried.
	routeRetry = 30 * time.Second
	// ownerDownFor is how long an owner whose connection could not be made is skipped
	// (its batches go to the dialled broker, which forwards them).
	ownerDownFor = 10 * time.Second
	// ownerDialTimeout bounds the dial of an owner's connection (at most the client's
	// WithDialTimeout): past it the batch falls back to the dialled broker.
	ownerDialTimeout = 2 * time.Second
	// routeLookupTimeout bounds one background route_lookup.
	routeLookupTimeout = 5 * time.Second
)

// directRouter is a Direct Publisher's route table and the owners found unreachable. Its
// epoch changes whenever the address a key maps to may have changed (a new table, an owner
// marked down); the sender then waits for every batch in flight to be answered before it
// sends on the new routes, so records of one key keep their order across a route change.
type directRouter struct {
	p     *Publisher
	wg    sync.WaitGroup // the background lookup
	ready chan struct{}  // closed when the first lookup ended (answered or failed)

	mu       sync.Mutex
	table    RouteTable
	usable   bool      // table can hash keys
	fetched  time.Time // when table was answered (zero: never)
	retryAt  time.Time // no lookup before this (after a failed one)
	fetching bool
	epoch    uint64
	down     map[string]time.Time // owner address → skipped until
}

// target returns the client address of the broker leading key's shard ("" = the dialled
// broker: no usable table yet, the owner is the dialled broker or marked down) and the
// router's epoch. A table older than routeRefresh starts a background lookup.
func (r *directRouter) target(key []byte, now time.Time) (string, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.fetching && now.After(r.retryAt) && (r.fetched.IsZero() || now.Sub(r.fetched) > routeRefresh) {
		r.startLookupLocked()
	}
	if !r.usable {
		return "", r.epoch
	}
	shard, _ := r.table.ShardOf(key)
	addr := r.table.Shards[shard].Address
	if until, ok := r.down[addr]; addr == r.p.c.addr || (ok && now.Before(until)) {
		addr = ""
	}
	return addr, r.epoch
}

// startLookupLocked asks the dialled broker for the stream's routes in the background.
// r.mu is held.
func (r *directRouter) startLookupLocked() {
	r.fetching = true
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.p.ctx, routeLookupTimeout)
		rt, err := r.p.c.Routes(ctx, r.p.stream)
		cancel()
		r.installed(rt, err, time.Now())
	}()
}

// installed records a lookup's answer: a usable table replaces the old one (the epoch
// changes when any shard's address did); a failed or unusable one keeps the old table and
// delays the next lookup by routeRetry.
func (r *directRouter) installed(rt RouteTable, err error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetching = false
	select {
	case <-r.ready:
	default:
		close(r.ready)
	}
	if _, ok := rt.ShardOf(nil); err != nil || !ok {
		r.retryAt = now.Add(routeRetry)
		if err != nil && !errors.Is(err, context.Canceled) {
			r.p.c.cfg.logger.Info("felix: route lookup failed; publishing through the dialled broker", "stream", r.p.stream, "err", err)
		}
		return
	}
	r.fetched = now
	if !r.usable || !slices.EqualFunc(rt.Shards, r.table.Shards, func(a, b ShardRoute) bool { return a.Address == b.Address }) {
		r.epoch++
	}
	r.table, r.usable = rt, true
}

// stale makes the next keyed batch ask for fresh routes (a not_leader answer).
func (r *directRouter) stale() {
	r.mu.Lock()
	r.fetched, r.retryAt = time.Time{}, time.Time{}
	r.mu.Unlock()
}

// moved records a not_leader naming shard's owner at addr: the shard's batches go there
// from now on (a new epoch) and fresh routes are asked for.
func (r *directRouter) moved(shard uint32, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fetched, r.retryAt = time.Time{}, time.Time{}
	if !r.usable || int(shard) >= len(r.table.Shards) || r.table.Shards[shard].Address == addr {
		return
	}
	r.table.Shards = slices.Clone(r.table.Shards)
	r.table.Shards[shard].Address = addr
	r.epoch++
}

// markDown skips owner address addr for ownerDownFor and asks for fresh routes.
func (r *directRouter) markDown(addr string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down == nil {
		r.down = map[string]time.Time{}
	}
	for a, until := range r.down {
		if now.After(until) {
			delete(r.down, a)
		}
	}
	r.down[addr] = now.Add(ownerDownFor)
	r.fetched = time.Time{}
	r.epoch++
	r.p.c.cfg.logger.Warn("felix: shard owner unreachable; publishing through the dialled broker", "stream", r.p.stream, "address", addr)
}

// targetOf returns where the sender sends b: "" (the dialled broker) for an unkeyed batch
// or a Publisher without Direct, else the key's owner (the first keyed batch waits for the
// first lookup). When the router's epoch changed
// since the last batch sent, it first waits until every batch sent has been answered (the
// order of one key across the change; sender goroutine only).
func (p *Publisher) targetOf(b *batch) string {
	if p.direct == nil || b.key == "" {
		return ""
	}
	addr, epoch := p.direct.target([]byte(b.key), time.Now())
	select {
	case <-p.direct.ready:
	default: // the first keyed batch waits for the first lookup (bounded by routeLookupTimeout)
		select {
		case <-p.direct.ready:
		case <-p.ctx.Done():
		}
		addr, epoch = p.direct.target([]byte(b.key), time.Now())
	}
	if epoch != p.sentEpoch {
		p.mu.Lock()
		for len(p.awaiting) > 0 {
			p.answeredCond.Wait()
		}
		p.mu.Unlock()
		p.sentEpoch = epoch
	}
	return addr
}

// sessionAt returns an authenticated stream to addr ("" = the dialled broker's pool,
// waiting as long as the Publisher lives). An owner's stream is dialled within
// ownerDialTimeout; failing that, the owner is marked down and the error returned (the
// caller then sends through the dialled broker).
func (p *Publisher) sessionAt(addr string) (*session, error) {
	if addr == "" {
		return p.c.session(p.ctx)
	}
	slot := p.c.slotFor(addr)
	if slot == nil { // every redirect connection is busy: go through the dialled broker
		return nil, errRedirectTargetEvicted
	}
	ctx, cancel := context.WithTimeout(p.ctx, min(ownerDialTimeout, p.c.cfg.dialTimeout))
	defer cancel()
	s, err := p.c.sessionOn(ctx, slot)
	if err != nil && p.ctx.Err() == nil {
		p.direct.markDown(addr, time.Now())
	}
	return s, err
}

// redirected handles a Direct publisher's batch answered not_leader (nothing was
// written): the shard's batches follow the owner it names (else the routes are only marked
// stale), fresh routes are asked for, and the batch is queued again, ahead of later ones,
// within WithMaxAttempts. It reports whether it did (answered then stops).
func (p *Publisher) redirected(b *batch, err error) bool {
	if p.direct == nil || !errors.Is(err, ErrNotLeader) || b.attempts >= p.c.cfg.maxAttempts || p.ctx.Err() != nil {
		return false
	}
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Address != "" {
		p.direct.moved(nl.Shard, nl.Address)
	} else {
		p.direct.stale()
	}
	p.enqueue(b, true)
	return true
}

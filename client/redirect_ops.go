package client

// Redirected requests beyond subscribe (issue 19 item 6; docs/client-protocol.md D17): a
// consumer-group operation or a cache watch for a shard the dialled broker does not lead
// is answered not_leader naming the leader's client address; the SDK sends it again there
// (a not_leader writes nothing), following at most maxRedirects hops and refusing the same
// (address, generation) twice (redirectChain), and remembers the owner so the next request
// for that shard goes straight to it.

import (
	"context"
	"errors"
	"sync"

	"felix/proto"
)

// maxOwnerEntries bounds the Client's remembered owners (ownerCache); past it the cache
// starts over.
const maxOwnerEntries = 4096

// ownerKey names one shard of a stream (a group's; watches follow their redirect without
// remembering it).
type ownerKey struct {
	name  string
	shard uint32
}

// ownerCache is the client address of the broker that last served each shard ("" or
// absent: the dialled broker). Safe for concurrent use.
type ownerCache struct {
	mu sync.Mutex
	m  map[ownerKey]string
}

func (oc *ownerCache) get(k ownerKey) string {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return oc.m[k]
}

// set remembers addr for k ("" forgets it).
func (oc *ownerCache) set(k ownerKey, addr string) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if addr == "" {
		delete(oc.m, k)
		return
	}
	if oc.m == nil || len(oc.m) >= maxOwnerEntries {
		oc.m = map[ownerKey]string{}
	}
	oc.m[k] = addr
}

// groupRoundTrip is roundTripOn for a consumer-group request of stream shard: sent on the
// connection of the shard's remembered owner (the first connection of the pool when none:
// the broker treats a connection as one consumer, so every request of a shard uses one
// connection per broker), following not_leader (followOwner).
func (c *Client) groupRoundTrip(ctx context.Context, stream string, shard uint32, safe bool, build func(id uint64) proto.Message) (proto.Message, error) {
	k := ownerKey{name: stream, shard: shard}
	var ch redirectChain
	for hop := 0; ; hop++ {
		addr := c.owners.get(k)
		slot := c.slotFor(addr)
		if slot == nil {
			slot = c.slots[0]
		}
		m, err := c.roundTripOn(ctx, slot, safe, build)
		next, ferr := c.followOwner(k, addr, err, &ch, hop)
		if !next {
			if ferr != nil {
				return nil, ferr
			}
			return m, err
		}
	}
}

// followOwner decides what a request for k sent to addr ("" = the dialled broker) does
// after its outcome err: a not_leader naming an address is admitted to ch (a loop or the
// spent budget ends with the *RedirectError) and remembered, and the request is sent
// again (next); a redirect connection evicted from the Client's cache is retried through
// the dialled broker (within maxRedirects hops); a failure at a remembered owner forgets
// it (the next request asks the dialled broker); anything else ends the request as is.
func (c *Client) followOwner(k ownerKey, addr string, err error, ch *redirectChain, hop int) (next bool, ferr error) {
	var nl *NotLeaderError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &nl) && nl.Address != "":
		if ferr := ch.follow(nl); ferr != nil {
			c.owners.set(k, "")
			return false, ferr
		}
		c.owners.set(k, nl.Address)
		return true, nil
	case errors.Is(err, errRedirectTargetEvicted) && hop < maxRedirects:
		c.owners.set(k, "")
		return true, nil
	}
	if addr != "" && !errors.Is(err, ErrRefused) {
		c.owners.set(k, "")
	}
	return false, nil
}

// redirect handles a failed cache_watch registration (Watch.open): a not_leader naming an
// address is admitted to the watch's chain (a loop or the spent budget: the
// *RedirectError, terminal) and the watch is registered at that owner next (follow); any
// other failure at an owner sends the next attempt through the dialled broker again (it
// redirects afresh if the shard moved). It returns the error open goes on with.
func (w *Watch) redirect(err error) (follow bool, _ error) {
	var nl *NotLeaderError
	if errors.As(err, &nl) && nl.Address != "" {
		if ferr := w.hops.follow(nl); ferr != nil {
			return false, ferr
		}
		w.c.cfg.logger.Info("felix: watch redirected", "cache", w.cache, "shard", nl.Shard, "address", nl.Address, "generation", nl.Generation)
		w.addr = nl.Address
		return true, nil
	}
	if w.addr != "" && !watchTerminal(err) {
		w.addr = ""
	}
	return false, err
}

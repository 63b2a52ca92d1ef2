package client

import (
	"errors"
	"fmt"
	"slices"
)

// maxRedirects bounds the chain of not_leader answers one shard's subscription follows
// without receiving a record in between (issue 19 item 6; spec §8.9).
const maxRedirects = 4

// maxRedirectTargets bounds the Client's per-address connections to redirect targets
// (Client.redirs). A new target beyond it replaces one whose connection is not live; when
// every one is live the redirect is dialled through the client's own pool (that broker
// then redirects again, and the chain's budget ends it).
const maxRedirectTargets = 16

// errRedirectTargetEvicted is a redirect target's connection slot that was dropped from
// the Client's cache (maxRedirectTargets) while a caller held it: not terminal, the
// caller re-subscribes through the dialled broker.
var errRedirectTargetEvicted = errors.New("felix: redirect target connection evicted")

// RedirectError ends a subscription whose chain of not_leader redirects could not be
// followed (issue 19 item 6): Loop when the broker named the same (address, generation)
// pair a second time, else the budget of maxRedirects hops was spent. Last is the
// not_leader answer not followed; errors.Is matches ErrNotLeader and errors.As finds
// Last as a *NotLeaderError.
type RedirectError struct {
	Last *NotLeaderError
	Hops int  // redirects followed before Last
	Loop bool // Last named an (address, generation) already followed
}

// Error names the reason, the hops and the redirect refused.
func (e *RedirectError) Error() string {
	why := "redirect budget spent"
	if e.Loop {
		why = "redirect loop"
	}
	return fmt.Sprintf("felix: %s after %d redirects: %v", why, e.Hops, e.Last)
}

// Unwrap returns Last (so errors.Is(err, ErrNotLeader) holds).
func (e *RedirectError) Unwrap() error { return e.Last }

// redirectHop is one followed not_leader: the owner's client address and generation.
type redirectHop struct {
	addr       string
	generation uint64
}

// redirectChain is the redirects one shard's subscription followed since it last
// received a record (or since a transport failure made it start over at the dialled
// broker). Not safe for concurrent use: one per shard reader.
type redirectChain struct {
	seen []redirectHop
}

// follow admits a redirect to nl's owner, or refuses it: nl itself when it names no
// address (nowhere to go), a *RedirectError when (address, generation) was followed
// already (a loop) or maxRedirects hops were.
func (ch *redirectChain) follow(nl *NotLeaderError) error {
	if nl.Address == "" {
		return nl
	}
	h := redirectHop{addr: nl.Address, generation: nl.Generation}
	if slices.Contains(ch.seen, h) {
		return &RedirectError{Last: nl, Hops: len(ch.seen), Loop: true}
	}
	if len(ch.seen) >= maxRedirects {
		return &RedirectError{Last: nl, Hops: len(ch.seen)}
	}
	ch.seen = append(ch.seen, h)
	return nil
}

// reset forgets the chain (a record arrived, or the subscription starts over).
func (ch *redirectChain) reset() { ch.seen = ch.seen[:0] }

// newRedirectSlotLocked makes the connection slot for redirect target addr, first
// dropping one whose connection is not live when the cache holds maxRedirectTargets
// (the dropped slot is closed; a caller still holding it gets errRedirectTargetEvicted).
// It returns nil when every cached target is live. c.redirMu is held.
func (c *Client) newRedirectSlotLocked(addr string) *connSlot {
	if len(c.redirs) >= maxRedirectTargets {
		evicted := false
		for a, s := range c.redirs {
			s.mu.Lock()
			idle := s.cur == nil || !s.cur.alive()
			if idle {
				s.evicted = true
			}
			s.mu.Unlock()
			if idle {
				s.close()
				delete(c.redirs, a)
				evicted = true
				break
			}
		}
		if !evicted {
			return nil
		}
	}
	s := &connSlot{c: c, addr: addr, bo: newBackoff(c.cfg.backoffMin, c.cfg.backoffMax)}
	if c.ctx.Err() != nil {
		s.closed = true
	}
	c.redirs[addr] = s
	return s
}

// followMoved handles a shard's event stream that ended with err (Subscription.run):
// a not_leader naming an address (the shard moved, §8.9) is admitted to ch, which starts
// over first when records arrived on the stream (progressed), and reported moved with the
// owner's address; a redirect that delivered nothing waits a backoff step first, so two
// brokers pointing at each other cannot spin. A redirect ch refuses (a loop, the budget)
// fails the subscription with the *RedirectError: stop. Any other err: neither.
func (s *Subscription) followMoved(shard uint32, err error, ch *redirectChain, progressed bool, bo *backoff) (owner string, moved, stop bool) {
	if progressed {
		ch.reset()
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.Address == "" {
		return "", false, false
	}
	if ferr := ch.follow(nl); ferr != nil {
		s.fail(ferr)
		return "", false, true
	}
	if !progressed && !s.sleep(bo.next()) {
		return "", false, true
	}
	s.c.cfg.logger.Info("felix: subscription moved", "stream", s.stream, "shard", shard, "address", nl.Address, "generation", nl.Generation)
	return nl.Address, true, false
}

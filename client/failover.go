package client

import (
	"fmt"
	"slices"
)

// WithFailover lists more broker addresses (host:port, UDP) for the client's own pool
// (issue 19: any broker takes a publish or a cache operation and forwards it, and
// redirects a subscription, so any broker of a cluster can serve a client). A pool
// connection whose dial fails dials the next address the next time (the one given to Dial
// first, then these, in turn, after the reconnect backoff); requests, subscriptions,
// watches and publishers then carry on as after any reconnect (an idempotent publisher
// re-sends with its producer id, a subscription resumes from its last offset + 1). The
// certificate trust and the token must hold on every address (one cluster certificate,
// every broker holding the tenants' keys). Dial itself still connects to its own address.
// Errors: ErrInvalidArgument for an empty address.
func WithFailover(addrs ...string) Option {
	return func(c *config) error {
		if slices.Contains(addrs, "") {
			return fmt.Errorf("%w: empty failover address", ErrInvalidArgument)
		}
		c.failover = append(c.failover, addrs...)
		return nil
	}
}

// failoverLocked moves a pool slot whose dial to addr failed to the next of the client's
// addresses (Dial's, then WithFailover's, in turn). s.mu is held.
func (s *connSlot) failoverLocked(addr string) {
	if !s.pool || len(s.c.cfg.failover) == 0 {
		return
	}
	all := append([]string{s.c.addr}, s.c.cfg.failover...)
	next := all[(slices.Index(all, addr)+1)%len(all)]
	if next != s.addr {
		s.c.cfg.logger.Warn("felix: broker unreachable; failing over", "from", addr, "to", next)
	}
	s.addr = next
}

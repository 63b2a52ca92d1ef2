package client

import (
	"context"
	"fmt"

	"felix/proto"
)

// ShardRoute is one shard's leader as route_lookup answers it (docs/client-protocol.md
// D17; issue 19 item 6).
type ShardRoute struct {
	Shard uint32
	// Owner is the leader's node id ("" when no leader is known: publish through any
	// broker, which forwards).
	Owner string
	// Address is the leader's client address (host:port); "" = the broker that answered
	// (a single node, or no leader known).
	Address string
	// Generation is the ownership generation the broker's table holds for the shard.
	Generation uint64
}

// RouteLookup asks the broker which broker leads each shard of stream (in the client's
// tenant and namespace): one ShardRoute per shard, in shard order. The answer is the
// broker's view at the time (a route may be stale by the time it is used: a broker that
// no longer leads the shard forwards or redirects). Needs the broker feature "redirects".
// Re-sent once after an indeterminate outcome (it changes nothing). Errors:
// ErrInvalidArgument (empty name), ErrUnsupported, ErrNotFound, ErrUnauthorized (neither
// stream.publish nor stream.subscribe), ErrIndeterminate, ErrProtocol (an answer that is
// not a route).
func (c *Client) RouteLookup(ctx context.Context, stream string) ([]ShardRoute, error) {
	if stream == "" {
		return nil, fmt.Errorf("%w: empty stream name", ErrInvalidArgument)
	}
	if err := c.requireFeature(ctx, proto.FeatureRedirects); err != nil {
		return nil, err
	}
	m, err := c.roundTrip(ctx, true, func(id uint64) proto.Message {
		return &proto.RouteLookup{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, RequestID: id}
	})
	if err != nil {
		return nil, err
	}
	rt, ok := m.(*proto.Route)
	if !ok {
		return nil, fmt.Errorf("%w: %s in answer to route_lookup", ErrProtocol, m.Type())
	}
	out := make([]ShardRoute, len(rt.Shards))
	for i, s := range rt.Shards {
		out[i] = ShardRoute{Shard: s.Shard, Owner: s.Owner.NodeID, Address: s.Owner.Address, Generation: s.Generation}
	}
	return out, nil
}

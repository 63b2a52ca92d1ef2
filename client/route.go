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

// Stream routings as route_lookup names them (docs/client-protocol.md D15, D17).
const (
	RoutingModulo   = "modulo"    // FNV-1a 64 of the key, modulo the shard count
	RoutingJumpHash = "jump_hash" // jump consistent hash of FNV-1a 64 of the key
)

// RouteTable is a stream's routes as one broker saw them (route_lookup, D17): one
// ShardRoute per shard in shard order (len(Shards) is the shard count) and the stream's
// Routing (RoutingModulo, RoutingJumpHash, or "" from a broker that predates the field:
// the client then cannot hash a key itself).
type RouteTable struct {
	Shards  []ShardRoute
	Routing string
}

// ShardOf returns the shard a routing key is stored on (the broker's core.RouteKey:
// FNV-1a 64 of key, then modulo the shard count or jump hash), and false when the table
// cannot tell: no shards, or a routing this SDK does not know ("" from an older broker).
func (rt RouteTable) ShardOf(key []byte) (uint32, bool) {
	n := len(rt.Shards)
	if n == 0 || (rt.Routing != RoutingModulo && rt.Routing != RoutingJumpHash) {
		return 0, false
	}
	return uint32(routeKey(rt.Routing == RoutingJumpHash, key, n)), true
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
	rt, err := c.Routes(ctx, stream)
	return rt.Shards, err
}

// Routes is RouteLookup with the stream's routing: the RouteTable a keyed publisher hashes
// its keys with (PublisherOptions.Direct). Errors: those of RouteLookup.
func (c *Client) Routes(ctx context.Context, stream string) (RouteTable, error) {
	if stream == "" {
		return RouteTable{}, fmt.Errorf("%w: empty stream name", ErrInvalidArgument)
	}
	if err := c.requireFeature(ctx, proto.FeatureRedirects); err != nil {
		return RouteTable{}, err
	}
	m, err := c.roundTrip(ctx, true, func(id uint64) proto.Message {
		return &proto.RouteLookup{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: stream, RequestID: id}
	})
	if err != nil {
		return RouteTable{}, err
	}
	rt, ok := m.(*proto.Route)
	if !ok {
		return RouteTable{}, fmt.Errorf("%w: %s in answer to route_lookup", ErrProtocol, m.Type())
	}
	out := RouteTable{Shards: make([]ShardRoute, len(rt.Shards)), Routing: rt.Routing}
	for i, s := range rt.Shards {
		out.Shards[i] = ShardRoute{Shard: s.Shard, Owner: s.Owner.NodeID, Address: s.Owner.Address, Generation: s.Generation}
	}
	return out, nil
}

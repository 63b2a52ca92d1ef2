package broker

// Redirects of the requests that read one shard where it is led (issue 19 item 6 and the
// watches and groups of the forwarding brief; docs/forwarding.md "Redirects"): a
// subscribe, a consumer-group operation and a cache watch are never proxied; for a shard
// another broker leads they are answered not_leader with that broker's node id, client
// address and generation, and the SDK follows (bounded hops, client/redirect.go).

import (
	"strings"

	cforward "felix/cluster/forward"
	"felix/core"
	"felix/proto"
)

// redirectShard answers a request for ref with not_leader when another broker leads it
// (seed internal-protocol.txt, "Subscribe": redirected, never proxied) and reports true;
// false when the shard is served here (led here, no entry, no leader known). id is the
// request's request_id (nil for a subscribe, D11). A client that listed the redirects
// feature gets the not_leader message (client-protocol §8.9: for a cache shard the
// message's stream field carries the cache name, D17); any other client gets
// error{code: not_leader} whose message names the owner's node id, client address and
// generation. Counted in felix_broker_redirects_sent_total.
func (f *forwarding) redirectShard(s *session, ref core.ShardRef, id *uint64) bool {
	a, ok := f.remote(ref)
	if !ok {
		return false
	}
	d := cforward.Ingress(cforward.OpSubscribe, cforward.Entry{Assigned: true, Leader: f.node(a.Leader), Generation: a.Generation}, f.self)
	f.m.redirects.Inc()
	if s.fwd.redirects {
		s.send(&proto.NotLeader{RequestID: id, TenantID: ref.Name.Tenant, Namespace: ref.Name.Namespace, Stream: ref.Name.Stream,
			Shard: uint32(ref.Shard), Owner: proto.Owner{NodeID: d.Node.ID, Address: d.Node.Addr}, Generation: d.Generation})
		return true
	}
	s.sendError(proto.CodeNotLeader, notLeaderText(ref.Name, ref.Shard, d), id)
	return true
}

// groupRedirected answers a consumer-group request (group_poll, group_ack, group_nack,
// dead_letters_list, dead_letters_redrive) for a stream shard another broker leads with
// not_leader carrying its request_id, and reports true; false on a single node or for a
// shard served here. The group's state lives with the shard's leader, and the consumer is
// the connection, so a group is served only by the leader (never forwarded).
func (s *session) groupRedirected(t, ns, stream string, shard uint32, id uint64) bool {
	f := s.h.s.fwd
	if f == nil {
		return false
	}
	ref := core.ShardRef{Kind: core.ShardStream, Name: streamName(t, ns, stream), Shard: int(shard)}
	return f.redirectShard(s, ref, &id)
}

// watchRedirected answers a cache_watch led elsewhere and reports true; false on a
// single node, for an unknown cache (the local path answers not_found) and for a shard
// served here. A key watch is redirected to the leader of the key's cache shard
// (cache.ShardOf, the same routing as a cache operation). A prefix watch covers every
// shard of the cache: it is served here when this broker leads them all, redirected when
// one other broker leads them all (to shard 0's leader), and refused
// error{code: malformed, request_id} when several brokers lead them (no single broker
// can serve it; watch a key, or use a cache of one shard).
func (s *session) watchRedirected(m *proto.CacheWatch) bool {
	f := s.h.s.fwd
	if f == nil {
		return false
	}
	id := m.RequestID
	name := cacheName(m.TenantID, m.Namespace, m.Cache)
	c, err := s.h.s.catalog.Cache(m.TenantID, m.Namespace, m.Cache)
	if err != nil || c.Shards == 0 {
		return false
	}
	ref := func(shard int) core.ShardRef {
		return core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: name.Tenant, Namespace: name.Namespace, Stream: name.Cache}, Shard: shard}
	}
	if m.Prefix == nil {
		if m.Key == nil {
			return false
		}
		shard, err := f.routeCache(name, []byte(*m.Key))
		return err == nil && f.redirectShard(s, ref(shard), &id)
	}
	leaders := map[string]bool{}
	for i := range int(c.Shards) {
		if a, ok := f.s.owners.Lookup(ref(i)); ok && a.Leader != "" {
			leaders[strings.ToLower(a.Leader)] = true
		}
	}
	if len(leaders) > 1 {
		s.sendError(proto.CodeMalformed, "a prefix watch of cache "+name.String()+" spans shards led by several brokers: watch a key, or use a cache of one shard", &id)
		return true
	}
	return f.redirectShard(s, ref(0), &id)
}

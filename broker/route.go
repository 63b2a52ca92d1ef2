package broker

import (
	"felix/auth"
	"felix/core"
	"felix/proto"
)

// handleRouteLookup answers route_lookup (docs/client-protocol.md D17, issue 19 item 6):
// which broker leads each shard of a stream, so a client can publish to the owners
// directly. Permission: stream.publish or stream.subscribe on the stream (either
// suffices; the answer only names brokers). The stream's shard count comes from the
// catalog (not_found when the stream does not exist). Each shard's entry: in a static
// cluster or in cluster mode, the ownership table's leader, its client address from the
// node list (FELIX_CLUSTER_PEERS, or the brokers registered with the control plane) and
// the entry's generation; a shard with no entry or no leader known gets an empty owner (the
// client publishes through this broker, which forwards). On a single node every shard is
// led by this broker: owner {FELIX_NODE_ID, ""} at generation 0, "" meaning the broker
// the lookup was sent to. The answer is route {request_id, shards, routing} in shard
// order; routing is the stream's ("modulo" or "jump_hash"), so a client can hash a
// routing key to its shard itself (len(shards) is the shard count).
func (s *session) handleRouteLookup(m *proto.RouteLookup) {
	id := m.RequestID
	if err := s.principal.Allow(auth.ActionStreamPublish, m.TenantID, m.Namespace, m.Stream); err != nil {
		if err := s.principal.Allow(auth.ActionStreamSubscribe, m.TenantID, m.Namespace, m.Stream); err != nil {
			s.sendError(proto.CodeUnauthorized, auth.WireText(err), &id)
			return
		}
	}
	st, err := s.h.s.catalog.Stream(m.TenantID, m.Namespace, m.Stream)
	if err != nil {
		code, text := s.h.s.errorCode(err)
		s.sendError(code, text, &id)
		return
	}
	name := core.StreamName{Tenant: m.TenantID, Namespace: m.Namespace, Stream: m.Stream}
	routes := make([]proto.ShardRoute, st.Shards)
	for i := range routes {
		routes[i] = s.h.s.shardRoute(core.ShardRef{Kind: core.ShardStream, Name: name, Shard: i})
	}
	s.send(&proto.Route{RequestID: id, Shards: routes, Routing: st.Routing})
}

// shardRoute is ref's route_lookup entry (handleRouteLookup).
func (srv *Server) shardRoute(ref core.ShardRef) proto.ShardRoute {
	r := proto.ShardRoute{Shard: uint32(ref.Shard)}
	if srv.fwd == nil {
		r.Owner.NodeID = srv.cfg.NodeID
		return r
	}
	a, ok := srv.owners.Lookup(ref)
	if !ok || a.Leader == "" {
		return r
	}
	n := srv.fwd.node(a.Leader)
	r.Owner, r.Generation = proto.Owner{NodeID: n.ID, Address: n.Addr}, a.Generation
	return r
}

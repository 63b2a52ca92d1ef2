package broker

import (
	"github.com/quic-go/quic-go"

	cforward "felix/cluster/forward"
	"felix/core"
	"felix/proto"
)

// movedEnd is what a subscription's pump needs to end it with not_leader when its shard
// moves (issue 19 item 6): the shard subscribed to and whether the client listed the
// redirects feature.
type movedEnd struct {
	ref       core.ShardRef
	redirects bool
}

// endMoved writes, on a live subscription's event stream, the answer to its shard having
// moved (core.ErrMoved): not_leader with the new owner's node id, client address and
// generation from the ownership table (docs/client-protocol.md D11: no request_id on an
// event stream), or error{code: not_leader} naming them for a client without the
// redirects feature. Nothing is written on a single node, or when the table names no
// other leader (the shard closed here without a new owner): the stream then just ends
// and the SDK re-subscribes at the dialled broker. The caller closes the stream.
func (h *connHandler) endMoved(events *quic.SendStream, mv movedEnd) {
	f := h.s.fwd
	if f == nil {
		return
	}
	a, ok := f.remote(mv.ref)
	if !ok {
		return
	}
	d := cforward.Ingress(cforward.OpSubscribe, cforward.Entry{Assigned: true, Leader: f.node(a.Leader), Generation: a.Generation}, f.self)
	f.m.redirects.Inc()
	var m proto.Message = &proto.Error{Code: proto.CodeNotLeader, Message: notLeaderText(mv.ref.Name, mv.ref.Shard, d)}
	if mv.redirects {
		m = &proto.NotLeader{TenantID: mv.ref.Name.Tenant, Namespace: mv.ref.Name.Namespace, Stream: mv.ref.Name.Stream,
			Shard: uint32(mv.ref.Shard), Owner: proto.Owner{NodeID: d.Node.ID, Address: d.Node.Addr}, Generation: d.Generation}
	}
	_, _ = events.Write(proto.AppendMessage(nil, m))
}

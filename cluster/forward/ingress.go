package forward

import "strings"

// Operation is what a client asked the ingress broker for (issue 19 item 1).
type Operation uint8

// Operations.
const (
	OpPublish   Operation = iota + 1 // publish, publish_batch, binary publish (idempotent or not)
	OpCache                          // cache get/put/delete, counter add/get
	OpSubscribe                      // subscribe (one shard)
)

// Entry is this broker's ownership-table entry for the shard a request was routed to.
type Entry struct {
	Assigned   bool   // the table has an entry for the shard
	Leader     Node   // the leader: node id and client address (zero ID when none is known)
	Generation uint64 // the assignment generation of the entry
}

// IngressVerdict says what the ingress broker does with a client request.
type IngressVerdict uint8

// Ingress verdicts.
const (
	// ServeLocal: this broker leads the shard; serve it from the local engine.
	ServeLocal IngressVerdict = iota + 1
	// ForwardTo: forward to Node at Generation over the internal transport (a Machine).
	ForwardTo
	// RedirectClient: answer the client not_leader with Node's id, client address and
	// Generation (client-protocol §8.9): subscriptions are redirected, never proxied.
	RedirectClient
	// NoOwner: no leader is known for the shard; answer the client shard_unavailable.
	NoOwner
)

var ingressNames = [...]string{"invalid", "serve-local", "forward", "redirect", "no-owner"}

// String names the verdict ("serve-local", "forward", "redirect", "no-owner").
func (v IngressVerdict) String() string {
	if int(v) < len(ingressNames) {
		return ingressNames[v]
	}
	return "IngressVerdict(?)"
}

// IngressDecision is Ingress's answer: the verdict and, for ForwardTo and RedirectClient,
// the leader and the generation the route was resolved at.
type IngressDecision struct {
	Verdict    IngressVerdict
	Node       Node
	Generation uint64
}

// Ingress decides a client request for a shard already routed (core's Route resolved the
// shard first; seed, "Forwarded publish", "Subscribe"): this broker (node id self) leads it:
// ServeLocal (node ids compare without case, docs/internal-transport.md T2); no entry or no known leader: NoOwner; otherwise a subscribe is
// RedirectClient and a publish or a cache operation is ForwardTo the leader, at the entry's
// generation. An unknown op is NoOwner. Pure.
func Ingress(op Operation, e Entry, self string) IngressDecision {
	if op < OpPublish || op > OpSubscribe || !e.Assigned || e.Leader.ID == "" {
		return IngressDecision{Verdict: NoOwner}
	}
	if strings.EqualFold(e.Leader.ID, self) {
		return IngressDecision{Verdict: ServeLocal, Node: e.Leader, Generation: e.Generation}
	}
	v := ForwardTo
	if op == OpSubscribe {
		v = RedirectClient
	}
	return IngressDecision{Verdict: v, Node: e.Leader, Generation: e.Generation}
}

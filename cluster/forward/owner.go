package forward

import (
	"felix/auth"
	"felix/cluster/transport"
	"felix/proto"
)

// Node names a broker: its node id and the client address it advertises
// (FELIX_ADVERTISED_ADDR), the pair a NotLeader answer carries (seed, "Subscribe").
type Node struct {
	ID   string // node id (a DNS name)
	Addr string // client address, host:port
}

// OwnerView is what the broker a forward reached knows of the shard the forward names, read
// from its ownership table when the forward arrives.
type OwnerView struct {
	// Assigned: the table has an entry for the shard. False (the stream or cache or the
	// shard is unknown here) is answered StaleRoute: this broker is behind the requester.
	Assigned bool
	// Leads: this broker leads the shard at Generation.
	Leads bool
	// Generation is the assignment generation this broker knows for the shard.
	Generation uint64
	// Leader is the shard's leader at Generation: this broker itself when Leads (a
	// requester behind is redirected here at the newer generation); the zero Node when no
	// leader is known (answered Unavailable).
	Leader Node
}

// OwnerRequest is the part of a decoded forward the owner's decision reads (RequestOf
// builds it from the proto message).
type OwnerRequest struct {
	Kind          proto.Kind     // 2 or 6 (legacy), 22 or 23 (authorized), 28 (idempotent)
	CorrelationID uint64         // echoed by the answer
	Shard         proto.ShardRef // the shard the forward names: the caller looks OwnerView up by it
	Generation    uint64         // the generation the forwarder resolved its route against
	Op            proto.CacheOp  // cache kinds (6, 23): the op
	Credential    []byte         // authorized kinds: the client's bearer token
}

// Verdict is the owner's decision on a forward.
type Verdict uint8

// Verdicts of Decide. Every verdict but Proceed comes with the one answer to send.
const (
	// Proceed: this broker leads the shard at the named generation and the credential
	// allows the action: apply the forward and answer from the result.
	Proceed Verdict = iota + 1
	// RefuseNotLeader: the requester is behind, or this broker does not lead the shard;
	// the answer names the leader, its client address and generation. Never forwarded.
	RefuseNotLeader
	// RefuseStaleRoute: the requester is ahead (or names a shard this broker does not
	// know); nothing is written.
	RefuseStaleRoute
	// RefuseUnauthorized: the credential is missing, does not verify, is of another
	// tenant or lacks the action, or the kind is a legacy (credential-less) one.
	RefuseUnauthorized
	// RefuseUnavailable: this broker does not lead the shard and knows no leader.
	RefuseUnavailable
	// RefuseMalformed: not a forward kind, or a cache op outside 1..5.
	RefuseMalformed
)

var verdictNames = [...]string{"invalid", "proceed", "NotLeader", "StaleRoute", "Unauthorized",
	"Unavailable", "Malformed"}

// String names the verdict ("proceed", "NotLeader", ...).
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "Verdict(?)"
}

// OwnerDecision is Decide's answer.
type OwnerDecision struct {
	Verdict Verdict
	// Action is the permission the forward needs (stream.publish; cache.read for Get and
	// CounterGet; cache.write for Put, Delete and CounterAdd); zero when the kind or op is
	// malformed.
	Action auth.Action
	// Answer is the one terminal answer for every verdict but Proceed (nil then), carrying
	// the request's correlation id, in the request's shape: NotLeader; else
	// ForwardPublishError for a publish (2, 22, 28) and ForwardCacheError for a cache op
	// (6, 23); Error for a kind that is no forward.
	Answer proto.InternalMessage
}

// Decide is the owner's decision on a forward that reached it (seed, "Forwarded publish",
// "Forwarded cache operation", "Authorization across a forward", "Chains are refused, not
// relayed"), in this order:
//
//  1. the kind must be a forward kind and a cache op one of 1..5 (else Malformed);
//  2. ownership at the named generation: requester ahead, or a shard this broker has no
//     entry for: StaleRoute; this broker does not lead the shard: NotLeader(leader,
//     address, generation), or Unavailable when it knows no leader; it leads the shard but
//     the requester is behind: NotLeader(this broker, its generation); equal: go on;
//  3. the credential: a legacy kind (2, 6) on this build, an empty credential, or a check
//     that does not answer CredentialOK (check nil included) is Unauthorized;
//  4. Proceed.
//
// check is called at most once, only when steps 1 and 2 pass, with the forward's credential
// and the action needed. Nothing is written before Proceed. Pure apart from check.
func Decide(view OwnerView, req OwnerRequest, check CredentialCheck) OwnerDecision {
	action, ok := RequiredAction(req.Kind, req.Op)
	if !ok {
		return refuse(RefuseMalformed, 0, req, proto.InternalMalformed)
	}
	if v, answer := ownership(view, req); answer != nil {
		return OwnerDecision{Verdict: v, Action: action, Answer: answer}
	}
	if legacyKind(req.Kind) || len(req.Credential) == 0 || check == nil ||
		check(req.Credential, action) != CredentialOK {
		return refuse(RefuseUnauthorized, action, req, proto.InternalUnauthorized)
	}
	return OwnerDecision{Verdict: Proceed, Action: action}
}

// ownership applies the seed's generation rules; a nil answer means equal: proceed.
func ownership(view OwnerView, req OwnerRequest) (Verdict, proto.InternalMessage) {
	switch {
	case !view.Assigned || req.Generation > view.Generation:
		return RefuseStaleRoute, transport.Refusal(req.Kind, req.CorrelationID, proto.InternalStaleRoute)
	case !view.Leads && view.Leader.ID == "":
		return RefuseUnavailable, transport.Refusal(req.Kind, req.CorrelationID, proto.InternalUnavailable)
	case !view.Leads || req.Generation < view.Generation:
		return RefuseNotLeader, &proto.InternalNotLeader{CorrelationID: req.CorrelationID,
			OwnerNodeID: []byte(view.Leader.ID), OwnerAddress: []byte(view.Leader.Addr),
			Generation: view.Generation}
	}
	return 0, nil
}

func refuse(v Verdict, action auth.Action, req OwnerRequest, code proto.InternalCode) OwnerDecision {
	return OwnerDecision{Verdict: v, Action: action, Answer: transport.Refusal(req.Kind, req.CorrelationID, code)}
}

// RequiredAction returns the permission a forward of kind (with op for a cache kind) needs,
// the one a direct request needs (seed, "Authorization across a forward"): stream.publish
// for 2, 22 and 28; cache.read for Get and CounterGet and cache.write for Put, Delete and
// CounterAdd for 6 and 23. ok is false for any other kind or op.
func RequiredAction(kind proto.Kind, op proto.CacheOp) (auth.Action, bool) {
	switch {
	case publishKind(kind):
		return auth.ActionStreamPublish, true
	case !cacheKind(kind) || op < proto.CacheOpPut || op > proto.CacheOpCounterGet:
		return 0, false
	case op.ReadOnly():
		return auth.ActionCacheRead, true
	}
	return auth.ActionCacheWrite, true
}

func publishKind(k proto.Kind) bool {
	return k == proto.KindForwardPublish || k == proto.KindAuthorizedForwardPublish ||
		k == proto.KindIdempotentForwardPublish
}

func cacheKind(k proto.Kind) bool {
	return k == proto.KindForwardCacheOp || k == proto.KindAuthorizedForwardCacheOp
}

func legacyKind(k proto.Kind) bool {
	return k == proto.KindForwardPublish || k == proto.KindForwardCacheOp
}

// RequestOf reads the fields Decide needs from a decoded forward: *proto.ForwardPublish,
// *proto.AuthorizedForwardPublish, *proto.IdempotentForwardPublish, *proto.ForwardCacheOp or
// *proto.AuthorizedForwardCacheOp. ok is false for any other message (not a forward). The
// returned slices alias the message (valid while its frame buffer is).
func RequestOf(m proto.InternalMessage) (OwnerRequest, bool) {
	switch m := m.(type) {
	case *proto.ForwardPublish:
		return OwnerRequest{Kind: m.Kind(), CorrelationID: m.CorrelationID, Shard: m.Shard,
			Generation: m.Generation}, true
	case *proto.AuthorizedForwardPublish:
		r, _ := RequestOf(&m.ForwardPublish)
		r.Kind, r.Credential = m.Kind(), m.Credential
		return r, true
	case *proto.IdempotentForwardPublish:
		r, _ := RequestOf(&m.AuthorizedForwardPublish)
		r.Kind = m.Kind()
		return r, true
	case *proto.ForwardCacheOp:
		return OwnerRequest{Kind: m.Kind(), CorrelationID: m.CorrelationID, Shard: m.Shard,
			Generation: m.Generation, Op: m.Op}, true
	case *proto.AuthorizedForwardCacheOp:
		r, _ := RequestOf(&m.ForwardCacheOp)
		r.Kind, r.Credential = m.Kind(), m.Credential
		return r, true
	}
	return OwnerRequest{}, false
}

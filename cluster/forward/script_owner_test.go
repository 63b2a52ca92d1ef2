package forward

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"felix/auth"
	"felix/clock/clocktest"
	"felix/cluster/transport"
	"felix/proto"
)

// authFixture is a real key store with tenants t1 and t2, and one token per credential
// case, verified by a real auth.TokenVerifier on a fixed clock.
type authFixture struct {
	v      auth.Verifier
	tokens map[string]string
}

var fixtureNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newAuthFixture(t testing.TB) *authFixture {
	t.Helper()
	now := clocktest.NewFake(fixtureNow)
	ks, err := auth.OpenKeyStore(t.TempDir(), auth.KeyStoreOptions{Clock: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"t1", "t2"} {
		if _, err := ks.CreateTenant(tenant); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(at time.Time, tenant string, perms ...string) string {
		tok, err := auth.NewIssuer(ks, clocktest.NewFake(at), nil).Issue(tenant, "svc", perms, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	all := []string{"stream.publish:stream:t1/ns/*", "cache.read:cache:t1/ns/*", "cache.write:cache:t1/ns/*"}
	ok := issue(fixtureNow, "t1", all...)
	f := &authFixture{v: auth.NewVerifier(auth.VerifierOptions{Keys: ks, Clock: now}), tokens: map[string]string{
		"ok":            ok,
		"missing":       "",
		"bad-signature": ok[:len(ok)-4] + flip(ok[len(ok)-4:]),
		"expired":       issue(fixtureNow.Add(-3*time.Hour), "t1", all...),
		"other-tenant":  issue(fixtureNow, "t2", "stream.publish:stream:t2/ns/*", "cache.read:cache:t2/ns/*", "cache.write:cache:t2/ns/*"),
		"lacks-action":  issue(fixtureNow, "t1", "stream.subscribe:stream:t1/ns/*", "cache.read:cache:t1/ns/*"),
		"other-object":  issue(fixtureNow, "t1", "stream.publish:stream:t1/ns/audit", "cache.write:cache:t1/ns/audit"),
	}}
	return f
}

// flip changes every character of a base64url tail to another base64url character.
func flip(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
	}
	return string(b)
}

var self = Node{ID: "a", Addr: "a.felix:5000"}

func nodeOf(id string) Node { return Node{ID: id, Addr: id + ".felix:5000"} }

// viewArg: view=leads|follows|no-leader|unassigned view-gen=N [leader=b].
func viewArg(a args) (OwnerView, error) {
	gen, err := a.u64("view-gen", 0)
	if err != nil {
		return OwnerView{}, err
	}
	v := OwnerView{Assigned: true, Generation: gen}
	switch a.str("view", "leads") {
	case "leads":
		v.Leads, v.Leader = true, self
	case "follows":
		v.Leader = nodeOf(a.str("leader", "b"))
	case "no-leader":
	case "unassigned":
		v = OwnerView{}
	default:
		return v, fmt.Errorf("view=%q", a["view"])
	}
	return v, nil
}

// forwardMessage builds a forward of kind naming t1/ns/orders shard 3 at gen, with the
// credential for the authorized kinds, as a forwarder of this build would.
func forwardMessage(kind proto.Kind, op proto.CacheOp, gen uint64, cred []byte) proto.InternalMessage {
	ref := proto.ShardRef{Tenant: []byte("t1"), Namespace: []byte("ns"), Name: []byte("orders"), Shard: 3}
	pub := proto.ForwardPublish{CorrelationID: 77, Shard: ref, Generation: gen, Payloads: [][]byte{[]byte("p")}}
	co := proto.ForwardCacheOp{CorrelationID: 77, Shard: ref, Generation: gen, Op: op, Key: []byte("k")}
	switch kind {
	case proto.KindForwardPublish:
		return &pub
	case proto.KindAuthorizedForwardPublish:
		return &proto.AuthorizedForwardPublish{ForwardPublish: pub, Credential: cred}
	case proto.KindIdempotentForwardPublish:
		return &proto.IdempotentForwardPublish{AuthorizedForwardPublish: proto.AuthorizedForwardPublish{
			ForwardPublish: pub, Credential: cred}, ProducerID: []byte("prod-1"), RequestID: 9}
	case proto.KindForwardCacheOp:
		return &co
	case proto.KindAuthorizedForwardCacheOp:
		return &proto.AuthorizedForwardCacheOp{ForwardCacheOp: co, Credential: cred}
	}
	return &proto.Hello{CorrelationID: 77, NodeID: []byte("x")}
}

// frameOf encodes m, then decodes it as kind (a relabelled header when kind differs).
func frameOf(m proto.InternalMessage, kind proto.Kind) (proto.InternalMessage, error) {
	frame, err := proto.AppendInternalFrame(nil, m)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint16(frame[6:], uint16(kind))
	h, err := proto.DecodeInternalHeader(frame, 1<<20)
	if err != nil {
		return nil, err
	}
	return proto.DecodeInternal(h.Kind, frame[proto.InternalHeaderSize:])
}

// decideMessage runs the owner's path on a decoded forward and prints what it did.
func (h *harness) decideMessage(view OwnerView, msg proto.InternalMessage, kind proto.Kind) string {
	req, ok := RequestOf(msg)
	if !ok {
		req = OwnerRequest{Kind: kind, CorrelationID: msg.Correlation()}
	}
	checked := "none"
	inner := AuthCheck(h.fix.v, req.Shard)
	d := Decide(view, req, func(cred []byte, act auth.Action) Credential {
		c := inner(cred, act)
		checked = act.String() + ":" + c.String()
		return c
	})
	var b strings.Builder
	fmt.Fprintf(&b, "verdict=%v action=%v checked=%s\n", d.Verdict, d.Action, checked)
	fmt.Fprintf(&b, "answer=%s", describe(d.Answer))
	if d.Answer != nil && d.Answer.Correlation() != 77 {
		fmt.Fprintf(&b, " (correlation %d, want 77)", d.Answer.Correlation())
	}
	return b.String()
}

// cmdDecide: decide kind=K [op=O] gen=N view=... view-gen=N [leader=b] cred=NAME
func (h *harness) cmdDecide(d *datadriven.TestData) (string, error) {
	if h.fix == nil {
		h.fix = newAuthFixture(h.t)
	}
	a := cmdArgs(d)
	kind, err := a.kind("kind")
	if err != nil {
		return "", err
	}
	gen, err := a.u64("gen", 0)
	if err != nil {
		return "", err
	}
	view, err := viewArg(a)
	if err != nil {
		return "", err
	}
	tok, ok := h.fix.tokens[a.str("cred", "ok")]
	if !ok {
		return "", fmt.Errorf("cred=%q: no such token", a["cred"])
	}
	op := opNames[a.str("op", "put")]
	msg, err := frameOf(forwardMessage(kind, op, gen, []byte(tok)), kind)
	note := ""
	if err != nil { // does not encode (an empty credential, an invalid op): decide its fields
		msg, note = forwardMessage(kind, op, gen, []byte(tok)), "(no frame: "+err.Error()+")\n"
	}
	return note + h.decideMessage(view, msg, kind), nil
}

// cmdRelabel: relabel from=K to=K [op=O] — encode a forward of kind from, rewrite the
// header's kind to to, decode it, and decide it as the owner (view leads at gen 1).
func (h *harness) cmdRelabel(d *datadriven.TestData) (string, error) {
	if h.fix == nil {
		h.fix = newAuthFixture(h.t)
	}
	a := cmdArgs(d)
	from, err := a.kind("from")
	if err != nil {
		return "", err
	}
	to, err := a.kind("to")
	if err != nil {
		return "", err
	}
	orig := forwardMessage(from, opNames[a.str("op", "put")], 1, []byte(h.fix.tokens["ok"]))
	msg, err := frameOf(orig, to)
	if err != nil {
		return fmt.Sprintf("decode: %v\nanswer=%s (the listener's refusal, docs/internal-transport.md T16)\nwritten=no",
			err, describe(transport.Refusal(to, 77, proto.InternalMalformed))), nil
	}
	return "decoded as " + msg.Kind().String() + "\n" +
		h.decideMessage(OwnerView{Assigned: true, Leads: true, Generation: 1, Leader: self}, msg, to), nil
}

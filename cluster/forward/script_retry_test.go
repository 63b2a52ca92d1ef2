package forward

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

// cmdStart: start kind=K [op=O] to=NODE gen=N [attempts=N] [backoff=D] [max-backoff=D]
func (h *harness) cmdStart(d *datadriven.TestData) (string, error) {
	a := cmdArgs(d)
	kind, err := a.kind("kind")
	if err != nil {
		return "", err
	}
	gen, err := a.u64("gen", 0)
	if err != nil {
		return "", err
	}
	attempts, err := a.u64("attempts", 0)
	if err != nil {
		return "", err
	}
	opts := Options{Attempts: int(attempts)}
	if opts.Backoff, err = durArg(a, "backoff"); err != nil {
		return "", err
	}
	if opts.MaxBackoff, err = durArg(a, "max-backoff"); err != nil {
		return "", err
	}
	m, act, err := NewMachine(Request{Kind: kind, Op: opNames[a.str("op", "put")]}, a.str("to", "b"), gen, opts)
	if err != nil {
		return "", err
	}
	h.m = m
	return describeAction(act), nil
}

func durArg(a args, k string) (time.Duration, error) {
	v, ok := a[k]
	if !ok {
		return 0, nil
	}
	return time.ParseDuration(v)
}

// cmdEvents feeds one Event per input line to the machine and prints each Action:
//
//	shed | backoff | unreachable | not-sent | dropped | timed-out | other
//	not-leader owner=NODE gen=N
//	publish-error code=C | cache-error code=C
//	unsupported-kind refused=K
//	publish-ok first=N last=N | duplicate first=N last=N | cache-ok [present=true value=V]
func (h *harness) cmdEvents(d *datadriven.TestData) (string, error) {
	if h.m == nil {
		return "", errors.New("no machine: start first")
	}
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
		ev, err := eventOf(line)
		if err != nil {
			return "", err
		}
		act, err := h.m.Step(ev)
		s := fmt.Sprintf("%-40s -> %s", line, describeAction(act))
		if err != nil {
			s += " [" + err.Error() + "]"
		}
		out = append(out, s)
	}
	out = append(out, fmt.Sprintf("attempts=%d done=%t", h.m.Attempts(), h.m.Done()))
	return strings.Join(out, "\n"), nil
}

func eventOf(line string) (Event, error) {
	word, a := lineArgs(line)
	ev := Event{}
	for o := Outcome(1); int(o) < len(outcomeNames); o++ {
		if o.String() == word {
			ev.Outcome = o
		}
	}
	if ev.Outcome == 0 {
		return ev, fmt.Errorf("unknown event %q", word)
	}
	var err error
	if c, ok := a["code"]; ok {
		if ev.Code, ok = codeNames[c]; !ok {
			return ev, fmt.Errorf("code=%q", c)
		}
	}
	if _, ok := a["refused"]; ok {
		if ev.RefusedKind, err = a.kind("refused"); err != nil {
			return ev, err
		}
	}
	ev.Owner = a.str("owner", "")
	if ev.Generation, err = a.u64("gen", 0); err != nil {
		return ev, err
	}
	if ev.FirstOffset, err = a.u64("first", 0); err != nil {
		return ev, err
	}
	if ev.LastOffset, err = a.u64("last", 0); err != nil {
		return ev, err
	}
	ev.Present = a.str("present", "false") == "true"
	if v, ok := a["value"]; ok {
		ev.Value = []byte(v)
	}
	return ev, nil
}

// cmdConverse: converse forwarder=current|old owner=current|old [op=O | publish] — a
// forwarder of one build against an owner of the other (or the same) build, every message
// encoded and decoded by proto: the seed's note on credentialed forwards, both directions.
func (h *harness) cmdConverse(d *datadriven.TestData) (string, error) {
	if h.fix == nil {
		h.fix = newAuthFixture(h.t)
	}
	a := cmdArgs(d)
	oldForwarder, oldOwner := a.str("forwarder", "current") == "old", a.str("owner", "current") == "old"
	msg, req, err := h.conversationRequest(a.str("op", "publish"), oldForwarder)
	if err != nil {
		return "", err
	}
	m, act, err := NewMachine(req, "b", 1, Options{})
	if err != nil {
		return "", err
	}
	var out []string
	for act.Step == Send && len(out) < 40 {
		sent, err := AsKind(msg, act.Kind, act.Generation)
		if err != nil {
			return "", err
		}
		out = append(out, fmt.Sprintf("-> %s %v gen=%d", act.To, act.Kind, act.Generation))
		answer := h.ownerAnswers(sent, oldOwner)
		out = append(out, "<- "+describe(answer))
		if act, err = m.Step(Classify(answer, nil)); err != nil {
			return "", err
		}
	}
	out = append(out, describeAction(act))
	return strings.Join(out, "\n"), nil
}

// conversationRequest builds the forward a forwarder of this build (or, old, of a build
// before kinds 22/23: the legacy kind) sends for op ("publish" or a cache op).
func (h *harness) conversationRequest(op string, old bool) (proto.InternalMessage, Request, error) {
	r := Route{Tenant: "t1", Namespace: "ns", Name: "orders", Shard: 3, Shards: 8, Generation: 1}
	cred := []byte(h.fix.tokens["ok"])
	var msg proto.InternalMessage
	var req Request
	var err error
	if op == "publish" {
		msg, err = PublishMessage(r, [][]byte{[]byte("p")}, cred)
		req = Request{Kind: proto.KindAuthorizedForwardPublish}
	} else {
		msg, err = CacheMessage(r, CacheRequest{Op: opNames[op], Key: []byte("k")}, cred)
		req = Request{Kind: proto.KindAuthorizedForwardCacheOp, Op: opNames[op]}
	}
	if err != nil || !old {
		return msg, req, err
	}
	req.Kind, _ = fallback(req.Kind)
	msg, err = AsKind(msg, req.Kind, 1)
	return msg, req, err
}

// ownerAnswers is broker b, leading t1/ns/orders shard 3 at generation 1, answering sent
// after an encode/decode round trip. An old owner does not know kinds 22, 23 and 28
// (UnsupportedKind) and serves the legacy kinds unchecked; a current one runs Decide with
// the real verifier.
func (h *harness) ownerAnswers(sent proto.InternalMessage, old bool) proto.InternalMessage {
	got, err := frameOf(sent, sent.Kind())
	if err != nil {
		return &proto.InternalError{CorrelationID: sent.Correlation(), Code: proto.InternalMalformed}
	}
	k := got.Kind()
	if old && (k == proto.KindAuthorizedForwardPublish || k == proto.KindAuthorizedForwardCacheOp ||
		k == proto.KindIdempotentForwardPublish) {
		return roundTrip(&proto.UnsupportedKind{CorrelationID: got.Correlation(), RefusedKind: k})
	}
	req, _ := RequestOf(got)
	if !old {
		view := OwnerView{Assigned: true, Leads: true, Generation: 1, Leader: nodeOf("b")}
		if dec := Decide(view, req, AuthCheck(h.fix.v, req.Shard)); dec.Verdict != Proceed {
			return roundTrip(dec.Answer)
		}
	}
	if publishKind(k) {
		return roundTrip(&proto.ForwardPublishOk{CorrelationID: req.CorrelationID, FirstOffset: 10, LastOffset: 10})
	}
	return roundTrip(&proto.ForwardCacheOk{CorrelationID: req.CorrelationID, Present: true, Value: []byte("v")})
}

// roundTrip encodes and decodes an answer, as the transport would deliver it.
func roundTrip(m proto.InternalMessage) proto.InternalMessage {
	got, err := frameOf(m, m.Kind())
	if err != nil {
		panic(fmt.Sprintf("answer %v does not round-trip: %v", m.Kind(), err))
	}
	return got
}

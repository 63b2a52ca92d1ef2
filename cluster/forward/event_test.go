package forward

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"felix/auth"
	"felix/cluster/transport"
	"felix/proto"
)

// TestClassifyMapsTheTransportErrors maps every error transport.Pool.Request documents
// (cluster/transport/errors.go), wrapped as the pool wraps them, to its row.
func TestClassifyMapsTheTransportErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("%w: peer b", err) }
	for _, c := range []struct {
		err  error
		want Outcome
	}{
		{wrap(transport.ErrShed), OutShed},
		{wrap(transport.ErrBackoff), OutBackoff},
		{wrap(transport.ErrUnreachable), OutUnreachable},
		{wrap(transport.ErrConnectionLost), OutDropped},
		{wrap(transport.ErrTimeout), OutTimedOut},
		{context.DeadlineExceeded, OutTimedOut},
		{context.Canceled, OutTimedOut},
		{wrap(transport.ErrWrongPeer), OutNotSent},
		{wrap(transport.ErrUnauthorized), OutNotSent},
		{wrap(transport.ErrProtocolVersion), OutNotSent},
		{transport.ErrClosed, OutNotSent},
		{transport.ErrTooManyPeers, OutNotSent},
		{transport.ErrInvalidNodeID, OutNotSent},
		{fmt.Errorf("transport: body over the bound: %w", proto.ErrFrameTooLarge), OutNotSent},
		{errors.New("something else"), OutOther},
	} {
		if got := Classify(nil, c.err).Outcome; got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
		if transport.Retryable(c.err) != (c.want == OutShed || c.want == OutBackoff || c.want == OutUnreachable) {
			t.Errorf("%v: transport.Retryable disagrees with the nothing-sent rows", c.err)
		}
	}
}

func TestClassifyReadsTheAnswers(t *testing.T) {
	for _, c := range []struct {
		m    proto.InternalMessage
		want Event
	}{
		{&proto.ForwardPublishOk{FirstOffset: 1, LastOffset: 2}, Event{Outcome: OutPublishOk, FirstOffset: 1, LastOffset: 2}},
		{&proto.ForwardPublishDuplicate{FirstOffset: 3, LastOffset: 4}, Event{Outcome: OutDuplicate, FirstOffset: 3, LastOffset: 4}},
		{&proto.InternalNotLeader{OwnerNodeID: []byte("c"), OwnerAddress: []byte("c:1"), Generation: 7},
			Event{Outcome: OutNotLeader, Owner: "c", OwnerAddr: "c:1", Generation: 7}},
		{&proto.ForwardPublishError{Code: proto.InternalOverload}, Event{Outcome: OutPublishError, Code: proto.InternalOverload}},
		{&proto.ForwardCacheError{Code: proto.InternalUnauthorized}, Event{Outcome: OutCacheError, Code: proto.InternalUnauthorized}},
		{&proto.UnsupportedKind{RefusedKind: 22}, Event{Outcome: OutUnsupportedKind, RefusedKind: 22}},
		{&proto.InternalError{Code: proto.InternalMalformed}, Event{Outcome: OutOther}},
		{&proto.ReplicateOk{}, Event{Outcome: OutOther}},
	} {
		got := Classify(c.m, nil)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Classify(%v) = %+v, want %+v", c.m.Kind(), got, c.want)
		}
	}
	got := Classify(&proto.ForwardCacheOk{Present: true, Value: []byte{}}, nil)
	if got.Outcome != OutCacheOk || !got.Present || got.Value == nil {
		t.Errorf("a stored empty value must stay present: %+v", got)
	}
}

func TestCredentialOfMapsTheAuthErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Credential
	}{
		{nil, CredentialOK},
		{&auth.TokenError{Reason: "signature invalid"}, CredentialBadSignature},
		{auth.ErrUnauthorized, CredentialBadSignature},
		{auth.ErrTenantMismatch, CredentialOtherTenant},
		{fmt.Errorf("x: %w", auth.ErrForbidden), CredentialLacksAction},
		{errors.New("anything else"), CredentialBadSignature},
	} {
		if got := CredentialOf(c.err); got != c.want {
			t.Errorf("CredentialOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	check := AuthCheck(nil, proto.ShardRef{})
	if got := check([]byte("tok"), auth.ActionStreamPublish); got != CredentialBadSignature {
		t.Errorf("a nil verifier must refuse, got %v", got)
	}
	if got := check(nil, auth.ActionStreamPublish); got != CredentialMissing {
		t.Errorf("an empty credential is missing, got %v", got)
	}
	var zero Credential
	d := Decide(OwnerView{Assigned: true, Leads: true, Leader: self}, OwnerRequest{Kind: 22, Credential: []byte("t")},
		func([]byte, auth.Action) Credential { return zero })
	if d.Verdict != RefuseUnauthorized {
		t.Errorf("a check answering the zero Credential must refuse, got %v", d.Verdict)
	}
}

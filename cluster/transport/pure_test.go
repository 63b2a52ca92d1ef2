package transport

import (
	"errors"
	"testing"
	"time"

	"felix/proto"
)

func TestValidNodeID(t *testing.T) {
	for _, ok := range []string{"node-a", "broker-1.felix.svc.cluster.local", "A1", "x"} {
		if err := ValidNodeID(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	long := ""
	for len(long) < 260 {
		long += "abcdefghi."
	}
	for _, bad := range []string{"", "-a", "a-", "a..b", "a.", "a_b", "10.0.0.1", "::1", "ü", long, "a b",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		if err := ValidNodeID(bad); !errors.Is(err, ErrInvalidNodeID) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for _, tc := range []struct {
		failures int
		jitter   float64
		want     time.Duration
	}{{1, 0, 50 * time.Millisecond}, {2, 0, 100 * time.Millisecond}, {3, 0.5, 300 * time.Millisecond},
		{10, 0, 500 * time.Millisecond}, {60, 0.999999, 999999500 * time.Nanosecond}} {
		if got := b.Delay(tc.failures, tc.jitter); got != tc.want {
			t.Errorf("Delay(%d, %v) = %v, want %v", tc.failures, tc.jitter, got, tc.want)
		}
	}
}

func TestRefusalHasTheRequestsShape(t *testing.T) {
	for kind, want := range map[proto.Kind]proto.Kind{
		proto.KindAuthorizedForwardPublish: proto.KindForwardPublishError,
		proto.KindIdempotentForwardPublish: proto.KindForwardPublishError,
		proto.KindAuthorizedForwardCacheOp: proto.KindForwardCacheError,
		proto.KindReplicateCounterRecords:  proto.KindReplicateError,
		proto.KindReplicateBootstrap:       proto.KindReplicateError,
		proto.KindFence:                    proto.KindReplicateError,
		proto.KindFencePosition:            proto.KindReplicateError,
		proto.KindHello:                    proto.KindError,
	} {
		m := Refusal(kind, 9, proto.InternalOverload)
		if m.Kind() != want || m.Correlation() != 9 {
			t.Errorf("Refusal(%v) = %v/%d, want %v/9", kind, m.Kind(), m.Correlation(), want)
		}
	}
}

func TestCloseCode(t *testing.T) {
	if CloseCode(&proto.FatalError{Err: &proto.DecodeError{Err: proto.ErrUnsupportedVersion}}) != CodeProtocolVersion {
		t.Fatal("version")
	}
	if CloseCode(&proto.FatalError{Err: &proto.DecodeError{Err: proto.ErrInvalidMagic}}) != CodeMalformed {
		t.Fatal("magic")
	}
}

func TestCheckClaim(t *testing.T) {
	if err := CheckClaim(nil, "node-a"); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no certificate: %v", err)
	}
}

package placement

import (
	"errors"
	"fmt"
)

// InputError is bad input to a decision (an empty node id, a replica twice in a set, a
// shard whose leader is not a member): the caller's state is inconsistent, and nothing is
// decided.
type InputError struct {
	What string
}

// Error returns "placement: bad input: " and what was wrong.
func (e *InputError) Error() string { return "placement: bad input: " + e.What }

func badInput(format string, args ...any) error {
	return &InputError{What: fmt.Sprintf(format, args...)}
}

// ErrLeadershipLost answers a lease-free read (or a group operation) whose fence round
// failed: a replica refused this leader for a newer generation, or no majority answered in
// time (seeds/upgrades-and-compatibility.txt, lease_free_reads: "refuses them as
// leadership_lost, which is retryable"). The client finds the shard again.
var ErrLeadershipLost = errors.New("leadership_lost")

// ErrLeaseExpired answers a Leader-stream read, or holds a Quorum ack before majority_ack,
// once the leader's lease is no longer valid on its own clock (or it holds none).
var ErrLeaseExpired = errors.New("placement: the leader's lease expired")

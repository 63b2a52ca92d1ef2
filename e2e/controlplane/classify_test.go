package controlplane

import (
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"

	"felix/testbed/history"
)

// TestWriteFailureClassification pins how a write's answer becomes an outcome: Fail only
// when the write certainly reached no Raft log or was refused by the state machine (a
// wrong Fail would make the checker reject a correct control plane), Info for whatever
// may have been applied, and a 400 or 401 noted as a test bug.
func TestWriteFailureClassification(t *testing.T) {
	dialRefused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cut := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	notLeader := func(msg string) answer {
		return answer{status: http.StatusServiceUnavailable, code: "unavailable", message: "NotLeader: " + msg}
	}
	cases := []struct {
		name       string
		ans        answer
		want       history.Outcome
		unexpected bool
	}{
		{"dial refused", answer{err: dialRefused}, history.Fail, false},
		{"connection reset mid-request", answer{err: cut}, history.Info, false},
		{"request timeout", answer{err: errors.New("context deadline exceeded")}, history.Info, false},
		{"no leader", notLeader("no leader elected"), history.Fail, false},
		{"forwarded to a non-leader", notLeader("a forwarded request reached a member that does not lead"), history.Fail, false},
		{"leader URL unknown", notLeader("member cp2 leads; its REST address is not known here"), history.Fail, false},
		{"raft ErrNotLeader", notLeader("node is not the leader"), history.Fail, false},
		{"forward dial refused", notLeader(`forwarding to the leader failed: Post "http://127.0.0.1:1/v1": dial tcp 127.0.0.1:1: connect: connection refused`), history.Fail, false},
		{"leadership lost while committing", notLeader("leadership lost while committing log"), history.Info, false},
		{"raft shut down", notLeader("raft is already shutdown"), history.Info, false},
		{"forward cut", notLeader(`forwarding to the leader failed: Post "http://127.0.0.1:1/v1": EOF`), history.Info, false},
		{"placement refused", answer{status: http.StatusServiceUnavailable, code: "unavailable", message: "replication factor 1 needs 1 live brokers; 0 are live"}, history.Fail, false},
		{"state machine 409", answer{status: http.StatusConflict, code: "name_deleted"}, history.Fail, false},
		{"propose timeout", answer{status: http.StatusInternalServerError, code: "internal", message: "timed out enqueuing operation"}, history.Info, false},
		{"bad request", answer{status: http.StatusBadRequest, code: "malformed"}, history.Fail, true},
		{"no token", answer{status: http.StatusUnauthorized, code: "unauthorized"}, history.Fail, true},
	}
	for _, c := range cases {
		a := &api{}
		if got := a.writeFailure(c.name, c.ans); got != c.want || (len(a.unexpected) > 0) != c.unexpected {
			t.Errorf("%s: %s (unexpected %v), want %s (unexpected %v)", c.name, got, a.unexpected, c.want, c.unexpected)
		}
	}
}

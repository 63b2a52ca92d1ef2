package raftnode

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"felix/clock"
	"felix/cluster/meta"
)

// DefaultHoldRecheck is how often a held member's standing is read again
// (the seed: replication resumes "within about a second" of the member
// reporting the group's level).
const DefaultHoldRecheck = 100 * time.Millisecond

// Standing is what the leader knows of one member when it is about to send
// to it: the group's metadata floor, the member's evidence (meta.Evidence:
// the level it reported under this server id) and whether it is still a
// voter of the configuration.
type Standing struct {
	Floor    meta.Level
	Evidence meta.Evidence
	Voter    bool
}

// ErrHoldStopped is the error of a send that was held when the transport
// stopped (the node is closing).
var ErrHoldStopped = errors.New("raftnode: transport stopped while the member was held")

// IdentityError is the error of an RPC answered by a different server than
// the one it was sent to: the member at that address lost its disk and came
// back under a new storage identity (Got), so its answer is not Want's (its
// vote and its acknowledgements are refused; docs/controlplane.md, "Raft").
type IdentityError struct {
	Want, Got raft.ServerID
	Address   raft.ServerAddress
}

// Error names both server ids and the address.
func (e *IdentityError) Error() string {
	return fmt.Sprintf("raftnode: %s answered as %s: a new storage identity, not the member asked; remove %s and add %s",
		e.Address, e.Got, e.Want, e.Got)
}

// HoldTransport wraps a raft.Transport for the member-hold rule (seed
// "Upgrades and compatibility", a member below the floor "is held rather than
// fed"; issue 17 item 6) and for storage identities:
//
//   - AppendEntries (heartbeats included) and InstallSnapshot to a member the
//     decision meta.Holds.Observe holds wait, sending nothing, until its
//     standing (read every Recheck on the clock) releases it or Stop is
//     called (ErrHoldStopped). A hold logs one warning and sets
//     BelowFloor()[member]; a release logs once and clears it. Waiting rather
//     than failing keeps raft's replication backoff (up to ~10 s) from
//     delaying the release.
//   - Every answer's RPC header must carry the server id the RPC was sent to;
//     another id is an *IdentityError (the answer is dropped), so a member that
//     lost its disk cannot vote, or count towards a commit, as the server it
//     was.
//   - AppendEntriesPipeline is not supported (raft then replicates with
//     AppendEntries, each checked).
//
// The zero value is not usable: NewHoldTransport.
type HoldTransport struct {
	raft.Transport
	clk     clock.Clock
	recheck time.Duration
	log     hclog.Logger

	mu       sync.Mutex
	holds    meta.Holds
	gauge    map[raft.ServerID]bool
	standing func(raft.ServerID) Standing
	stop     chan struct{}
	stopOnce sync.Once
	warned   map[raft.ServerID]raft.ServerID // the last answer of a server id came from another
}

// NewHoldTransport wraps inner; clk (nil = clock.Real()) times the rechecks
// every recheck (≤ 0 = DefaultHoldRecheck); log receives the warnings (nil
// = discard). Until SetStanding is called no member is held.
func NewHoldTransport(inner raft.Transport, clk clock.Clock, recheck time.Duration, log hclog.Logger) *HoldTransport {
	if clk == nil {
		clk = clock.Real()
	}
	if recheck <= 0 {
		recheck = DefaultHoldRecheck
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &HoldTransport{Transport: inner, clk: clk, recheck: recheck, log: log, gauge: map[raft.ServerID]bool{},
		stop: make(chan struct{}), warned: map[raft.ServerID]raft.ServerID{}}
}

// SetStanding installs the source of each member's standing (the node's
// state machine and configuration).
func (h *HoldTransport) SetStanding(f func(raft.ServerID) Standing) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.standing = f
}

// BelowFloor gives felix_meta_raft_member_below_floor{member}: every member
// held at some time, true while it is held.
func (h *HoldTransport) BelowFloor() map[raft.ServerID]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[raft.ServerID]bool, len(h.gauge))
	for k, v := range h.gauge {
		out[k] = v
	}
	return out
}

// AnsweredAs gives, per server id whose last answer came from another
// server id, that id (a member that lost its disk and came back under a new
// storage identity: replace it).
func (h *HoldTransport) AnsweredAs() map[raft.ServerID]raft.ServerID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[raft.ServerID]raft.ServerID, len(h.warned))
	for k, v := range h.warned {
		out[k] = v
	}
	return out
}

// Held reports whether member is held now.
func (h *HoldTransport) Held(member raft.ServerID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.gauge[member]
}

// decide applies the hold decision for id and reports whether it is held.
func (h *HoldTransport) decide(id raft.ServerID) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.standing == nil {
		return false
	}
	st := h.standing(id)
	ev := st.Evidence
	if !st.Voter {
		ev = meta.Evidence{} // no longer in the configuration: raft stops sending
	}
	switch h.holds.Observe(string(id), st.Floor, ev) {
	case meta.HoldStart:
		h.gauge[id] = true
		h.log.Warn("holding a control-plane member below the group's metadata level: no entries, no snapshot until it reports the group's level",
			"member", string(id), "level", ev.Level, "floor", st.Floor, "metric", "felix_meta_raft_member_below_floor")
		return true
	case meta.HoldKeep:
		return true
	case meta.HoldRelease:
		h.gauge[id] = false
		h.log.Info("released a held control-plane member: replication resumes", "member", string(id), "level", ev.Level,
			"floor", st.Floor)
	}
	return false
}

// waitReleased returns once id is not held (at once when it is not), or
// ErrHoldStopped when the transport stops first.
func (h *HoldTransport) waitReleased(id raft.ServerID) error {
	for h.decide(id) {
		t := h.clk.NewTimer(h.recheck)
		select {
		case <-t.C():
		case <-h.stop:
			t.Stop()
			return ErrHoldStopped
		}
	}
	return nil
}

// identity checks that an answer came from the server asked.
func (h *HoldTransport) identity(id raft.ServerID, target raft.ServerAddress, hdr raft.RPCHeader) error {
	got := raft.ServerID(hdr.ID)
	if len(hdr.ID) == 0 || got == id {
		h.mu.Lock()
		delete(h.warned, id)
		h.mu.Unlock()
		return nil
	}
	h.mu.Lock()
	first := h.warned[id] != got
	h.warned[id] = got
	h.mu.Unlock()
	err := &IdentityError{Want: id, Got: got, Address: target}
	if first {
		h.log.Warn("a member answered under a new storage identity; its answers are refused", "err", err.Error())
	}
	return err
}

// checked runs call (one RPC to id at target) and then checks that the
// answer's header, *hdr, names id.
func (h *HoldTransport) checked(id raft.ServerID, target raft.ServerAddress, hdr *raft.RPCHeader, call func() error) error {
	if err := call(); err != nil {
		return err
	}
	return h.identity(id, target, *hdr)
}

// AppendEntries waits while id is held, sends, and checks the answer's
// identity.
func (h *HoldTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	if err := h.waitReleased(id); err != nil {
		return err
	}
	return h.checked(id, target, &resp.RPCHeader, func() error { return h.Transport.AppendEntries(id, target, args, resp) })
}

// InstallSnapshot waits while id is held, sends, and checks the answer's
// identity.
func (h *HoldTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := h.waitReleased(id); err != nil {
		return err
	}
	return h.checked(id, target, &resp.RPCHeader, func() error { return h.Transport.InstallSnapshot(id, target, args, resp, data) })
}

// RequestVote sends and checks the answer's identity (a vote from a new
// storage identity is not the old server's vote).
func (h *HoldTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest,
	resp *raft.RequestVoteResponse) error {
	return h.checked(id, target, &resp.RPCHeader, func() error { return h.Transport.RequestVote(id, target, args, resp) })
}

// RequestPreVote is RequestVote's pre-vote (raft.WithPreVote; an error when
// the wrapped transport has none).
func (h *HoldTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest,
	resp *raft.RequestPreVoteResponse) error {
	pv, ok := h.Transport.(raft.WithPreVote)
	if !ok {
		return errors.New("raftnode: the wrapped transport has no pre-vote")
	}
	return h.checked(id, target, &resp.RPCHeader, func() error { return pv.RequestPreVote(id, target, args, resp) })
}

// TimeoutNow sends and checks the answer's identity.
func (h *HoldTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest,
	resp *raft.TimeoutNowResponse) error {
	return h.checked(id, target, &resp.RPCHeader, func() error { return h.Transport.TimeoutNow(id, target, args, resp) })
}

// AppendEntriesPipeline is not supported: raft falls back to AppendEntries,
// whose answers are checked one by one.
func (h *HoldTransport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// Stop ends every held wait (ErrHoldStopped) and every later one; the node
// calls it before shutting raft down, which waits for its senders.
func (h *HoldTransport) Stop() {
	h.stopOnce.Do(func() { close(h.stop) })
}

// Close stops the holds and closes the wrapped transport when it can be
// (raft.WithClose; raft calls it at shutdown).
func (h *HoldTransport) Close() error {
	h.Stop()
	if c, ok := h.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

var (
	_ raft.Transport   = (*HoldTransport)(nil)
	_ raft.WithPreVote = (*HoldTransport)(nil)
	_ raft.WithClose   = (*HoldTransport)(nil)
)

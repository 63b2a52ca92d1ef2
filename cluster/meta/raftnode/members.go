package raftnode

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
)

// ErrNotMember is the error of a membership operation naming a server id
// that is not in the configuration (HTTPStatus 404).
var ErrNotMember = errors.New("raftnode: no such member in the configuration")

// MemberError wraps ErrNotMember and a bad add with the member and status.
type MemberError struct {
	Member  raft.ServerID
	Status  int
	Message string
}

// Error gives the message.
func (e *MemberError) Error() string { return e.Message }

// HTTPStatus gives the status (meta.StatusOf reads it).
func (e *MemberError) HTTPStatus() int { return e.Status }

// Unwrap gives ErrNotMember for a 404.
func (e *MemberError) Unwrap() error {
	if e.Status == 404 {
		return ErrNotMember
	}
	return nil
}

// Level gives the metadata level this member reports (Config.Level, else
// meta.BuildMaxLevel).
func (n *Node) Level() meta.Level { return n.level }

// standing is the hold transport's source: the floor, the member's reported
// level under its server id, and whether it is still a voter.
func (n *Node) standing(id raft.ServerID) Standing {
	st := n.FSM.State()
	out := Standing{Floor: st.Floor()}
	for _, m := range st.Members() {
		if m.ID == string(id) {
			out.Evidence = meta.Evidence{Level: m.Level, Reported: true}
		}
	}
	n.mu.Lock()
	r := n.Raft
	n.mu.Unlock()
	if r == nil {
		return out
	}
	for _, s := range r.GetConfiguration().Configuration().Servers {
		if s.ID == id && s.Suffrage == raft.Voter {
			out.Voter = true
		}
	}
	return out
}

// server gives the configuration's entry for id.
func (n *Node) server(id raft.ServerID) (raft.Server, bool, error) {
	f := n.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, err
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == id {
			return s, true, nil
		}
	}
	return raft.Server{}, false, nil
}

// AddMember adds the server id at the Raft address addr as a voter, on the
// leader, after meta.CheckAddMember with the level the candidate answered
// (reported false: it answered none): a build below the group's floor is
// refused with a *meta.MemberLevelError naming both levels (409). The level is
// recorded first (member_level_report under id), so writes needing it are
// not refused for an unreported voter, and the new member is not held. An id
// already a voter at addr is a no-op; id at another address, or addr held
// by another server id, is a 409 (remove a wiped member's old id first). Errors:
// raft.ErrNotLeader on a follower, raft's errors.
func (n *Node) AddMember(id raft.ServerID, addr raft.ServerAddress, level meta.Level, reported bool, timeout time.Duration) error {
	if n.Raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	if id == "" || addr == "" {
		return &MemberError{Member: id, Status: 400, Message: "raftnode: a member needs a server id and a Raft address"}
	}
	if done, err := n.addable(id, addr); done || err != nil {
		return err
	}
	if err := meta.CheckAddMember(n.FSM.State().Floor(), string(id), level, reported); err != nil {
		return err
	}
	if reported {
		res, err := n.Propose(&meta.MemberLevelReport{MemberID: string(id), Level: level}, timeout)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return err
		}
	}
	return n.Raft.AddVoter(id, addr, 0, timeout).Error()
}

// addable checks the configuration before an add: done for id already a
// voter at addr; a 409 for id at another address, or addr held by another
// server (a wiped member's old id: remove it first, raft refuses two servers
// at one address).
func (n *Node) addable(id raft.ServerID, addr raft.ServerAddress) (done bool, err error) {
	f := n.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	for _, s := range f.Configuration().Servers {
		switch {
		case s.ID == id && s.Address == addr && s.Suffrage == raft.Voter:
			return true, nil
		case s.ID == id:
			return false, &MemberError{Member: id, Status: 409, Message: fmt.Sprintf("raftnode: member %s is already in the configuration at %s", id, s.Address)}
		case s.Address == addr:
			return false, &MemberError{Member: id, Status: 409, Message: fmt.Sprintf(
				"raftnode: %s is held by member %s (a lost disk's old identity?): remove it first", addr, s.ID)}
		}
	}
	return false, nil
}

// RemoveMember removes the server id from the configuration, on the leader
// (removing the leader itself hands leadership over as raft does). Errors:
// raft.ErrNotLeader, a *MemberError (404) for an id not in the
// configuration, raft's errors.
func (n *Node) RemoveMember(id raft.ServerID, timeout time.Duration) error {
	if n.Raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	if _, ok, err := n.server(id); err != nil {
		return err
	} else if !ok {
		return &MemberError{Member: id, Status: 404, Message: fmt.Sprintf("raftnode: %s is not a member", id)}
	}
	return n.Raft.RemoveServer(id, 0, timeout).Error()
}

// TransferLeadership hands leadership to the voter id
// (raft.LeadershipTransferToServer), on the leader; id = this member is a
// no-op. Errors: raft.ErrNotLeader, a *MemberError (404) for an id that is
// not a voter, raft's errors (the transfer timing out after an election
// timeout).
func (n *Node) TransferLeadership(id raft.ServerID) error {
	if n.Raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	if id == n.ID {
		return nil
	}
	s, ok, err := n.server(id)
	if err != nil {
		return err
	}
	if !ok || s.Suffrage != raft.Voter {
		return &MemberError{Member: id, Status: 404, Message: fmt.Sprintf("raftnode: %s is not a voter", id)}
	}
	return n.Raft.LeadershipTransferToServer(id, s.Address).Error()
}

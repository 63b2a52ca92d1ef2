package meta

import (
	"slices"
	"strconv"
)

// GroupLevel gives, over the voters (the Raft configuration's member ids),
// the lowest metadata level reported and the member at it (BuildMaxLevel and
// "" when none reported: a state machine on its own), and the voters that
// have reported no level yet, sorted.
func GroupLevel(s *State, voters []string) (level Level, lowest string, unreported []string) {
	level = BuildMaxLevel
	for _, v := range slices.Sorted(slices.Values(voters)) {
		m, ok := s.members.get(v)
		switch {
		case !ok:
			unreported = append(unreported, v)
		case m.Level < level:
			level, lowest = m.Level, v
		}
	}
	return level, lowest, unreported
}

// CheckWriteLevel refuses a write needing level needed until every voter
// reports at least it (seed: "until every member is there the finalize, and
// any request for a jump_hash stream, is refused with 409"). A write at
// LevelBase is never refused: every build reads it. Errors: *LevelError
// naming the write, both levels and the member (a voter that reported none
// first).
func CheckWriteLevel(s *State, voters []string, what string, needed Level) error {
	if needed <= LevelBase {
		return nil
	}
	level, lowest, unreported := GroupLevel(s, voters)
	if len(unreported) > 0 {
		return &LevelError{What: what, Needed: needed, Member: unreported[0], Unreported: true}
	}
	if level < needed {
		return &LevelError{What: what, Needed: needed, Member: lowest, Reported: level}
	}
	return nil
}

// MemberLevelError refuses adding a member whose build is below the group's
// floor, or that reports no level (seed: "refuses a lower build, or one that
// does not report a version, with an error naming both versions";
// HTTPStatus 409).
type MemberLevelError struct {
	Member     string
	Level      Level
	Floor      Level
	Unreported bool
}

// Error names both levels.
func (e *MemberLevelError) Error() string {
	if e.Unreported {
		return "member " + e.Member + " reports no metadata level; the group is at metadata level " + strconv.Itoa(int(e.Floor)) +
			": add a member on a build at or above it"
	}
	return "member " + e.Member + " runs metadata level " + strconv.Itoa(int(e.Level)) + ", below the group's metadata level " +
		strconv.Itoa(int(e.Floor)) + ": add a member on a build at or above it"
}

// HTTPStatus is 409.
func (e *MemberLevelError) HTTPStatus() int { return statusConflict }

// CheckAddMember is the leader's decision before a membership change (seed:
// "a member is added to the group only if it runs a build at or above the
// metadata version the group already uses"): level is what the candidate
// reported (reported false: it did not answer with one). Below the floor,
// or unreported while the floor is above LevelBase, it is refused with a
// *MemberLevelError; while the floor is at LevelBase an older build may
// join, as part-way through a rolling upgrade.
func CheckAddMember(floor Level, member string, level Level, reported bool) error {
	if floor <= LevelBase {
		return nil
	}
	if !reported {
		return &MemberLevelError{Member: member, Floor: floor, Unreported: true}
	}
	if level < floor {
		return &MemberLevelError{Member: member, Level: level, Floor: floor}
	}
	return nil
}

// HoldAction is a Holds decision for one member.
type HoldAction int

// The decisions.
const (
	// HoldNone: feed the member as usual.
	HoldNone HoldAction = iota
	// HoldStart: hold it from now (send no entries, no snapshot); log the
	// warning and set felix_meta_raft_member_below_floor{member} to 1.
	HoldStart
	// HoldKeep: it stays held (no second warning).
	HoldKeep
	// HoldRelease: release it (gauge to 0); replication resumes.
	HoldRelease
)

// String gives the decision's name.
func (a HoldAction) String() string {
	if a < HoldNone || a > HoldRelease {
		return "HoldAction(" + strconv.Itoa(int(a)) + ")"
	}
	return [...]string{"none", "hold", "keep", "release"}[a]
}

// Holds tracks the members the leader holds rather than feeds (seed: "A
// member already in the group that comes back on an older build … is held
// rather than fed"). Pure: the transport wrapper calls Observe with each
// member's evidence and acts on the decision. The zero value is ready.
type Holds struct {
	held map[string]bool
}

// Evidence is what the leader knows of a member: the level it last reported
// (Reported false: none since it lost its log), and whether it lost the log
// it had acknowledged.
type Evidence struct {
	Level    Level
	Reported bool
	LostLog  bool
}

// Observe decides for member given the group's floor: held only on evidence
// (it reported a level below the floor, or it lost the log it had
// acknowledged and has not reported a level since); released once it
// reports a level at or above the floor.
func (h *Holds) Observe(member string, floor Level, ev Evidence) HoldAction {
	below := (ev.Reported && ev.Level < floor) || (!ev.Reported && ev.LostLog)
	was := h.held[member]
	switch {
	case below && was:
		return HoldKeep
	case below:
		if h.held == nil {
			h.held = map[string]bool{}
		}
		h.held[member] = true
		return HoldStart
	case was:
		delete(h.held, member)
		return HoldRelease
	}
	return HoldNone
}

// Held reports whether member is held: the value of
// felix_meta_raft_member_below_floor{member}.
func (h *Holds) Held(member string) bool { return h.held[member] }

// HeldMembers gives the held members, sorted.
func (h *Holds) HeldMembers() []string {
	return slices.Sorted(mapKeys(h.held))
}

package placement

import (
	"fmt"
	"slices"
	"time"
)

// decideRefusal: the promoted leader found a fenced replica ahead of itself and did not
// open; the replica it names, the furthest ahead of a majority, is promoted instead.
func decideRefusal(sh *Shard, members map[string]Replica, gen uint64) (Decision, error) {
	r := sh.Refusal
	ahead, ok := members[r.Ahead]
	switch {
	case !ok || r.Ahead == r.By:
		return Decision{}, badInput("refusal by %s names %q ahead: not another member of the replica set", r.By, r.Ahead)
	case ahead.Liveness != Live:
		return Decision{Action: Unplaceable, Reason: "the replica ahead may not lead",
			Rejected: []Rejection{{r.Ahead, "it is " + ahead.Liveness.String()}}}, nil
	case ahead.Restarted:
		return Decision{Action: Unplaceable, Reason: "the replica ahead may not lead",
			Rejected: []Rejection{{r.Ahead, "restarted under a new storage id"}}}, nil
	}
	return assign(sh, r.Ahead, gen, fmt.Sprintf("%s refused to open: %s is ahead at %v", r.By, r.Ahead, r.AheadAt), nil), nil
}

// decideRestarted: the run-state rule. A leader that crashed under periodic/none came back
// under a new storage id and gave the shard up: it is named again only when every follower
// holds less than it kept (and it is live, not draining); else a caught-up follower is
// promoted.
func decideRestarted(sh *Shard, members map[string]Replica, now int64, gen uint64, cfg Config) Decision {
	kept := members[sh.Leader].Kept
	less := len(sh.Followers) > 0 && members[sh.Leader].Liveness == Live
	for _, id := range sh.Followers {
		e, found := entryOf(sh, id)
		if !found || believed(e, members[id], sh, now, cfg, true) != "" || e.Durable >= kept {
			less = false
		}
	}
	if less {
		return assign(sh, sh.Leader, gen, fmt.Sprintf("every follower holds less than the %d it kept", kept), nil)
	}
	return chooseFollower(sh, members, now, gen, cfg)
}

// chooseFollower promotes the caught-up follower furthest ahead: one whose believed report
// entry holds at least the report's quorum mark.
func chooseFollower(sh *Shard, members map[string]Replica, now int64, gen uint64, cfg Config) Decision {
	leader := members[sh.Leader]
	dead := leader.Liveness == Down || leader.Restarted
	mark := reportMark(sh)
	var rejected []Rejection
	best, bestAt := "", uint64(0)
	for _, id := range sh.Followers {
		e, found := entryOf(sh, id)
		reason := eligible(members[id], e, found, sh, now, cfg, dead)
		if reason == "" && e.Durable < mark {
			reason = fmt.Sprintf("holds %d, below the quorum mark %d", e.Durable, mark)
		}
		if reason != "" {
			rejected = append(rejected, Rejection{id, reason})
			continue
		}
		if best == "" || e.Durable > bestAt || (e.Durable == bestAt && id < best) {
			if best != "" && cfg.without.furthestAhead {
				continue
			}
			best, bestAt = id, e.Durable
		}
	}
	if best == "" {
		return Decision{Action: Unplaceable, Reason: "no follower may lead", Rejected: rejected}
	}
	return assign(sh, best, gen, fmt.Sprintf("caught up at %d (quorum mark %d)", bestAt, mark), rejected)
}

// eligible returns why replica r (with report entry e, found or not) may not be promoted,
// "" when it may.
func eligible(r Replica, e ReportEntry, found bool, sh *Shard, now int64, cfg Config, dead bool) string {
	switch {
	case r.Liveness != Live:
		return "it is " + r.Liveness.String()
	case r.Restarted:
		return "restarted under a new storage id: it is rebuilt where it follows"
	case !found:
		return "not in the leader's report"
	case e.Corrupt:
		return "its copy is corrupt"
	case e.Halted != "":
		return "halted: " + e.Halted
	case e.RebuildIncarnation < r.RebuildIncarnation && !cfg.without.rebuildIncarnate:
		return fmt.Sprintf("rebuilt since the report (incarnation %d, reported at %d)",
			r.RebuildIncarnation, e.RebuildIncarnation)
	}
	return believed(e, r, sh, now, cfg, dead)
}

// believed returns why report entry e for replica r is not believed, "" when it is: the
// identities must not differ; a report within the window is believed; past it, a dead
// leader's last report only for a follower whose identities match. A follower without an
// identity counts only from a fresh report taken since it last registered (a stamped
// report's incarnation), or, unstamped, by the report's age alone.
func believed(e ReportEntry, r Replica, sh *Shard, now int64, cfg Config, dead bool) string {
	age := time.Duration(now - sh.Report.AtNanos)
	fresh := age <= cfg.ReportWindow
	if e.StorageID != "" && r.StorageID != "" {
		switch {
		case e.StorageID != r.StorageID:
			return fmt.Sprintf("storage identities differ (reported %s, registered %s)", e.StorageID, r.StorageID)
		case fresh || dead:
			return ""
		}
		return fmt.Sprintf("the report is %v old and the leader is not dead", age)
	}
	switch {
	case !fresh:
		return fmt.Sprintf("no verified storage identity, and the report is %v old", age)
	case sh.Report.Stamped && e.Incarnation != r.Incarnation:
		return fmt.Sprintf("no verified storage identity, and the report predates its registration "+
			"(stamped %d, registered %d)", e.Incarnation, r.Incarnation)
	}
	return ""
}

// entryOf finds id's entry in the shard's report.
func entryOf(sh *Shard, id string) (ReportEntry, bool) {
	if !sh.HasReport {
		return ReportEntry{}, false
	}
	for _, e := range sh.Report.Entries {
		if e.NodeID == id {
			return e, true
		}
	}
	return ReportEntry{}, false
}

// reportMark is the quorum mark the report shows: the offset a majority of the replica
// set held (a member the report does not name counts at 0).
func reportMark(sh *Shard) uint64 {
	set := append([]string{sh.Leader}, sh.Followers...)
	held := make([]uint64, 0, len(set))
	for _, id := range set {
		e, _ := entryOf(sh, id)
		held = append(held, e.Durable)
	}
	slices.Sort(held)
	return held[len(held)-(len(held)/2+1)]
}

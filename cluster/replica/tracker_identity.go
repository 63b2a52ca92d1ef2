package replica

// Attribution of acknowledgements to a storage identity (issue 20, known gap 4: the seed's
// #1281 window; seeds/upgrades-and-compatibility.txt, "Storage identities during a roll";
// docs/replication.md, "Attribution"). A follower's acknowledged offset counts only under
// the storage identity it was acknowledged under: the identity its connection named at the
// handshake (transport.Pending.PeerStorageID). A follower that restarted under a new
// identity (a wiped data dir, or an unclean stop under periodic/none) may hold less than it
// acknowledged before, so its standing starts again from nothing.

// Attribute records that member's acknowledgements from now on are counted under storage
// identity id (its hex form; "" for unknown: a peer predating StorageHello). The first
// attribution of a member records id. An attribution to another identity than the
// recorded one resets the member's standing: its acknowledged offset is 0 again, so it
// counts toward the quorum mark only with what it acknowledges under the new identity
// (the mark itself never moves backwards: what was released stays released), and reset is
// true; the caller fences the follower again. The leader and non-members change nothing.
func (t *Tracker) Attribute(member, id string) (reset bool) {
	if _, ok := t.held[member]; !ok || member == t.cfg.Leader {
		return false
	}
	if t.ids == nil {
		t.ids = map[string]string{}
	}
	old, attributed := t.ids[member]
	t.ids[member] = id
	if !attributed || old == id {
		return false
	}
	t.held[member] = 0
	return true
}

// Identity returns the storage identity member's acknowledgements are counted under ("" for
// unknown) and whether it was attributed at all; the leader's replica report names it for
// each follower.
func (t *Tracker) Identity(member string) (id string, attributed bool) {
	id, attributed = t.ids[member]
	return id, attributed
}

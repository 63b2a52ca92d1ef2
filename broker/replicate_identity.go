package broker

// Attribution of every follower acknowledgement to a storage identity (issue 20, known gap
// 4: the seed's #1281 window; docs/replication.md, "Attribution"): a follower's answers count
// only under the storage identity its connection named at the handshake
// (transport.Pending.PeerStorageID). The fence's answer sets the identity a shipper counts
// under; an answer carried by a connection naming another one (the follower restarted under
// a new storage id: a wiped data dir, or an unclean stop under periodic/none) is not fed to
// the shipper, resets the follower's standing in the quorum tracker
// (replica.Tracker.Attribute) and makes the shipper fence it again and start over, with one
// WARN per change.

import (
	"felix/cluster/transport"
)

// attribute records, at a FenceOk, the identity the follower's acknowledgements are counted
// under from now on (resetting its standing when the tracker knew another one).
func (f *follower) attribute(id transport.StorageID) {
	l := f.l
	l.mu.Lock()
	reset := l.tracker.Attribute(f.node, id.String())
	l.mu.Unlock()
	if reset {
		l.srv.log.Warn("replication: follower fenced under a new storage identity; its earlier acknowledgements no longer count",
			"shard", l.ref.String(), "log", l.addr.Log.String(), "follower", f.node, "storage_id", id.String())
	}
	f.storage = id
}

// otherIdentity reports whether an answer carried under id belongs to another storage
// identity than the one the follower is counted under. If so, the follower's standing is
// reset at once (its acknowledged offset no longer counts toward the quorum mark), the
// change is logged at WARN, and the shipper starts over from a fence (refence).
func (f *follower) otherIdentity(id transport.StorageID) bool {
	if id == f.storage {
		return false
	}
	l := f.l
	l.mu.Lock()
	l.tracker.Attribute(f.node, id.String())
	l.mu.Unlock()
	l.srv.log.Warn("replication: follower answered under another storage identity (restarted with a new data dir or after an unclean stop); its acknowledgements no longer count and it is fenced again",
		"shard", l.ref.String(), "log", l.addr.Log.String(), "follower", f.node,
		"counted_under", f.storage.String(), "storage_id", id.String())
	f.storage, f.refence = id, true
	f.queue = nil
	return true
}

// countedUnder is the storage identity (hex, "" unknown) a follower of the shard is counted
// under, as the replica reports name it (leaderAcks reads the same from the tracker;
// seeds/upgrades-and-compatibility.txt: "its replica reports name the identity each
// follower was counted under"); ok=false for one not attributed yet (not fenced at this
// generation). Safe for concurrent use.
func (l *leaderShard) countedUnder(follower string) (id string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tracker.Identity(follower)
}

// shipHeld is the test seam holding a follower's record batches from an offset
// (replication.holdShip); false without it.
func (r *replication) shipHeld(follower string, from uint64) bool {
	if h := r.holdShip.Load(); h != nil {
		return (*h)(follower, from)
	}
	return false
}

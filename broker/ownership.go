package broker

import (
	"slices"
	"sync"
	"sync/atomic"

	"felix/core"
)

// Assignment is who holds one shard, as placement decided it: the node that leads it
// (serves publishes, cache writes, subscriptions and group calls), the followers that
// hold replicas of its logs (the replica set, the leader not included: an empty replica
// set is a single copy, which core releases at the local commit), the shard's generation
// (bumped by every leadership change; the fence of seeds/internal-protocol.txt, "Forwarding
// a publish" and "Errors": NotLeader and StaleRoute carry it) and the incarnation of the
// stream or cache the shard belongs to (core.LogAddr.Incarnation; 0 until
// stream_incarnations / cache_incarnations is finalized, seeds/upgrades-and-compatibility.txt).
// Node ids are FELIX_NODE_ID values (DNS names).
type Assignment struct {
	Leader      string
	ReplicaSet  []string
	Generation  uint64
	Incarnation uint64
}

// Role is n's role in a: core.RoleLeader when n leads the shard, core.RoleFollower
// when n is in the replica set, and ok=false when n holds no copy.
func (a Assignment) Role(n string) (role core.Role, ok bool) {
	if a.Leader == n {
		return core.RoleLeader, true
	}
	if slices.Contains(a.ReplicaSet, n) {
		return core.RoleFollower, true
	}
	return 0, false
}

// equal reports whether a and b assign the same nodes at the same generation and
// incarnation.
func (a Assignment) equal(b Assignment) bool {
	return a.Leader == b.Leader && a.Generation == b.Generation && a.Incarnation == b.Incarnation &&
		slices.Equal(a.ReplicaSet, b.ReplicaSet)
}

// Ownership is one complete snapshot of the ownership table: shard → Assignment. A
// shard absent from it is held by no node as far as this broker knows (the reconciler
// closes it here; forwarding answers it as unavailable). Treat a snapshot handed out by
// OwnershipTable as read-only; build a new one to change it.
type Ownership map[core.ShardRef]Assignment

// equal reports whether o and p hold the same shards with the same assignments.
func (o Ownership) equal(p Ownership) bool {
	if len(o) != len(p) {
		return false
	}
	for ref, a := range o {
		if b, ok := p[ref]; !ok || !a.equal(b) {
			return false
		}
	}
	return true
}

// OwnershipTable is the broker's view of who holds each shard: read per request by the
// session handlers (and, with issue 19, by forwarding: serve when this node leads the
// shard, forward or redirect to Assignment.Leader otherwise) and by the reconciler,
// which opens here exactly the shards this node leads or follows. Reads are one atomic
// load of an immutable snapshot; Replace installs a new snapshot whole and then calls
// the watchers. A single node fills it with SingleNode on every catalog change; the
// cluster (issue 17) fills it from placement. Safe for concurrent use.
type OwnershipTable struct {
	cur     atomic.Pointer[ownershipState]
	watches watchList
}

type ownershipState struct {
	owners  Ownership
	version uint64
}

// NewOwnershipTable returns an empty table (version 0): this node holds nothing until
// the first Replace.
func NewOwnershipTable() *OwnershipTable {
	t := &OwnershipTable{}
	t.cur.Store(&ownershipState{owners: Ownership{}})
	return t
}

// Lookup returns the assignment of ref; ok=false when the table does not name it.
func (t *OwnershipTable) Lookup(ref core.ShardRef) (Assignment, bool) {
	a, ok := t.cur.Load().owners[ref]
	return a, ok
}

// Snapshot returns the current table (read-only) and its version.
func (t *OwnershipTable) Snapshot() (Ownership, uint64) {
	s := t.cur.Load()
	return s.owners, s.version
}

// Version counts the Replace calls that changed the table.
func (t *OwnershipTable) Version() uint64 { return t.cur.Load().version }

// Replace installs owners as the whole table (the caller gives it up: it must not modify
// it afterwards) and calls every watcher. A snapshot equal to the current one changes
// nothing and calls nobody, so a filler may replace on every catalog change without
// waking the reconciler for nothing. Reports whether the table changed.
func (t *OwnershipTable) Replace(owners Ownership) bool {
	if owners == nil {
		owners = Ownership{}
	}
	for {
		old := t.cur.Load()
		if old.owners.equal(owners) {
			return false
		}
		if t.cur.CompareAndSwap(old, &ownershipState{owners: owners, version: old.version + 1}) {
			break
		}
	}
	t.watches.notify()
	return true
}

// Watch registers fn to run after every change Replace installs, on the goroutine that
// called Replace: fn must not block (the reconciler's only kicks a channel). stop
// unregisters it.
func (t *OwnershipTable) Watch(fn func()) (stop func()) { return t.watches.add(fn) }

// SingleNode is the ownership of a single node: node leads every shard of every stream
// and cache in view at generation 0 and incarnation 0, with an empty replica set.
func SingleNode(node string, view CatalogView) Ownership {
	out := Ownership{}
	lead := Assignment{Leader: node}
	for _, st := range view.Streams("", "") {
		for i := 0; i < int(st.Shards); i++ {
			out[core.ShardRef{Kind: core.ShardStream, Name: streamName(st.TenantID, st.Namespace, st.Stream), Shard: i}] = lead
		}
	}
	for _, c := range view.Caches("", "") {
		for i := 0; i < int(c.Shards); i++ {
			out[cacheRef(c, i)] = lead
		}
	}
	return out
}

// cacheRef is the ShardRef of shard i of cache c (core.ShardRef carries a cache's names in
// its StreamName fields).
func cacheRef(c Cache, i int) core.ShardRef {
	return core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: c.TenantID, Namespace: c.Namespace, Stream: c.Cache}, Shard: i}
}

// watchList is a set of change callbacks (the catalog's and the ownership table's
// watchers).
type watchList struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

func (w *watchList) add(fn func()) (stop func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fns == nil {
		w.fns = map[int]func(){}
	}
	id := w.next
	w.next++
	w.fns[id] = fn
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.fns, id)
	}
}

func (w *watchList) notify() {
	w.mu.Lock()
	fns := make([]func(), 0, len(w.fns))
	for _, fn := range w.fns {
		fns = append(fns, fn)
	}
	w.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

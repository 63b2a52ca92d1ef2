package core

// The per-shard engine API (docs/architecture.md, "Shards, roles and
// generations"; issue 14): OpenShard, SetRole and CloseShard open, move and
// close one shard of a stream or a cache, with all of its logs, on the core
// that owns it; Shards lists what is open. CreateStream and CreateCache are
// "register, then open every shard as leader at generation 0", which is what
// a single node does. The stream and cache halves are in
// shardapi_stream.go and shardapi_cache.go; what a core keeps per shard
// (role, generation, the refusals, ending what a move ends) is in
// shardapi_state.go.

import (
	"fmt"
	"sort"
)

// Role is what this engine does with one shard it holds open: lead it
// (serve clients) or follow it (hold its logs for replication to apply the
// leader's records; seeds/internal-protocol.txt). The zero value is invalid.
type Role uint8

// Roles.
const (
	// RoleLeader serves the shard's publishes, subscriptions, cache
	// operations, watches and group operations.
	RoleLeader Role = 1
	// RoleFollower keeps the shard open (logs recovered) but refuses every
	// client operation with ErrNotHere.
	RoleFollower Role = 2
)

// String returns "leader", "follower" or "Role(n)".
func (r Role) String() string {
	switch r {
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

func (r Role) valid() bool { return r == RoleLeader || r == RoleFollower }

// ShardSpec is the stream or the cache a shard belongs to, for OpenShard:
// exactly one of the two is set.
type ShardSpec struct {
	Stream *StreamSpec
	Cache  *CacheSpec
}

// Ref returns the reference of shard shard of the spec's stream or cache.
// Errors: ErrInvalid unless exactly one of Stream and Cache is set.
func (s ShardSpec) Ref(shard int) (ShardRef, error) {
	switch {
	case s.Stream != nil && s.Cache == nil:
		return ShardRef{Kind: ShardStream, Name: s.Stream.Name, Shard: shard}, nil
	case s.Cache != nil && s.Stream == nil:
		return ShardRef{Kind: ShardCache, Name: s.Cache.Name.asStream(), Shard: shard}, nil
	}
	return ShardRef{}, fmt.Errorf("%w: a shard spec sets exactly one of Stream and Cache", ErrInvalid)
}

// ShardState is one shard open on this engine: which shard, its role and
// the generation it is open at.
type ShardState struct {
	Ref        ShardRef
	Role       Role
	Generation uint64
}

// shardPlace is the engine's snapshot of one shard on this engine: its role
// (0: not open here) and generation. The core's placement is authoritative;
// the snapshot changes only under Engine.catalogMu, after the core did.
type shardPlace struct {
	role       Role
	generation uint64
}

// OpenShard opens shard shard of spec's stream or cache on the core that
// owns it, as role at generation, with all of its logs recovered from disk:
// records and producers (and, durable, the group cursors and dead letters)
// of a stream shard; cache and counters of a cache shard. The spec is
// registered in the engine's catalog when absent (ListStreams, ListCaches
// show it; its other shards stay not open here: ErrNotHere). Opening a shard
// already open at the same role and generation is a no-op; at another role
// or generation it is SetRole.
//
// Errors: ErrInvalid (bad spec, not exactly one of Stream and Cache, shard
// out of range, invalid role), ErrExists (another spec under that name),
// ErrNoDurableStorage, ErrStaleGeneration-wrapped (generation below the
// shard's), ErrStorageFailed-wrapped open or replay errors, ErrOverloaded,
// ErrClosed. A failed open leaves the shard not open (and a spec it
// registered unregistered).
func (e *Engine) OpenShard(spec ShardSpec, shard int, role Role, generation uint64) error {
	if !role.valid() {
		return fmt.Errorf("%w: open with role %v", ErrInvalid, role)
	}
	if _, err := spec.Ref(shard); err != nil {
		return err
	}
	if e.closed.Load() {
		return ErrClosed
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	if spec.Stream != nil {
		return e.openStreamShards(*spec.Stream, []int{shard}, role, generation)
	}
	return e.openCacheShards(*spec.Cache, []int{shard}, role, generation)
}

// SetRole moves an open shard to role at generation. When the role or the
// generation changes, every live subscription, cache watch and parked group
// poll of the shard ends with ErrMoved; publishes and cache operations
// already applied complete (or fail) as usual; a shard that stops leading
// fails the publishes it holds behind a Block subscriber with ErrNotHere and
// refuses new client operations with ErrNotHere. Same role and generation:
// no-op. The change travels to the shard's core through its inbox and is in
// force there when SetRole returns.
//
// Errors: ErrNotFound (no such stream or cache), ErrInvalid (unknown kind,
// shard out of range, invalid role), ErrNotHere (the shard is not open
// here), ErrStaleGeneration-wrapped, ErrOverloaded, ErrClosed.
func (e *Engine) SetRole(ref ShardRef, role Role, generation uint64) error {
	if !role.valid() {
		return fmt.Errorf("%w: %v to role %v", ErrInvalid, ref, role)
	}
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	switch ref.Kind {
	case ShardStream:
		return e.setStreamRole(ref, role, generation)
	case ShardCache:
		return e.setCacheRole(ref, role, generation)
	}
	return fmt.Errorf("%w: shard kind %v", ErrInvalid, ref.Kind)
}

// CloseShard closes an open shard on its core: new calls get ErrNotHere at
// once; every live subscription, cache watch and parked group poll ends with
// ErrMoved; it waits for the appends in flight, then closes every log of the
// shard, keeping them on disk (OpenShard recovers them; DeleteStream and
// DeleteCache remove them). Publishes and cache operations still waiting
// for their commit then fail with ErrMoved. The spec stays in the catalog.
//
// Errors: ErrNotFound (no such stream or cache), ErrInvalid (unknown kind,
// shard out of range), ErrNotHere (not open here), ErrOverloaded,
// ErrClosed, or a close error of its logs.
func (e *Engine) CloseShard(ref ShardRef) error {
	e.catalogMu.Lock()
	defer e.catalogMu.Unlock()
	switch ref.Kind {
	case ShardStream:
		return e.closeStreamRef(ref)
	case ShardCache:
		return e.closeCacheRef(ref)
	}
	return fmt.Errorf("%w: shard kind %v", ErrInvalid, ref.Kind)
}

// Shards returns every shard open on this engine with its role and
// generation, sorted by kind (streams first), name (tenant, namespace,
// stream or cache) and shard. It reads the engine's snapshot (the catalog
// entries, which OpenShard, SetRole and CloseShard republish under the
// catalog lock once the core applied the change) without waiting for a
// call in progress: a change shows once its call returned.
func (e *Engine) Shards() []ShardState {
	var out []ShardState
	for name, m := range *e.catalog.Load() {
		out = appendPlaces(out, ShardStream, name, m.places)
	}
	for name, m := range e.caches.load() {
		out = appendPlaces(out, ShardCache, name.asStream(), m.places)
	}
	sort.Slice(out, func(i, j int) bool { return refLess(out[i].Ref, out[j].Ref) })
	return out
}

func appendPlaces(out []ShardState, kind ShardKind, name StreamName, places []shardPlace) []ShardState {
	for i, p := range places {
		if p.role != 0 {
			out = append(out, ShardState{Ref: ShardRef{Kind: kind, Name: name, Shard: i}, Role: p.role, Generation: p.generation})
		}
	}
	return out
}

// refLess orders shard references by kind, tenant, namespace, name, shard.
func refLess(a, b ShardRef) bool {
	switch {
	case a.Kind != b.Kind:
		return a.Kind < b.Kind
	case a.Name.Tenant != b.Name.Tenant:
		return a.Name.Tenant < b.Name.Tenant
	case a.Name.Namespace != b.Name.Namespace:
		return a.Name.Namespace < b.Name.Namespace
	case a.Name.Stream != b.Name.Stream:
		return a.Name.Stream < b.Name.Stream
	}
	return a.Shard < b.Shard
}

// allShards returns 0..n-1: every shard of a stream or cache of n shards.
func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

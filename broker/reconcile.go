package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"felix/core"
)

// shardOpener is the engine's per-shard lifecycle the reconciler drives (issue 14 item 1;
// *core.Engine satisfies it): open one shard (all its logs) in a role at a generation,
// change its role, close it (its logs stay on disk), and list what is open.
type shardOpener interface {
	OpenShard(spec core.ShardSpec, shard int, role core.Role, generation uint64) error
	SetRole(ref core.ShardRef, role core.Role, generation uint64) error
	CloseShard(ref core.ShardRef) error
	Shards() []core.ShardState
}

var _ shardOpener = (*core.Engine)(nil)

// desiredShard is one shard this node should hold: its spec, role and generation.
type desiredShard struct {
	Ref        core.ShardRef
	Spec       core.ShardSpec
	Role       core.Role
	Generation uint64
}

// actionKind is what one reconcile action does to a shard.
type actionKind uint8

// Action kinds, in the order a pass runs them: closes first (they free the core's
// resources), role changes, then opens.
const (
	actClose actionKind = iota + 1
	actSetRole
	actOpen
)

func (k actionKind) String() string {
	switch k {
	case actClose:
		return "close"
	case actSetRole:
		return "set_role"
	case actOpen:
		return "open"
	}
	return fmt.Sprintf("actionKind(%d)", uint8(k))
}

// action is one step of a reconcile pass. Spec is set for actOpen only.
type action struct {
	Kind       actionKind
	Ref        core.ShardRef
	Spec       core.ShardSpec
	Role       core.Role
	Generation uint64
}

// plan is the pure decision of a reconcile pass: the actions that turn actual (the
// engine's open shards) into desired. A shard open but not desired closes; desired but
// not open opens; open in another role or at an older generation gets SetRole. A desired
// generation older than the open one means the table is behind the engine (a stale
// snapshot): the shard is left as it is, never moved back. Actions come closes first,
// then role changes, then opens, each sorted by shard (kind, names, shard number), so
// the result is deterministic.
func plan(desired []desiredShard, actual []core.ShardState) []action {
	want := make(map[core.ShardRef]desiredShard, len(desired))
	for _, d := range desired {
		want[d.Ref] = d
	}
	have := make(map[core.ShardRef]core.ShardState, len(actual))
	var acts []action
	for _, st := range actual {
		have[st.Ref] = st
		if _, ok := want[st.Ref]; !ok {
			acts = append(acts, action{Kind: actClose, Ref: st.Ref})
		}
	}
	for _, d := range want {
		st, open := have[d.Ref]
		switch {
		case !open:
			acts = append(acts, action{Kind: actOpen, Ref: d.Ref, Spec: d.Spec, Role: d.Role, Generation: d.Generation})
		case d.Generation < st.Generation:
		case d.Role != st.Role || d.Generation != st.Generation:
			acts = append(acts, action{Kind: actSetRole, Ref: d.Ref, Role: d.Role, Generation: d.Generation})
		}
	}
	slices.SortFunc(acts, func(a, b action) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), compareRef(a.Ref, b.Ref))
	})
	return acts
}

// compareRef orders shards by kind, tenant, namespace, name, then shard number.
func compareRef(a, b core.ShardRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name.Tenant, b.Name.Tenant),
		cmp.Compare(a.Name.Namespace, b.Name.Namespace), cmp.Compare(a.Name.Stream, b.Name.Stream),
		cmp.Compare(a.Shard, b.Shard))
}

// desiredState is catalog ∩ ownership for node: every shard of every stream and cache
// the catalog lists whose assignment names node, as leader (core.RoleLeader) or in the
// replica set (core.RoleFollower), at the assignment's generation. A shard the table
// does not name, or names for other nodes only, is not desired here.
func desiredState(node string, streams []Stream, caches []Cache, owners Ownership) []desiredShard {
	var out []desiredShard
	add := func(ref core.ShardRef, spec core.ShardSpec) {
		a, ok := owners[ref]
		if !ok {
			return
		}
		if role, ok := a.Role(node); ok {
			out = append(out, desiredShard{Ref: ref, Spec: spec, Role: role, Generation: a.Generation})
		}
	}
	for _, st := range streams {
		spec := streamSpec(st)
		for i := 0; i < spec.Shards; i++ {
			add(core.ShardRef{Kind: core.ShardStream, Name: spec.Name, Shard: i}, core.ShardSpec{Stream: &spec})
		}
	}
	for _, c := range caches {
		spec := cacheSpec(c)
		for i := 0; i < spec.Shards; i++ {
			add(cacheRef(c, i), core.ShardSpec{Cache: &spec})
		}
	}
	return out
}

// streamSpec is the engine's spec of a catalog stream. A durable stream's retention
// becomes RetentionBytes / RetentionAge (the stream's bound wins over
// FELIX_DURABLE_RETENTION_*), consistency Quorum becomes SyncOnCommit and
// core.ConsistencyQuorum (released at commit while there is no replica set); an in-memory
// stream passes none of them (the catalog refuses them on create, docs/operations.md
// "Stream options").
func streamSpec(st Stream) core.StreamSpec {
	routing := core.RoutingModulo
	if st.Routing == "jump_hash" {
		routing = core.RoutingJumpHash
	}
	spec := core.StreamSpec{
		Name:    streamName(st.TenantID, st.Namespace, st.Stream),
		Shards:  int(st.Shards),
		Durable: st.Durable,
		Routing: routing,
	}
	if st.Durable {
		spec.RetentionBytes, spec.RetentionAge = st.Retention.sizeBytes(), st.Retention.age()
		spec.SyncOnCommit = st.Consistency == ConsistencyQuorum
		if st.Consistency == ConsistencyQuorum {
			spec.Consistency = core.ConsistencyQuorum
		}
	}
	return spec
}

// cacheSpec is the engine's spec of a catalog cache (durable unless it says false).
func cacheSpec(c Cache) core.CacheSpec {
	return core.CacheSpec{Name: cacheName(c.TenantID, c.Namespace, c.Cache), Shards: int(c.Shards), Durable: c.Durable == nil || *c.Durable}
}

// Reconciler opens and closes engine shards so that the engine holds exactly
// catalog ∩ ownership for this node (desiredState), in the role and at the generation
// the ownership table gives. A pass reads the catalog, the table and engine.Shards(),
// plans (plan) and runs each action once: it is idempotent, and an action that fails is
// logged and tried again on the next change (no retry loop of its own). Passes run at
// start (Reconcile), then on every catalog or ownership change (Changed, from their
// watchers, served by Run). One pass at a time.
//
// A catalog change that must open or remove shards before it is installed (a stream
// create fails when its shards cannot open; a delete removes the logs) goes through
// OpenAhead / RemoveAhead, which act at once and pin the outcome until the catalog
// reaches the generation that installs the change (and, for an open, until the table
// names the shard: applyPins), so a pass that read the catalog or filled the table just
// before cannot undo it.
type Reconciler struct {
	node    string
	engine  shardOpener
	catalog CatalogView
	owners  *OwnershipTable
	place   func(CatalogView) // fills owners from the catalog (single node); nil in a cluster
	applied func()            // after every pass (ReconcilerConfig.Applied); may be nil
	log     *slog.Logger
	kick    chan struct{}

	mu   sync.Mutex // one pass (or ahead change) at a time; guards pins
	pins map[core.ShardRef]pin
}

// pin holds a shard open (open != nil) or closed until the catalog reaches generation
// until, the one that installs the change that pinned it.
type pin struct {
	until uint64
	open  *desiredShard
}

// ReconcilerConfig is what a Reconciler works from. Place (may be nil) runs before every
// background pass to fill Owners from the catalog: a single node passes one that
// installs SingleNode(Node, catalog); the cluster fills Owners from placement instead.
type ReconcilerConfig struct {
	Node    string
	Engine  shardOpener
	Catalog CatalogView
	Owners  *OwnershipTable
	Place   func(CatalogView)
	Logger  *slog.Logger
	// Applied (may be nil) runs after every pass, on the pass's goroutine, once its actions
	// ran: replication starts and stops a shard's shippers from it (replicate.go). It must
	// not block.
	Applied func()
}

// NewReconciler returns a reconciler; nothing runs until Reconcile or Run.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{node: cfg.Node, engine: cfg.Engine, catalog: cfg.Catalog, owners: cfg.Owners, place: cfg.Place,
		applied: cfg.Applied, log: log, kick: make(chan struct{}, 1), pins: map[core.ShardRef]pin{}}
}

// Changed asks for a pass (goroutine-safe, never blocks; kicks while a pass is pending
// coalesce into one). The catalog's and the table's watchers call it.
func (r *Reconciler) Changed() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Run serves Changed until ctx ends: Place, then one pass per kick. Failures are logged
// (the next change retries them).
func (r *Reconciler) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		}
		if r.place != nil {
			r.place(r.catalog)
		}
		if err := r.Reconcile(); err != nil {
			r.log.Error("reconcile: shards left as they were (retried on the next catalog or ownership change)", "err", err)
		}
	}
}

// Reconcile runs one pass now and returns the failed actions' errors joined (every
// action is tried). Errors: the engine's (core.ErrInvalid, core.ErrNoDurableStorage,
// storage failures, core.ErrClosed), each naming its shard.
func (r *Reconciler) Reconcile() error {
	gen := r.catalog.Generation()
	streams, caches := r.catalog.Streams("", ""), r.catalog.Caches("", "")
	owners, _ := r.owners.Snapshot()
	r.mu.Lock()
	defer r.mu.Unlock()
	desired := r.applyPins(gen, desiredState(r.node, streams, caches, owners), streams, caches, owners)
	var errs []error
	for _, a := range plan(desired, r.engine.Shards()) {
		if err := r.do(a); err != nil {
			errs = append(errs, err)
		}
	}
	if r.applied != nil {
		r.applied()
	}
	return errors.Join(errs...)
}

// applyPins lays the pins over desired for a pass that read catalog generation gen
// (with streams and caches) and the table owners, and drops the pins that pass covers:
// a removal once gen reached the pin's generation; an open once gen reached it and either
// the catalog no longer lists the shard (the create was never installed, or undone since)
// or the table names it (the filler caught up: the table decides from then on). A table
// filled from a catalog read a moment before this pass's therefore cannot close a shard
// just created.
func (r *Reconciler) applyPins(gen uint64, desired []desiredShard, streams []Stream, caches []Cache, owners Ownership) []desiredShard {
	if len(r.pins) == 0 {
		return desired
	}
	listed := catalogRefs(streams, caches)
	for ref, p := range r.pins {
		_, named := owners[ref]
		if gen >= p.until && (p.open == nil || !listed[ref] || named) {
			delete(r.pins, ref)
		}
	}
	desired = slices.DeleteFunc(desired, func(d desiredShard) bool { _, pinned := r.pins[d.Ref]; return pinned })
	for _, p := range r.pins {
		if p.open != nil {
			desired = append(desired, *p.open)
		}
	}
	return desired
}

// catalogRefs is the set of every shard of streams and caches.
func catalogRefs(streams []Stream, caches []Cache) map[core.ShardRef]bool {
	out := map[core.ShardRef]bool{}
	for _, st := range streams {
		for i := 0; i < int(st.Shards); i++ {
			out[core.ShardRef{Kind: core.ShardStream, Name: streamName(st.TenantID, st.Namespace, st.Stream), Shard: i}] = true
		}
	}
	for _, c := range caches {
		for i := 0; i < int(c.Shards); i++ {
			out[cacheRef(c, i)] = true
		}
	}
	return out
}

// do runs one action on the engine; the error names the shard.
func (r *Reconciler) do(a action) error {
	var err error
	switch a.Kind {
	case actOpen:
		err = r.engine.OpenShard(a.Spec, a.Ref.Shard, a.Role, a.Generation)
	case actSetRole:
		err = r.engine.SetRole(a.Ref, a.Role, a.Generation)
	case actClose:
		err = r.engine.CloseShard(a.Ref)
	}
	if err != nil {
		r.log.Warn("reconcile action failed", "action", a.Kind.String(), "shard", a.Ref.String(), "err", err)
		return fmt.Errorf("%s %v: %w", a.Kind, a.Ref, err)
	}
	return nil
}

// OpenAhead opens every shard of spec here as a holds it (role and generation for this
// node) before the catalog installs the change that adds it, as generation until: a
// stream or cache create fails when its shards cannot open. The shards stay pinned open
// until a pass reads generation until. On an error nothing is pinned and the shards this
// call opened are undone: undo runs when set (the server passes the engine's delete when
// the engine did not know the stream or cache before, so a failed create leaves no spec
// registered, as core.Engine.CreateStream did), else they are closed. A holding that names
// another node opens nothing. Errors: OpenShard's, naming the shard.
func (r *Reconciler) OpenAhead(spec core.ShardSpec, a Assignment, until uint64, undo func() error) error {
	refs := specRefs(spec)
	role, mine := a.Role(r.node)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !mine {
		return nil
	}
	open := map[core.ShardRef]bool{}
	for _, st := range r.engine.Shards() {
		open[st.Ref] = true
	}
	var opened []core.ShardRef
	for _, ref := range refs {
		if open[ref] {
			continue
		}
		if err := r.do(action{Kind: actOpen, Ref: ref, Spec: spec, Role: role, Generation: a.Generation}); err != nil {
			if undo != nil {
				if uerr := undo(); uerr != nil {
					r.log.Warn("reconcile: undo of a failed open", "err", uerr)
				}
				return err
			}
			for _, o := range opened {
				_ = r.do(action{Kind: actClose, Ref: o})
			}
			return err
		}
		opened = append(opened, ref)
	}
	for _, ref := range refs {
		r.pins[ref] = pin{until: until, open: &desiredShard{Ref: ref, Spec: spec, Role: role, Generation: a.Generation}}
	}
	return nil
}

// RemoveAhead runs remove (the engine's delete of a stream or cache, which closes its
// shards and deletes their logs) before the catalog installs the change that drops it, as
// generation until, and pins refs closed until a pass reads that generation. Errors:
// remove's (nothing is pinned then).
func (r *Reconciler) RemoveAhead(refs []core.ShardRef, until uint64, remove func() error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := remove(); err != nil {
		return err
	}
	for _, ref := range refs {
		r.pins[ref] = pin{until: until}
	}
	return nil
}

// specRefs lists the shards of spec's stream or cache.
func specRefs(spec core.ShardSpec) []core.ShardRef {
	var out []core.ShardRef
	switch {
	case spec.Stream != nil:
		for i := 0; i < spec.Stream.Shards; i++ {
			out = append(out, core.ShardRef{Kind: core.ShardStream, Name: spec.Stream.Name, Shard: i})
		}
	case spec.Cache != nil:
		n := spec.Cache.Name
		for i := 0; i < spec.Cache.Shards; i++ {
			out = append(out, core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: n.Tenant, Namespace: n.Namespace, Stream: n.Cache}, Shard: i})
		}
	}
	return out
}

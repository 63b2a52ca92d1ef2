package broker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/core"
)

func sref(stream string, shard int) core.ShardRef {
	return core.ShardRef{Kind: core.ShardStream, Name: streamName("t", "ns", stream), Shard: shard}
}

func cref(cache string, shard int) core.ShardRef {
	return cacheRef(Cache{TenantID: "t", Namespace: "ns", Cache: cache}, shard)
}

func TestPlan(t *testing.T) {
	spec := core.ShardSpec{Stream: &core.StreamSpec{Name: streamName("t", "ns", "a"), Shards: 3}}
	lead := func(ref core.ShardRef, gen uint64) desiredShard {
		return desiredShard{Ref: ref, Spec: spec, Role: core.RoleLeader, Generation: gen}
	}
	follow := func(ref core.ShardRef, gen uint64) desiredShard {
		return desiredShard{Ref: ref, Spec: spec, Role: core.RoleFollower, Generation: gen}
	}
	open := func(ref core.ShardRef, role core.Role, gen uint64) core.ShardState {
		return core.ShardState{Ref: ref, Role: role, Generation: gen}
	}
	cases := []struct {
		name    string
		desired []desiredShard
		actual  []core.ShardState
		want    []action
	}{
		{name: "nothing"},
		{name: "all open already", desired: []desiredShard{lead(sref("a", 0), 0)}, actual: []core.ShardState{open(sref("a", 0), core.RoleLeader, 0)}},
		{name: "open missing, sorted by shard",
			desired: []desiredShard{lead(sref("a", 2), 0), lead(sref("a", 0), 0), follow(sref("a", 1), 4)},
			want: []action{{Kind: actOpen, Ref: sref("a", 0), Spec: spec, Role: core.RoleLeader},
				{Kind: actOpen, Ref: sref("a", 1), Spec: spec, Role: core.RoleFollower, Generation: 4},
				{Kind: actOpen, Ref: sref("a", 2), Spec: spec, Role: core.RoleLeader}}},
		{name: "close undesired", actual: []core.ShardState{open(cref("c", 1), core.RoleLeader, 0), open(sref("b", 0), core.RoleFollower, 2)},
			want: []action{{Kind: actClose, Ref: sref("b", 0)}, {Kind: actClose, Ref: cref("c", 1)}}},
		{name: "promote at a newer generation", desired: []desiredShard{lead(sref("a", 0), 3)}, actual: []core.ShardState{open(sref("a", 0), core.RoleFollower, 2)},
			want: []action{{Kind: actSetRole, Ref: sref("a", 0), Role: core.RoleLeader, Generation: 3}}},
		{name: "same role, newer generation", desired: []desiredShard{follow(sref("a", 0), 5)}, actual: []core.ShardState{open(sref("a", 0), core.RoleFollower, 2)},
			want: []action{{Kind: actSetRole, Ref: sref("a", 0), Role: core.RoleFollower, Generation: 5}}},
		{name: "stale table: never moved back", desired: []desiredShard{follow(sref("a", 0), 1)}, actual: []core.ShardState{open(sref("a", 0), core.RoleLeader, 2)}},
		{name: "closes, then role changes, then opens",
			desired: []desiredShard{lead(sref("a", 1), 0), lead(sref("a", 0), 1)},
			actual:  []core.ShardState{open(sref("a", 0), core.RoleFollower, 0), open(sref("z", 0), core.RoleLeader, 0)},
			want: []action{{Kind: actClose, Ref: sref("z", 0)}, {Kind: actSetRole, Ref: sref("a", 0), Role: core.RoleLeader, Generation: 1},
				{Kind: actOpen, Ref: sref("a", 1), Spec: spec, Role: core.RoleLeader}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := plan(tc.desired, tc.actual)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan:\n got %+v\nwant %+v", got, tc.want)
			}
			// Applying the plan and planning again is a no-op (idempotent).
			if again := plan(tc.desired, applyPlan(tc.actual, got)); len(again) != 0 {
				t.Fatalf("second plan not empty: %+v", again)
			}
		})
	}
}

// applyPlan is what the engine holds after acts ran on actual.
func applyPlan(actual []core.ShardState, acts []action) []core.ShardState {
	m := map[core.ShardRef]core.ShardState{}
	for _, st := range actual {
		m[st.Ref] = st
	}
	for _, a := range acts {
		switch a.Kind {
		case actClose:
			delete(m, a.Ref)
		default:
			m[a.Ref] = core.ShardState{Ref: a.Ref, Role: a.Role, Generation: a.Generation}
		}
	}
	var out []core.ShardState
	for _, st := range m {
		out = append(out, st)
	}
	return out
}

func TestDesiredStateIsCatalogIntersectOwnership(t *testing.T) {
	streams := []Stream{{TenantID: "t", Namespace: "ns", Stream: "a", Shards: 3, Durable: true}}
	caches := []Cache{{TenantID: "t", Namespace: "ns", Cache: "c", Shards: 2}}
	owners := Ownership{
		sref("a", 0):        {Leader: "n1", ReplicaSet: []string{"n2"}, Generation: 7},
		sref("a", 1):        {Leader: "n2", ReplicaSet: []string{"n1", "n3"}, Generation: 3},
		sref("a", 2):        {Leader: "n2", ReplicaSet: []string{"n3"}},
		cref("c", 1):        {Leader: "n1", Generation: 1},
		sref("gone", 0):     {Leader: "n1"}, // not in the catalog
		cref("c", 0):        {Leader: "n3"},
		{Kind: 9, Shard: 0}: {Leader: "n1"},
	}
	got := map[core.ShardRef][2]uint64{}
	for _, d := range desiredState("n1", streams, caches, owners) {
		got[d.Ref] = [2]uint64{uint64(d.Role), d.Generation}
		if (d.Ref.Kind == core.ShardStream) != (d.Spec.Stream != nil) || (d.Spec.Stream == nil) == (d.Spec.Cache == nil) {
			t.Fatalf("%v: spec %+v", d.Ref, d.Spec)
		}
	}
	want := map[core.ShardRef][2]uint64{
		sref("a", 0): {uint64(core.RoleLeader), 7},
		sref("a", 1): {uint64(core.RoleFollower), 3},
		cref("c", 1): {uint64(core.RoleLeader), 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("desired %v, want %v", got, want)
	}
}

// fakeShards is a shardOpener that records calls and fails the shards in fail.
type fakeShards struct {
	mu    sync.Mutex
	open  map[core.ShardRef]core.ShardState
	fail  map[core.ShardRef]error
	calls []string
}

func newFakeShards() *fakeShards {
	return &fakeShards{open: map[core.ShardRef]core.ShardState{}, fail: map[core.ShardRef]error{}}
}

func (f *fakeShards) OpenShard(spec core.ShardSpec, shard int, role core.Role, gen uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ref := specRefs(spec)[shard]
	f.calls = append(f.calls, fmt.Sprintf("open %v %d@%d", ref, role, gen))
	if err := f.fail[ref]; err != nil {
		return err
	}
	if _, ok := f.open[ref]; ok {
		return core.ErrExists
	}
	f.open[ref] = core.ShardState{Ref: ref, Role: role, Generation: gen}
	return nil
}

func (f *fakeShards) SetRole(ref core.ShardRef, role core.Role, gen uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("set %v %d@%d", ref, role, gen))
	if _, ok := f.open[ref]; !ok {
		return core.ErrNotFound
	}
	f.open[ref] = core.ShardState{Ref: ref, Role: role, Generation: gen}
	return nil
}

func (f *fakeShards) CloseShard(ref core.ShardRef) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("close %v", ref))
	delete(f.open, ref)
	return nil
}

func (f *fakeShards) Shards() []core.ShardState {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []core.ShardState
	for _, st := range f.open {
		out = append(out, st)
	}
	return out
}

func (f *fakeShards) held() map[core.ShardRef]core.ShardState {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[core.ShardRef]core.ShardState{}
	for k, v := range f.open {
		out[k] = v
	}
	return out
}

func (f *fakeShards) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// mustReconcile runs one pass of r and fails the test on its error.
func mustReconcile(t *testing.T, r *Reconciler) {
	t.Helper()
	if err := r.Reconcile(); err != nil {
		t.Fatal(err)
	}
}

// reconcileFixture is a catalog with stream t/ns/a (3 shards) and cache t/ns/c (2 shards),
// an ownership table, a fake engine and a reconciler for node n1.
func reconcileFixture(t *testing.T) (*Catalog, *OwnershipTable, *fakeShards, *Reconciler) {
	t.Helper()
	cat, err := OpenCatalog(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.EnsureNamespace(Namespace{TenantID: "t", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateStream(Stream{TenantID: "t", Namespace: "ns", Stream: "a", Shards: 3, Durable: true}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cat.CreateCache(Cache{TenantID: "t", Namespace: "ns", Cache: "c", Shards: 2}, nil); err != nil {
		t.Fatal(err)
	}
	owners, eng := NewOwnershipTable(), newFakeShards()
	r := NewReconciler(ReconcilerConfig{Node: "n1", Engine: eng, Catalog: cat, Owners: owners})
	return cat, owners, eng, r
}

func TestReconcilerOpensOnlyTheShardsThisNodeHolds(t *testing.T) {
	_, owners, eng, r := reconcileFixture(t)
	owners.Replace(Ownership{
		sref("a", 0): {Leader: "n1", ReplicaSet: []string{"n2"}, Generation: 2},
		sref("a", 1): {Leader: "n2", ReplicaSet: []string{"n1"}, Generation: 5},
		sref("a", 2): {Leader: "n2", ReplicaSet: []string{"n3"}},
		cref("c", 0): {Leader: "n3", ReplicaSet: []string{"n2"}},
		cref("c", 1): {Leader: "n1"},
	})
	mustReconcile(t, r)
	want := map[core.ShardRef]core.ShardState{
		sref("a", 0): {Ref: sref("a", 0), Role: core.RoleLeader, Generation: 2},
		sref("a", 1): {Ref: sref("a", 1), Role: core.RoleFollower, Generation: 5},
		cref("c", 1): {Ref: cref("c", 1), Role: core.RoleLeader},
	}
	if got := eng.held(); !reflect.DeepEqual(got, want) {
		t.Fatalf("engine holds %v, want %v", got, want)
	}
	eng.takeCalls()
	mustReconcile(t, r)
	if c := eng.takeCalls(); len(c) != 0 {
		t.Fatalf("second pass not idempotent: %v", c)
	}
	// Leadership moves: a#0 to n2 (n1 stays a follower), a#1 to n1, c#1 away entirely.
	owners.Replace(Ownership{
		sref("a", 0): {Leader: "n2", ReplicaSet: []string{"n1"}, Generation: 3},
		sref("a", 1): {Leader: "n1", ReplicaSet: []string{"n2"}, Generation: 6},
		cref("c", 1): {Leader: "n3"},
	})
	mustReconcile(t, r)
	wantCalls := []string{"close " + cref("c", 1).String(),
		fmt.Sprintf("set %v %d@3", sref("a", 0), core.RoleFollower), fmt.Sprintf("set %v %d@6", sref("a", 1), core.RoleLeader)}
	if c := eng.takeCalls(); !reflect.DeepEqual(c, wantCalls) {
		t.Fatalf("calls %v, want %v", c, wantCalls)
	}
}

func TestReconcilerRetriesAFailedOpenOnTheNextPass(t *testing.T) {
	_, owners, eng, r := reconcileFixture(t)
	boom := errors.New("disk full")
	eng.fail[sref("a", 1)] = boom
	owners.Replace(Ownership{sref("a", 0): {Leader: "n1"}, sref("a", 1): {Leader: "n1"}, sref("a", 2): {Leader: "n1"}})
	err := r.Reconcile()
	if !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if got := len(eng.held()); got != 2 {
		t.Fatalf("the other shards open: %d, want 2", got)
	}
	eng.mu.Lock()
	delete(eng.fail, sref("a", 1))
	eng.mu.Unlock()
	mustReconcile(t, r)
	if got := len(eng.held()); got != 3 {
		t.Fatalf("after the retry %d shards open, want 3", got)
	}
}

func TestReconcilerRunFollowsCatalogAndOwnershipChanges(t *testing.T) {
	cat, owners, eng, _ := reconcileFixture(t)
	r := NewReconciler(ReconcilerConfig{Node: "n1", Engine: eng, Catalog: cat, Owners: owners,
		Place: func(v CatalogView) { owners.Replace(SingleNode("n1", v)) }})
	stopCat, stopOwn := cat.Watch(r.Changed), owners.Watch(r.Changed)
	defer stopCat()
	defer stopOwn()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	r.Changed() // the start
	waitUntil(t, 10*time.Second, "every shard open", func() bool { return len(eng.held()) == 5 })
	if err := cat.DeleteCache("t", "ns", "c", nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the cache's shards closed", func() bool { return len(eng.held()) == 3 })
	if _, err := cat.CreateStream(Stream{TenantID: "t", Namespace: "ns", Stream: "b", Shards: 2}, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the new stream's shards open", func() bool { return len(eng.held()) == 5 })
	for ref, st := range eng.held() {
		if st.Role != core.RoleLeader || st.Generation != 0 {
			t.Fatalf("%v: %+v, want leader at generation 0", ref, st)
		}
	}
}

func TestOpenAheadPinsUntilTheCatalogInstallsTheChange(t *testing.T) {
	cat, owners, eng, r := reconcileFixture(t)
	owners.Replace(SingleNode("n1", cat))
	mustReconcile(t, r)
	// A create of t/ns/b opens ahead at the generation its install will have.
	b := Stream{TenantID: "t", Namespace: "ns", Stream: "b", Shards: 2}
	spec := streamSpec(b)
	until := cat.Generation() + 1
	if err := r.OpenAhead(core.ShardSpec{Stream: &spec}, Assignment{Leader: "n1"}, until, nil); err != nil {
		t.Fatal(err)
	}
	// A pass that read the catalog before the install keeps b open.
	mustReconcile(t, r)
	if _, ok := eng.held()[sref("b", 1)]; !ok {
		t.Fatal("a pass before the install closed the shard opened ahead")
	}
	// The install never came (a failed persist); the next change closes b.
	if err := cat.CreateTenant(Tenant{TenantID: "other"}); err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	if _, ok := eng.held()[sref("b", 0)]; ok {
		t.Fatal("a shard pinned for a create that was never installed stays open")
	}
	// A removal ahead keeps a#0 closed while the catalog still lists it.
	removed := false
	if err := r.RemoveAhead([]core.ShardRef{sref("a", 0)}, cat.Generation()+1, func() error {
		removed = true
		return eng.CloseShard(sref("a", 0))
	}); err != nil || !removed {
		t.Fatalf("RemoveAhead: %v removed=%v", err, removed)
	}
	mustReconcile(t, r)
	if _, ok := eng.held()[sref("a", 0)]; ok {
		t.Fatal("a pass before the delete installed reopened a removed shard")
	}
}

func TestOpenAheadClosesWhatItOpenedOnAFailure(t *testing.T) {
	_, _, eng, r := reconcileFixture(t)
	boom := errors.New("no space")
	eng.fail[sref("b", 2)] = boom
	spec := streamSpec(Stream{TenantID: "t", Namespace: "ns", Stream: "b", Shards: 4})
	if err := r.OpenAhead(core.ShardSpec{Stream: &spec}, Assignment{Leader: "n1"}, 99, nil); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if h := eng.held(); len(h) != 0 {
		t.Fatalf("left open after a failed create: %v", h)
	}
	if len(r.pins) != 0 {
		t.Fatalf("pins left: %v", r.pins)
	}
	// A holding for other nodes opens nothing.
	if err := r.OpenAhead(core.ShardSpec{Stream: &spec}, Assignment{Leader: "n2"}, 99, nil); err != nil || len(eng.held()) != 0 {
		t.Fatalf("opened for another node: %v %v", err, eng.held())
	}
}

// A create installed while the table still lacks it (the filler read the catalog just
// before): the shards opened ahead stay open until the table names them, and from then
// on the table decides.
func TestOpenAheadHoldsUntilTheTableNamesTheShards(t *testing.T) {
	cat, owners, eng, r := reconcileFixture(t)
	owners.Replace(SingleNode("n1", cat))
	mustReconcile(t, r)
	b := Stream{TenantID: "t", Namespace: "ns", Stream: "b", Shards: 2}
	_, err := cat.CreateStream(b, func(st Stream) error {
		spec := streamSpec(st)
		return r.OpenAhead(core.ShardSpec{Stream: &spec}, Assignment{Leader: "n1"}, cat.Generation()+1, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	mustReconcile(t, r)
	if _, ok := eng.held()[sref("b", 1)]; !ok {
		t.Fatal("a pass with a table behind the catalog closed a shard just created")
	}
	owners.Replace(SingleNode("n1", cat))
	mustReconcile(t, r)
	if len(r.pins) != 0 || len(eng.held()) != 7 {
		t.Fatalf("pins %v, %d shards open; want none and 7", r.pins, len(eng.held()))
	}
	next := SingleNode("n1", cat)
	next[sref("b", 0)] = Assignment{Leader: "n2"}
	owners.Replace(next)
	mustReconcile(t, r)
	if _, ok := eng.held()[sref("b", 0)]; ok {
		t.Fatal("the table gave b#0 to n2 but it stays open here")
	}
}

// Creates racing the background loop (its filler and passes reading the catalog at any
// moment) never close a shard opened ahead: no close at all, every shard open at the end.
func TestConcurrentCreatesNeverFlap(t *testing.T) {
	cat, owners, eng, _ := reconcileFixture(t)
	r := NewReconciler(ReconcilerConfig{Node: "n1", Engine: eng, Catalog: cat, Owners: owners,
		Place: func(v CatalogView) { owners.Replace(SingleNode("n1", v)) }})
	defer cat.Watch(r.Changed)()
	defer owners.Watch(r.Changed)()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	r.Changed()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				st := Stream{TenantID: "t", Namespace: "ns", Stream: fmt.Sprintf("s%d-%d", w, i), Shards: 2}
				if _, err := cat.CreateStream(st, func(st Stream) error {
					spec := streamSpec(st)
					return r.OpenAhead(core.ShardSpec{Stream: &spec}, Assignment{Leader: "n1"}, cat.Generation()+1, nil)
				}); err != nil {
					t.Error(err)
					return
				}
				r.Changed()
			}
		}()
	}
	wg.Wait()
	waitUntil(t, 10*time.Second, "every shard open", func() bool { return len(eng.held()) == 5+4*10*2 })
	for _, c := range eng.takeCalls() {
		if strings.HasPrefix(c, "close") {
			t.Fatalf("a shard closed while creates raced the loop: %s", c)
		}
	}
}

package broker

import (
	"sync"
	"sync/atomic"
	"testing"

	"felix/core"
)

func TestOwnershipTableReplaceLookupWatch(t *testing.T) {
	tbl := NewOwnershipTable()
	if _, ok := tbl.Lookup(sref("a", 0)); ok || tbl.Version() != 0 {
		t.Fatal("a new table names a shard")
	}
	var calls atomic.Int64
	stop := tbl.Watch(func() { calls.Add(1) })
	a := Assignment{Leader: "n1", ReplicaSet: []string{"n2", "n3"}, Generation: 4, Incarnation: 1}
	if !tbl.Replace(Ownership{sref("a", 0): a}) {
		t.Fatal("Replace of a new snapshot reported no change")
	}
	if got, ok := tbl.Lookup(sref("a", 0)); !ok || !got.equal(a) {
		t.Fatalf("Lookup %+v %v, want %+v", got, ok, a)
	}
	if tbl.Replace(Ownership{sref("a", 0): {Leader: "n1", ReplicaSet: []string{"n2", "n3"}, Generation: 4, Incarnation: 1}}) {
		t.Fatal("an equal snapshot counted as a change")
	}
	if calls.Load() != 1 || tbl.Version() != 1 {
		t.Fatalf("watch calls %d version %d, want 1 and 1", calls.Load(), tbl.Version())
	}
	for _, b := range []Assignment{{Leader: "n2", ReplicaSet: a.ReplicaSet, Generation: 4, Incarnation: 1},
		{Leader: "n1", ReplicaSet: []string{"n3", "n2"}, Generation: 4, Incarnation: 1},
		{Leader: "n1", ReplicaSet: a.ReplicaSet, Generation: 5, Incarnation: 1},
		{Leader: "n1", ReplicaSet: a.ReplicaSet, Generation: 5, Incarnation: 2}} {
		if !tbl.Replace(Ownership{sref("a", 0): b}) {
			t.Fatalf("%+v not seen as a change", b)
		}
	}
	stop()
	tbl.Replace(nil)
	if calls.Load() != 5 {
		t.Fatalf("watch calls %d after stop, want 5", calls.Load())
	}
	if _, ok := tbl.Lookup(sref("a", 0)); ok {
		t.Fatal("Replace(nil) left a shard")
	}
}

func TestOwnershipRole(t *testing.T) {
	a := Assignment{Leader: "n1", ReplicaSet: []string{"n2"}}
	for node, want := range map[string]core.Role{"n1": core.RoleLeader, "n2": core.RoleFollower} {
		if got, ok := a.Role(node); !ok || got != want {
			t.Fatalf("Role(%s) = %v %v, want %v", node, got, ok, want)
		}
	}
	if _, ok := a.Role("n3"); ok {
		t.Fatal("a node outside the replica set has a role")
	}
}

func TestOwnershipTableConcurrentReads(t *testing.T) {
	tbl := NewOwnershipTable()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				tbl.Replace(Ownership{sref("a", 0): {Leader: "n1", Generation: uint64(i*1000 + j)}})
				if a, ok := tbl.Lookup(sref("a", 0)); !ok || a.Leader != "n1" {
					t.Errorf("Lookup %+v %v", a, ok)
					return
				}
			}
		}()
	}
	wg.Wait()
	if tbl.Version() == 0 {
		t.Fatal("no Replace counted")
	}
}

func TestSingleNodeLeadsEveryShardAtGenerationZero(t *testing.T) {
	cat, _, _, _ := reconcileFixture(t)
	owners := SingleNode("n1", cat)
	if len(owners) != 5 {
		t.Fatalf("%d shards, want 5 (3 stream, 2 cache)", len(owners))
	}
	for ref, a := range owners {
		if a.Leader != "n1" || len(a.ReplicaSet) != 0 || a.Generation != 0 || a.Incarnation != 0 {
			t.Fatalf("%v: %+v, want n1 leading alone at generation 0", ref, a)
		}
	}
	if _, ok := owners[cref("c", 1)]; !ok {
		t.Fatal("cache shard 1 missing")
	}
	if _, ok := owners[sref("a", 2)]; !ok {
		t.Fatal("stream shard 2 missing")
	}
}

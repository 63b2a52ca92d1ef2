package meta

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// TestStoreSchema: the go-memdb schema validates, every State table is
// bound to a table of the schema, and a key lookup is exact (a prefix of a
// key does not find it) while a prefix scan finds only the rows under it.
func TestStoreSchema(t *testing.T) {
	if err := schema.Validate(); err != nil {
		t.Fatal(err)
	}
	s := committed(freshDB(), 0, Meta{})
	for _, name := range []string{s.tenants.name, s.namespaces.name, s.streams.name, s.caches.name,
		s.tombstones.name, s.brokers.name, s.assignments.name, s.reports.name, s.features.name,
		s.members.name, s.generations.name} {
		if schema.Tables[name] == nil {
			t.Fatalf("table %q is not in the schema", name)
		}
	}
	if len(schema.Tables) != 11 {
		t.Fatalf("schema has %d tables, the State binds 11", len(schema.Tables))
	}
	f := New(Config{})
	mustApply(t, f, &CreateTenant{TenantID: "t"})
	mustApply(t, f, &CreateTenant{TenantID: "t2"})
	mustApply(t, f, &CreateNamespace{TenantID: "t", Namespace: "ns"})
	mustApply(t, f, &CreateNamespace{TenantID: "t2", Namespace: "ns"})
	st := f.State()
	if _, ok := st.tenants.get("t2"); !ok {
		t.Fatal("t2 not found")
	}
	if _, ok := st.namespaces.get("t"); ok {
		t.Fatal("a lookup of t found a row under a longer key")
	}
	if got := st.namespaces.prefixed("t/"); len(got) != 1 || got[0].TenantID != "t" {
		t.Fatalf("prefix t/ = %+v, want t's one namespace", got)
	}
	mustApply(t, f, &DeleteTenant{TenantID: "t"})
	if got := f.State().Namespaces(); len(got) != 1 || got[0].TenantID != "t2" {
		t.Fatalf("after deleting t: namespaces %+v, want t2's only", got)
	}
}

// TestStoreWriteErrorIsFatal: a write the store refuses (here a row of the
// wrong type) is kept as the txn's error, which Apply turns into a
// *FatalError (ErrStore) rather than a partial state.
func TestStoreWriteErrorIsFatal(t *testing.T) {
	db := freshDB()
	w := db.Txn(true)
	defer w.Abort()
	st := &store{w: w}
	table[Tenant]{tableBrokers, st}.put(Tenant{TenantID: "t"})
	if st.err == nil {
		t.Fatal("a tenant row in the brokers table was accepted")
	}
	ro := committed(db, 0, Meta{})
	ro.tenants.put(Tenant{TenantID: "t"})
	if ro.st.err == nil {
		t.Fatal("a write to a committed State was accepted")
	}
	if _, ok := ro.tenants.get("t"); ok {
		t.Fatal("a committed State changed")
	}
	fe := &FatalError{Err: ErrStore}
	if !errors.Is(fe, ErrUnreadableEntry) || !errors.Is(fe, ErrStore) {
		t.Fatal("a store FatalError does not match ErrUnreadableEntry and ErrStore")
	}
}

// TestStateReadWhileApplying: States kept by readers on other goroutines
// are read while Apply writes the database (run with -race), and each
// encodes to the bytes it had when taken.
func TestStateReadWhileApplying(t *testing.T) {
	f := goldenFSM(t)
	type kept struct {
		sn    *Snapshot
		bytes []byte
	}
	var keep []kept
	for i := 0; i < 4; i++ {
		sn := f.Snapshot()
		b, err := sn.Encode()
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, kept{sn, b})
		mustApply(t, f, &CreateTenant{TenantID: "r" + string(rune('a'+i))})
	}
	var wg sync.WaitGroup
	errs := make(chan string, len(keep))
	for _, k := range keep {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				b, err := k.sn.Encode()
				if err != nil || !bytes.Equal(b, k.bytes) {
					errs <- "a kept snapshot changed while Apply went on"
					return
				}
			}
		}()
	}
	for i := 0; i < 50; i++ {
		mustApply(t, f, &Heartbeat{NodeID: "b1", Draining: i%2 == 0, AtMs: 2000 + int64(i)})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

// TestRestoreBuildsNewDB: Restore decodes into a new database; Applies
// after it do not change the State DecodeSnapshot gave, and the restored
// state encodes to the input bytes.
func TestRestoreBuildsNewDB(t *testing.T) {
	data, err := goldenFSM(t).Snapshot().Encode()
	if err != nil {
		t.Fatal(err)
	}
	f := New(Config{})
	if err := f.Restore(data); err != nil {
		t.Fatal(err)
	}
	restored := f.State()
	again, _ := f.Snapshot().Encode()
	if !bytes.Equal(again, data) {
		t.Fatal("the restored state encodes to other bytes")
	}
	mustApply(t, f, &CreateTenant{TenantID: "later"})
	if _, ok := restored.tenants.get("later"); ok {
		t.Fatal("an Apply after Restore changed the restored State")
	}
	if _, ok := f.State().tenants.get("later"); !ok {
		t.Fatal("the Apply after Restore is not in the live state")
	}
}

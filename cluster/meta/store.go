package meta

import (
	"errors"
	"fmt"

	memdb "github.com/hashicorp/go-memdb"
)

// The state's go-memdb tables, one per kind (docs/controlplane.md, "Data
// model"). Each has one unique index, "id", on the row's key (the snapshot's
// sort order), with prefix lookups ("id_prefix") for the scans by owner: a
// tenant's namespaces ("t/"), a namespace's streams and caches ("t/ns/"), a
// stream's or cache's assignments and reports ("kind/t/ns/name/").
const (
	tableTenants     = "tenants"
	tableNamespaces  = "namespaces"
	tableStreams     = "streams"
	tableCaches      = "caches"
	tableTombstones  = "tombstones"
	tableBrokers     = "brokers"
	tableAssignments = "assignments"
	tableReports     = "reports"
	tableFeatures    = "features"
	tableMembers     = "members"
	tableGenerations = "generations"
)

// keyIndex indexes a table's rows of type V by key(V), NUL-terminated as
// memdb's StringFieldIndex does (so "a" does not match "ab"); a prefix
// lookup takes the bare prefix. No reflection.
type keyIndex[V any] struct{ key func(V) string }

func (ix keyIndex[V]) FromObject(raw any) (bool, []byte, error) {
	v, ok := raw.(V)
	if !ok {
		return false, nil, fmt.Errorf("meta: a %T row in a table of %T", raw, v)
	}
	return true, append([]byte(ix.key(v)), 0), nil
}

func (ix keyIndex[V]) FromArgs(args ...any) ([]byte, error) {
	k, err := oneKey(args)
	return append([]byte(k), 0), err
}

func (ix keyIndex[V]) PrefixFromArgs(args ...any) ([]byte, error) {
	k, err := oneKey(args)
	return []byte(k), err
}

func oneKey(args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("meta: a key lookup takes one argument, got %d", len(args))
	}
	k, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("meta: a key lookup takes a string, got %T", args[0])
	}
	return k, nil
}

func tableSchema[V any](name string, key func(V) string) *memdb.TableSchema {
	return &memdb.TableSchema{Name: name, Indexes: map[string]*memdb.IndexSchema{
		"id": {Name: "id", Unique: true, Indexer: keyIndex[V]{key}},
	}}
}

func catalogKey(tenant, ns, name string) string { return tenant + "/" + ns + "/" + name }

func tombstoneKey(v Tombstone) string {
	return v.Kind + "/" + catalogKey(v.TenantID, v.Namespace, v.Name)
}

var schema = &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
	tableTenants:     tableSchema(tableTenants, func(v Tenant) string { return v.TenantID }),
	tableNamespaces:  tableSchema(tableNamespaces, func(v Namespace) string { return v.TenantID + "/" + v.Namespace }),
	tableStreams:     tableSchema(tableStreams, func(v Stream) string { return catalogKey(v.TenantID, v.Namespace, v.Stream) }),
	tableCaches:      tableSchema(tableCaches, func(v Cache) string { return catalogKey(v.TenantID, v.Namespace, v.Cache) }),
	tableTombstones:  tableSchema(tableTombstones, tombstoneKey),
	tableBrokers:     tableSchema(tableBrokers, func(v Broker) string { return v.NodeID }),
	tableAssignments: tableSchema(tableAssignments, func(v Assignment) string { return v.Key() }),
	tableReports:     tableSchema(tableReports, func(v Report) string { return v.Key() }),
	tableFeatures:    tableSchema(tableFeatures, func(v FeatureState) string { return v.Name }),
	tableMembers:     tableSchema(tableMembers, func(v Member) string { return v.ID }),
	tableGenerations: tableSchema(tableGenerations, func(v generationRecord) string { return v.Key }),
}}

// emptyDB is the empty database every state machine starts from. The FSM
// writes a Snapshot() of it, never the primary: memdb tracks mutations (and
// closes watch channels at commit) only on a primary database, and the
// state machine has no watchers (it is pure; readers poll the applied
// index).
var emptyDB = func() *memdb.MemDB {
	db, err := memdb.NewMemDB(schema)
	if err != nil {
		// The schema is a constant of this file: TestStoreSchema covers it.
		panic("meta: state schema: " + err.Error())
	}
	return db
}()

// freshDB gives a new, empty, writable database (O(1)).
func freshDB() *memdb.MemDB { return emptyDB.Snapshot() }

// ErrStore is the *FatalError cause when the state store refuses a write
// (a bug of this build, never an input's: an unknown table, a row of the
// wrong type).
var ErrStore = errors.New("state store")

// store is where a State's tables live: a committed State reads db, a
// frozen memdb snapshot that nothing writes (one read txn per call); an
// Apply's working State reads and writes w, the write txn, and err keeps
// the first error the txn gave.
type store struct {
	db  *memdb.MemDB
	w   *memdb.Txn
	err error
}

func (st *store) read() *memdb.Txn {
	switch {
	case st == nil || (st.w == nil && st.db == nil):
		return emptyDB.Txn(false)
	case st.w != nil:
		return st.w
	}
	return st.db.Txn(false)
}

func (st *store) fail(err error) {
	if err != nil && st != nil && st.err == nil {
		st.err = err
	}
}

// table is one table of a State: typed rows of V under their keys.
type table[V any] struct {
	name string
	st   *store
}

func (t table[V]) get(k string) (V, bool) {
	var zero V
	raw, err := t.st.read().First(t.name, "id", k)
	if err != nil || raw == nil {
		t.st.fail(err)
		return zero, false
	}
	v, ok := raw.(V)
	return v, ok
}

func (t table[V]) writer() *memdb.Txn {
	if t.st == nil || t.st.w == nil {
		t.st.fail(fmt.Errorf("meta: write to %s outside a txn", t.name))
		return nil
	}
	return t.st.w
}

// put inserts or replaces v under its key.
func (t table[V]) put(v V) {
	if w := t.writer(); w != nil {
		t.st.fail(w.Insert(t.name, v))
	}
}

func (t table[V]) del(k string) {
	w := t.writer()
	if w == nil {
		return
	}
	raw, err := w.First(t.name, "id", k)
	if err == nil && raw != nil {
		err = w.Delete(t.name, raw)
	}
	t.st.fail(err)
}

// each calls fn with every row of index's lookup (args), in key order,
// until fn returns false; fn must not write the table.
func (t table[V]) each(fn func(V) bool, index string, args ...any) {
	it, err := t.st.read().Get(t.name, index, args...)
	if err != nil {
		t.st.fail(err)
		return
	}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		if v, ok := raw.(V); ok && !fn(v) {
			return
		}
	}
}

func (t table[V]) scan(index string, args ...any) []V {
	var out []V
	t.each(func(v V) bool { out = append(out, v); return true }, index, args...)
	return out
}

// values gives every row, sorted by key.
func (t table[V]) values() []V { return t.scan("id") }

// prefixed gives the rows whose key starts with p, sorted by key.
func (t table[V]) prefixed(p string) []V { return t.scan("id_prefix", p) }

// bind gives a State of index and m whose tables are st's.
func bind(st *store, index uint64, m Meta) State {
	return State{index: index, meta: m, st: st,
		tenants: table[Tenant]{tableTenants, st}, namespaces: table[Namespace]{tableNamespaces, st},
		streams: table[Stream]{tableStreams, st}, caches: table[Cache]{tableCaches, st},
		tombstones: table[Tombstone]{tableTombstones, st}, brokers: table[Broker]{tableBrokers, st},
		assignments: table[Assignment]{tableAssignments, st}, reports: table[Report]{tableReports, st},
		features: table[FeatureState]{tableFeatures, st}, members: table[Member]{tableMembers, st},
		generations: table[generationRecord]{tableGenerations, st}}
}

// committed gives a State reading db's current contents, frozen (O(1)).
func committed(db *memdb.MemDB, index uint64, m Meta) *State {
	s := bind(&store{db: db.Snapshot()}, index, m)
	return &s
}

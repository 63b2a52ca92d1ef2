package meta

import (
	"unicode/utf8"
)

// CreateTenant creates a tenant (kind create_tenant). Refusals: 400 bad
// name, 409 exists.
type CreateTenant struct {
	TenantID    string `json:"tenant_id"`
	DisplayName string `json:"display_name"`
}

// DeleteTenant deletes a tenant with its namespaces, streams and caches,
// each stream and cache leaving a tombstone (kind delete_tenant). 404 when
// absent.
type DeleteTenant struct {
	TenantID string `json:"tenant_id"`
}

// CreateNamespace creates a namespace of an existing tenant (kind
// create_namespace). 400, 404 tenant, 409 exists.
type CreateNamespace struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	DisplayName string `json:"display_name"`
}

// DeleteNamespace deletes a namespace with its streams and caches (kind
// delete_namespace). 404 when absent.
type DeleteNamespace struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
}

// Kind gives create_tenant.
func (CreateTenant) Kind() Kind { return KindCreateTenant }

// Kind gives delete_tenant.
func (DeleteTenant) Kind() Kind { return KindDeleteTenant }

// Kind gives create_namespace.
func (CreateNamespace) Kind() Kind { return KindCreateNamespace }

// Kind gives delete_namespace.
func (DeleteNamespace) Kind() Kind { return KindDeleteNamespace }

func (CreateTenant) levels(*State) (Level, Level)    { return LevelBase, LevelBase }
func (CreateNamespace) levels(*State) (Level, Level) { return LevelBase, LevelBase }

// A delete takes shard state (assignments, reports) only at LevelDeleteShards
// (seed, "stream_incarnations": "Under Raft, deletes keep shard state until
// every member is at metadata version 10").
func (DeleteTenant) levels(*State) (Level, Level)    { return LevelBase, LevelDeleteShards }
func (DeleteNamespace) levels(*State) (Level, Level) { return LevelBase, LevelDeleteShards }

// ValidName reports whether s can name a tenant, namespace, stream or cache:
// the broker's rule (non-empty UTF-8 of at most 255 bytes, not "." or "..",
// no '/', '*' or control bytes).
func ValidName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 255 || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] < 0x20 || s[i] == '*' {
			return false
		}
	}
	return true
}

func checkNames(names ...string) error {
	for _, n := range names {
		if !ValidName(n) {
			return invalid("name %q (non-empty UTF-8, not . or .., no '/', '*' or control bytes, at most 255 bytes)", n)
		}
	}
	return nil
}

func (c *CreateTenant) apply(tx *txn) (any, error) {
	if err := checkNames(c.TenantID); err != nil {
		return nil, err
	}
	if _, ok := tx.s.tenants.get(c.TenantID); ok {
		return nil, conflict("exists", "tenant %s exists", c.TenantID)
	}
	t := Tenant(*c)
	tx.s.tenants.put(t)
	tx.record("tenant", OpUpsert, t.TenantID, t)
	return t, nil
}

func (c *DeleteTenant) apply(tx *txn) (any, error) {
	if _, ok := tx.s.tenants.get(c.TenantID); !ok {
		return nil, notFound("tenant %s not found", c.TenantID)
	}
	for _, ns := range tx.s.namespaces.prefixed(c.TenantID + "/") {
		tx.deleteNamespace(ns)
	}
	tx.s.tenants.del(c.TenantID)
	tx.record("tenant", OpDelete, c.TenantID, nil)
	return nil, nil
}

func (c *CreateNamespace) apply(tx *txn) (any, error) {
	if err := checkNames(c.TenantID, c.Namespace); err != nil {
		return nil, err
	}
	if _, ok := tx.s.tenants.get(c.TenantID); !ok {
		return nil, notFound("tenant %s not found", c.TenantID)
	}
	key := c.TenantID + "/" + c.Namespace
	if _, ok := tx.s.namespaces.get(key); ok {
		return nil, conflict("exists", "namespace %s exists", key)
	}
	ns := Namespace(*c)
	tx.s.namespaces.put(ns)
	tx.record("namespace", OpUpsert, key, ns)
	return ns, nil
}

func (c *DeleteNamespace) apply(tx *txn) (any, error) {
	ns, ok := tx.s.namespaces.get(c.TenantID + "/" + c.Namespace)
	if !ok {
		return nil, notFound("namespace %s/%s not found", c.TenantID, c.Namespace)
	}
	tx.deleteNamespace(ns)
	return nil, nil
}

// deleteNamespace removes ns with its streams and caches (tombstones) and,
// at LevelDeleteShards, their shard state.
func (tx *txn) deleteNamespace(ns Namespace) {
	key := ns.TenantID + "/" + ns.Namespace
	for _, st := range tx.s.streams.prefixed(key + "/") {
		tx.deleteNamed("stream", st.TenantID, st.Namespace, st.Stream, st.Incarnation)
	}
	for _, c := range tx.s.caches.prefixed(key + "/") {
		tx.deleteNamed("cache", c.TenantID, c.Namespace, c.Cache, c.Incarnation)
	}
	tx.s.namespaces.del(key)
	tx.record("namespace", OpDelete, key, nil)
}

// deleteNamed removes a stream or cache, records its tombstone and, at
// LevelDeleteShards, drops its assignments and reports (seed,
// "stream_incarnations": from level 10 "a delete takes both").
func (tx *txn) deleteNamed(kind, tenant, ns, name string, incarnation uint64) {
	key := tenant + "/" + ns + "/" + name
	if kind == "stream" {
		tx.s.streams.del(key)
	} else {
		tx.s.caches.del(key)
	}
	tx.record(kind, OpDelete, key, nil)
	tomb := Tombstone{Kind: kind, TenantID: tenant, Namespace: ns, Name: name, Incarnation: incarnation, DeletedIndex: tx.index}
	tx.s.tombstones.put(tomb)
	tx.record("tombstone", OpUpsert, kind+"/"+key, tomb)
	if tx.level < LevelDeleteShards {
		return
	}
	owner := kind + "/" + key
	for _, a := range tx.s.assignments.prefixed(owner + "/") {
		tx.s.assignments.del(a.Key())
		tx.record("assignment", OpDelete, a.Key(), nil)
	}
	for _, r := range tx.s.reports.prefixed(owner + "/") {
		tx.s.reports.del(r.Key())
	}
}

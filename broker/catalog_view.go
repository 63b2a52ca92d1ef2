package broker

// CatalogView is the read side of the catalog: the names the broker serves and their
// settings (spec/auth.md §1 shapes), a generation that moves with every change, and a way
// to be told of changes. Today's implementation is the file catalog (*Catalog,
// <data>/catalog.json); the control plane's catalog feed (issue 17) will be a second one.
// Lookups return errors wrapping ErrNotFound. Listings are sorted (see *Catalog); t=""
// lists every stream or cache. Safe for concurrent use.
type CatalogView interface {
	Tenant(t string) (Tenant, error)
	Tenants() []Tenant
	Namespace(t, ns string) (Namespace, error)
	Namespaces(t string) []Namespace
	Stream(t, ns, name string) (Stream, error)
	Streams(t, ns string) []Stream
	Cache(t, ns, name string) (Cache, error)
	Caches(t, ns string) []Cache
	// Generation counts installed changes; it only grows. A reader that cached settings
	// looks them up again when it moved.
	Generation() uint64
	// Watch registers fn to run after every installed change (Generation already moved),
	// on the goroutine that made it and outside the catalog's lock: fn must not block.
	// stop unregisters it.
	Watch(fn func()) (stop func())
}

// CatalogWriter is the write side the admin API (and FELIX_AUTO_CREATE) uses. An apply
// callback (may be nil) runs before the change is installed, under the writer's lock, and
// its error aborts the change: it must not read the catalog. Errors: ErrInvalid,
// ErrNotFound, ErrExists, ErrNotEmpty, ErrLimit, a persist failure, apply's.
type CatalogWriter interface {
	CreateTenant(t Tenant) error
	DeleteTenant(t string) error
	CreateNamespace(n Namespace) error
	EnsureNamespace(n Namespace) error
	DeleteNamespace(t, ns string) error
	CreateStream(s Stream, apply func(Stream) error) (Stream, error)
	UpdateStream(t, ns, name string, update func(*Stream) error) (Stream, error)
	DeleteStream(t, ns, name string, apply func(Stream) error) error
	CreateCache(x Cache, apply func(Cache) error) (Cache, error)
	DeleteCache(t, ns, name string, apply func(Cache) error) error
}

// CatalogStore is a catalog both read and written (the admin API's and the server's).
type CatalogStore interface {
	CatalogView
	CatalogWriter
}

var _ CatalogStore = (*Catalog)(nil)

// Watch registers fn to run after every change the catalog installs (CatalogView.Watch).
func (c *Catalog) Watch(fn func()) (stop func()) { return c.watches.add(fn) }

package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"felix/auth"
	"felix/internal/vfs"
)

// Catalog errors. Test with errors.Is; the admin API maps them to HTTP 404 / 409 / 400 and
// the wire to the code "not_found" (spec/client-protocol.md §8.7).
var (
	ErrNotFound = errors.New("not_found")
	ErrExists   = errors.New("already exists")
	ErrInvalid  = errors.New("invalid")
	ErrNotEmpty = errors.New("not empty")
)

// Stream kinds, consistencies and deliveries (spec/auth.md §1; v1 control-plane values).
// What each means on a single node is in docs/operations.md, "Stream options".
const (
	// KindStream is a stream read by subscriptions (fan-out) and consumer groups.
	KindStream = "Stream"
	// KindQueue is a work queue: its records are consumed through consumer groups only
	// (group_poll / ack / nack, dead letters; spec/client-protocol.md §8.3), so a plain
	// subscribe is refused with code malformed. Needs a durable stream (groups do).
	KindQueue = "Queue"
	// ConsistencyLeader acknowledges a publish at the leader's commit under the node's
	// fsync mode (FELIX_DURABLE_FSYNC_MODE). The default.
	ConsistencyLeader = "Leader"
	// ConsistencyQuorum acknowledges a publish once a majority holds it on disk. A single
	// node is its own majority: its record and producer logs fsync on_commit whatever
	// FELIX_DURABLE_FSYNC_MODE says (core.StreamSpec.SyncOnCommit). Needs a durable stream.
	ConsistencyQuorum = "Quorum"
	// DeliveryAtMostOnce accepts every publish, acknowledged or not. The default.
	DeliveryAtMostOnce = "AtMostOnce"
	// DeliveryAtLeastOnce accepts only publishes the publisher can retry: acknowledged
	// ones, answered after commit; un-acknowledged (fire-and-forget) publishes are refused
	// with code malformed. Needs a durable stream.
	DeliveryAtLeastOnce = "AtLeastOnce"
)

// Retention bounds a durable stream's record log per shard (spec/auth.md §1; enforced
// as core.StreamSpec.RetentionBytes / RetentionAge). Each bound on its own: a value > 0
// is the stream's and wins over the broker's FELIX_DURABLE_RETENTION_BYTES / _SECONDS;
// zero or absent takes the broker's (itself off by default). Negative: ErrInvalid; set
// on an in-memory stream: ErrInvalid.
type Retention struct {
	MaxAgeSeconds *int64 `json:"max_age_seconds,omitempty"`
	MaxSizeBytes  *int64 `json:"max_size_bytes,omitempty"`
}

// maxRetentionSeconds is the largest max_age_seconds a time.Duration holds.
const maxRetentionSeconds = math.MaxInt64 / int64(time.Second)

// ageSeconds and sizeBytes read a retention bound; absent is 0.
func (r Retention) ageSeconds() int64 { return valueOr0(r.MaxAgeSeconds) }
func (r Retention) sizeBytes() int64  { return valueOr0(r.MaxSizeBytes) }

func valueOr0(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// age is MaxAgeSeconds as a duration (0 when absent, saturating past ~292 years).
func (r Retention) age() time.Duration {
	return time.Duration(min(r.ageSeconds(), maxRetentionSeconds)) * time.Second
}

// set reports whether a bound is set (> 0).
func (r Retention) set() bool { return r.ageSeconds() > 0 || r.sizeBytes() > 0 }

// Tenant is a tenant as the admin API shows it.
type Tenant struct {
	TenantID    string `json:"tenant_id"`
	DisplayName string `json:"display_name"`
}

// Namespace is a namespace as the admin API shows it.
type Namespace struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	DisplayName string `json:"display_name"`
}

// Stream is a stream as the admin API shows it (spec/auth.md §1 fields, plus PROPOSED
// "routing": "modulo" (default) or "jump_hash", fixed at creation).
type Stream struct {
	TenantID    string    `json:"tenant_id"`
	Namespace   string    `json:"namespace"`
	Stream      string    `json:"stream"`
	Kind        string    `json:"kind"`
	Shards      uint32    `json:"shards"`
	Retention   Retention `json:"retention"`
	Consistency string    `json:"consistency"`
	Delivery    string    `json:"delivery"`
	Durable     bool      `json:"durable"`
	Routing     string    `json:"routing"`
}

// Cache is a cache as the admin API shows it (spec/auth.md §1, plus PROPOSED "shards",
// default 1, and "durable", default true: a single node keeps cache and counter logs).
type Cache struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	Cache       string `json:"cache"`
	DisplayName string `json:"display_name"`
	Shards      uint32 `json:"shards"`
	Durable     *bool  `json:"durable,omitempty"`
}

// catalogFile is the persisted form, <data>/catalog.json.
type catalogFile struct {
	Version    int         `json:"version"`
	Tenants    []Tenant    `json:"tenants"`
	Namespaces []Namespace `json:"namespaces"`
	Streams    []Stream    `json:"streams"`
	Caches     []Cache     `json:"caches"`
}

const catalogVersion = 1

// WriteFileFunc writes data to path durably (temp file, fsync, rename, fsync of the
// directory). It is the catalog's fault-injection seam; WriteFileAtomic is the real one.
type WriteFileFunc func(path string, data []byte) error

// Catalog is the single-node registry of tenants, namespaces, streams and caches,
// persisted as JSON in <data>/catalog.json after every change (before the change is
// visible). Safe for concurrent use. Names are non-empty UTF-8 without '/', at most 255
// bytes.
type Catalog struct {
	mu    sync.RWMutex
	path  string
	write WriteFileFunc
	file  catalogFile
	gen   atomic.Uint64 // bumped after every installed change (Generation)
	// watches run after every installed change, outside mu (Watch).
	watches watchList
	// MaxShards bounds the stream and cache shards the catalog holds (FELIX_MAX_SHARDS;
	// 0 = no bound). Each durable shard reserves disk (a preallocated segment per log), so
	// creation past it fails with ErrLimit. Set before use.
	MaxShards int
}

// ErrLimit: creating the object would pass FELIX_MAX_SHARDS.
var ErrLimit = errors.New("shard limit reached (FELIX_MAX_SHARDS)")

// checkShardLimit refuses adding shards when the catalog would exceed MaxShards.
func (c *Catalog) checkShardLimit(f *catalogFile, adding uint32) error {
	if c.MaxShards <= 0 {
		return nil
	}
	total := int64(adding)
	for _, s := range f.Streams {
		total += int64(s.Shards)
	}
	for _, x := range f.Caches {
		total += int64(x.Shards)
	}
	if total > int64(c.MaxShards) {
		return fmt.Errorf("%w: %d shards would exceed %d", ErrLimit, total, c.MaxShards)
	}
	return nil
}

// CatalogPath is where a data dir keeps its catalog.
func CatalogPath(dataDir string) string { return filepath.Join(dataDir, "catalog.json") }

// OpenCatalog loads <dataDir>/catalog.json, or starts an empty catalog when it does not
// exist. Errors: read errors; a damaged file (wrapping ErrInvalid) is never overwritten.
func OpenCatalog(dataDir string, write WriteFileFunc) (*Catalog, error) {
	if write == nil {
		write = WriteFileAtomic
	}
	c := &Catalog{path: CatalogPath(dataDir), write: write, file: catalogFile{Version: catalogVersion}}
	data, err := os.ReadFile(c.path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: read catalog: %w", err)
	}
	if c.file, err = decodeCatalog(data); err != nil {
		return nil, fmt.Errorf("broker: catalog %s: %w", c.path, err)
	}
	return c, nil
}

// decodeCatalog parses catalog.json. Errors wrap ErrInvalid: bad JSON, another version, or a
// name that ValidName refuses (a hand-edited file must not smuggle "a/b" past the API).
func decodeCatalog(data []byte) (catalogFile, error) {
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return catalogFile{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if f.Version != catalogVersion {
		return catalogFile{}, fmt.Errorf("%w: version %d", ErrInvalid, f.Version)
	}
	for _, t := range f.Tenants {
		if err := checkNames(t.TenantID); err != nil {
			return catalogFile{}, err
		}
	}
	for _, n := range f.Namespaces {
		if err := checkNames(n.TenantID, n.Namespace); err != nil {
			return catalogFile{}, err
		}
	}
	for i := range f.Streams {
		if err := NormalizeStream(&f.Streams[i]); err != nil {
			return catalogFile{}, err
		}
	}
	for _, x := range f.Caches {
		if err := checkNames(x.TenantID, x.Namespace, x.Cache); err != nil {
			return catalogFile{}, err
		}
	}
	return f, nil
}

// WriteFileAtomic writes data to path via path.tmp (mode 0600): write, fdatasync,
// rename, fsync the directory (vfs.WriteFileAtomic on the OS file system). A crash
// leaves either the old or the new file.
func WriteFileAtomic(path string, data []byte) error {
	return vfs.WriteFileAtomic(vfs.OSFS{}, path, data, 0o600)
}

// ValidName reports whether s can name a tenant, namespace, stream or cache:
// non-empty valid UTF-8 of at most 255 bytes, without '/', '*' or control
// bytes, and neither "." nor ".." (which HTTP path cleaning would turn into a
// parent resource: deleting stream ".." must never delete its namespace).
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

// checkNewNames is the rule for a name being created: auth.ValidName (spec/auth.md §3.1),
// which also refuses spaces and ':' so that every name the catalog creates can be named in
// a permission. Names already stored keep the looser ValidName (a catalog written by an
// older build still loads, and its resources can still be read and deleted).
func checkNewNames(names ...string) error {
	for _, n := range names {
		if !auth.ValidName(n) {
			return fmt.Errorf("%w: name %q (non-empty UTF-8, not . or .., no space, control byte, '/', ':' or '*', at most %d bytes)", ErrInvalid, n, auth.MaxNameBytes)
		}
	}
	return nil
}

func checkNames(names ...string) error {
	for _, n := range names {
		if !ValidName(n) {
			return fmt.Errorf("%w: name %q (non-empty UTF-8, not . or .., no '/', '*' or control bytes, at most 255 bytes)", ErrInvalid, n)
		}
	}
	return nil
}

// mutate applies change to a copy, persists it, then installs it and tells the watchers
// (after the lock is released). A failed write leaves the catalog as it was.
func (c *Catalog) mutate(change func(f *catalogFile) error) error {
	if err := c.install(change); err != nil {
		return err
	}
	c.watches.notify()
	return nil
}

func (c *Catalog) install(change func(f *catalogFile) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := catalogFile{
		Version:    catalogVersion,
		Tenants:    append([]Tenant(nil), c.file.Tenants...),
		Namespaces: append([]Namespace(nil), c.file.Namespaces...),
		Streams:    append([]Stream(nil), c.file.Streams...),
		Caches:     append([]Cache(nil), c.file.Caches...),
	}
	if err := change(&next); err != nil {
		return err
	}
	data, err := json.MarshalIndent(&next, "", "  ")
	if err != nil {
		return err
	}
	if err := c.write(c.path, data); err != nil {
		return fmt.Errorf("broker: persist catalog: %w", err)
	}
	c.file = next
	c.gen.Add(1)
	return nil
}

// Generation counts the catalog's installed changes since it was opened: a reader that
// cached a stream's settings (a session's publish target) looks them up again when it
// moved. Goroutine-safe; one atomic load.
func (c *Catalog) Generation() uint64 { return c.gen.Load() }

func (f *catalogFile) tenant(t string) int {
	for i, x := range f.Tenants {
		if x.TenantID == t {
			return i
		}
	}
	return -1
}

func (f *catalogFile) namespace(t, ns string) int {
	for i, x := range f.Namespaces {
		if x.TenantID == t && x.Namespace == ns {
			return i
		}
	}
	return -1
}

func (f *catalogFile) stream(t, ns, s string) int {
	for i, x := range f.Streams {
		if x.TenantID == t && x.Namespace == ns && x.Stream == s {
			return i
		}
	}
	return -1
}

func (f *catalogFile) cache(t, ns, name string) int {
	for i, x := range f.Caches {
		if x.TenantID == t && x.Namespace == ns && x.Cache == name {
			return i
		}
	}
	return -1
}

// CreateTenant adds a tenant. Errors: ErrInvalid, ErrExists.
func (c *Catalog) CreateTenant(t Tenant) error {
	if err := checkNewNames(t.TenantID); err != nil {
		return err
	}
	return c.mutate(func(f *catalogFile) error {
		if f.tenant(t.TenantID) >= 0 {
			return fmt.Errorf("%w: tenant %s", ErrExists, t.TenantID)
		}
		f.Tenants = append(f.Tenants, t)
		return nil
	})
}

// EnsureTenant adds the tenant when missing (bootstrap, auto-create).
func (c *Catalog) EnsureTenant(t Tenant) error {
	if err := c.CreateTenant(t); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}

// DeleteTenant removes an empty tenant. Errors: ErrNotFound, ErrNotEmpty (namespaces left).
func (c *Catalog) DeleteTenant(t string) error {
	return c.mutate(func(f *catalogFile) error {
		i := f.tenant(t)
		if i < 0 {
			return fmt.Errorf("%w: tenant %s", ErrNotFound, t)
		}
		for _, ns := range f.Namespaces {
			if ns.TenantID == t {
				return fmt.Errorf("%w: tenant %s has namespace %s", ErrNotEmpty, t, ns.Namespace)
			}
		}
		f.Tenants = append(f.Tenants[:i], f.Tenants[i+1:]...)
		return nil
	})
}

// Tenant returns one tenant. Errors: ErrNotFound.
func (c *Catalog) Tenant(t string) (Tenant, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := c.file.tenant(t); i >= 0 {
		return c.file.Tenants[i], nil
	}
	return Tenant{}, fmt.Errorf("%w: tenant %s", ErrNotFound, t)
}

// Tenants lists every tenant sorted by id.
func (c *Catalog) Tenants() []Tenant {
	c.mu.RLock()
	out := append([]Tenant(nil), c.file.Tenants...)
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].TenantID < out[j].TenantID })
	return out
}

// CreateNamespace adds a namespace to an existing tenant. Errors: ErrInvalid,
// ErrNotFound (tenant), ErrExists.
func (c *Catalog) CreateNamespace(n Namespace) error {
	if err := checkNewNames(n.TenantID, n.Namespace); err != nil {
		return err
	}
	return c.mutate(func(f *catalogFile) error {
		if f.tenant(n.TenantID) < 0 {
			return fmt.Errorf("%w: tenant %s", ErrNotFound, n.TenantID)
		}
		if f.namespace(n.TenantID, n.Namespace) >= 0 {
			return fmt.Errorf("%w: namespace %s/%s", ErrExists, n.TenantID, n.Namespace)
		}
		f.Namespaces = append(f.Namespaces, n)
		return nil
	})
}

// EnsureNamespace adds the namespace (and its tenant) when missing.
func (c *Catalog) EnsureNamespace(n Namespace) error {
	if err := c.EnsureTenant(Tenant{TenantID: n.TenantID, DisplayName: n.TenantID}); err != nil {
		return err
	}
	if err := c.CreateNamespace(n); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}

// DeleteNamespace removes an empty namespace. Errors: ErrNotFound, ErrNotEmpty.
func (c *Catalog) DeleteNamespace(t, ns string) error {
	return c.mutate(func(f *catalogFile) error {
		i := f.namespace(t, ns)
		if i < 0 {
			return fmt.Errorf("%w: namespace %s/%s", ErrNotFound, t, ns)
		}
		for _, s := range f.Streams {
			if s.TenantID == t && s.Namespace == ns {
				return fmt.Errorf("%w: namespace %s/%s has stream %s", ErrNotEmpty, t, ns, s.Stream)
			}
		}
		for _, x := range f.Caches {
			if x.TenantID == t && x.Namespace == ns {
				return fmt.Errorf("%w: namespace %s/%s has cache %s", ErrNotEmpty, t, ns, x.Cache)
			}
		}
		f.Namespaces = append(f.Namespaces[:i], f.Namespaces[i+1:]...)
		return nil
	})
}

// Namespace returns one namespace. Errors: ErrNotFound.
func (c *Catalog) Namespace(t, ns string) (Namespace, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := c.file.namespace(t, ns); i >= 0 {
		return c.file.Namespaces[i], nil
	}
	return Namespace{}, fmt.Errorf("%w: namespace %s/%s", ErrNotFound, t, ns)
}

// Namespaces lists a tenant's namespaces sorted by name.
func (c *Catalog) Namespaces(t string) []Namespace {
	c.mu.RLock()
	var out []Namespace
	for _, n := range c.file.Namespaces {
		if n.TenantID == t {
			out = append(out, n)
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// NormalizeStream fills defaults (kind Stream, 1 shard, consistency Leader, delivery
// AtMostOnce, routing modulo) and validates. Errors: ErrInvalid.
func NormalizeStream(s *Stream) error {
	if err := checkNames(s.TenantID, s.Namespace, s.Stream); err != nil {
		return err
	}
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.Kind, KindStream)
	def(&s.Consistency, ConsistencyLeader)
	def(&s.Delivery, DeliveryAtMostOnce)
	def(&s.Routing, "modulo")
	if s.Shards == 0 {
		s.Shards = 1
	}
	switch {
	case s.Kind != KindStream && s.Kind != KindQueue:
		return fmt.Errorf("%w: kind %q (Stream or Queue)", ErrInvalid, s.Kind)
	case s.Shards > 4096:
		return fmt.Errorf("%w: shards %d (1..4096)", ErrInvalid, s.Shards)
	case s.Consistency != ConsistencyLeader && s.Consistency != ConsistencyQuorum:
		return fmt.Errorf("%w: consistency %q (Leader or Quorum)", ErrInvalid, s.Consistency)
	case s.Delivery != DeliveryAtMostOnce && s.Delivery != DeliveryAtLeastOnce:
		return fmt.Errorf("%w: delivery %q (AtMostOnce or AtLeastOnce)", ErrInvalid, s.Delivery)
	case s.Routing != "modulo" && s.Routing != "jump_hash":
		return fmt.Errorf("%w: routing %q (modulo or jump_hash)", ErrInvalid, s.Routing)
	case s.Retention.MaxAgeSeconds != nil && *s.Retention.MaxAgeSeconds < 0,
		s.Retention.MaxSizeBytes != nil && *s.Retention.MaxSizeBytes < 0:
		return fmt.Errorf("%w: negative retention", ErrInvalid)
	}
	return nil
}

// checkStreamOptions refuses the option combinations a single node cannot honour
// (docs/operations.md, "Stream options"): kind Queue, consistency Quorum, delivery
// AtLeastOnce and a retention bound each need a durable stream, and max_age_seconds is
// at most maxRetentionSeconds. CreateStream and UpdateStream run it after
// NormalizeStream; a catalog file is not re-checked when it loads. Errors wrap
// ErrInvalid and name the field.
func checkStreamOptions(s Stream) error {
	if s.Retention.ageSeconds() > maxRetentionSeconds {
		return fmt.Errorf("%w: retention.max_age_seconds %d (at most %d)", ErrInvalid, s.Retention.ageSeconds(), maxRetentionSeconds)
	}
	if s.Durable {
		return nil
	}
	switch {
	case s.Kind == KindQueue:
		return fmt.Errorf("%w: kind Queue needs a durable stream (a queue is consumed through consumer groups, which keep their cursors beside the stream's log)", ErrInvalid)
	case s.Consistency == ConsistencyQuorum:
		return fmt.Errorf("%w: consistency Quorum needs a durable stream (a Quorum publish is acknowledged once it is on disk; an in-memory stream never is)", ErrInvalid)
	case s.Delivery == DeliveryAtLeastOnce:
		return fmt.Errorf("%w: delivery AtLeastOnce needs a durable stream (an in-memory stream loses its records at a restart)", ErrInvalid)
	case s.Retention.set():
		return fmt.Errorf("%w: retention needs a durable stream (an in-memory stream keeps a bounded replay ring instead)", ErrInvalid)
	}
	return nil
}

// CreateStream adds a stream to an existing namespace after NormalizeStream and
// checkStreamOptions; apply runs (under the catalog lock, before persisting) to create it
// in the engine, and its error aborts the creation. Errors: ErrInvalid, ErrNotFound
// (namespace), ErrExists, apply's.
func (c *Catalog) CreateStream(s Stream, apply func(Stream) error) (Stream, error) {
	if err := NormalizeStream(&s); err != nil {
		return s, err
	}
	if err := checkNewNames(s.TenantID, s.Namespace, s.Stream); err != nil {
		return s, err
	}
	if err := checkStreamOptions(s); err != nil {
		return s, err
	}
	err := c.mutate(func(f *catalogFile) error {
		if f.namespace(s.TenantID, s.Namespace) < 0 {
			return fmt.Errorf("%w: namespace %s/%s", ErrNotFound, s.TenantID, s.Namespace)
		}
		if f.stream(s.TenantID, s.Namespace, s.Stream) >= 0 {
			return fmt.Errorf("%w: stream %s/%s/%s", ErrExists, s.TenantID, s.Namespace, s.Stream)
		}
		if err := c.checkShardLimit(f, s.Shards); err != nil {
			return err
		}
		if apply != nil {
			if err := apply(s); err != nil {
				return err
			}
		}
		f.Streams = append(f.Streams, s)
		return nil
	})
	return s, err
}

// UpdateStream changes a stream through update, then NormalizeStream and
// checkStreamOptions (the admin API lets PATCH change delivery, and retention or
// consistency only to their current values). Errors: ErrNotFound, ErrInvalid, update's.
func (c *Catalog) UpdateStream(t, ns, name string, update func(*Stream) error) (Stream, error) {
	var out Stream
	err := c.mutate(func(f *catalogFile) error {
		i := f.stream(t, ns, name)
		if i < 0 {
			return fmt.Errorf("%w: stream %s/%s/%s", ErrNotFound, t, ns, name)
		}
		s := f.Streams[i]
		if err := update(&s); err != nil {
			return err
		}
		if err := NormalizeStream(&s); err != nil {
			return err
		}
		if err := checkStreamOptions(s); err != nil {
			return err
		}
		f.Streams[i] = s
		out = s
		return nil
	})
	return out, err
}

// DeleteStream removes a stream; apply deletes it from the engine first. Errors:
// ErrNotFound, apply's.
func (c *Catalog) DeleteStream(t, ns, name string, apply func(Stream) error) error {
	return c.mutate(func(f *catalogFile) error {
		i := f.stream(t, ns, name)
		if i < 0 {
			return fmt.Errorf("%w: stream %s/%s/%s", ErrNotFound, t, ns, name)
		}
		if apply != nil {
			if err := apply(f.Streams[i]); err != nil {
				return err
			}
		}
		f.Streams = append(f.Streams[:i], f.Streams[i+1:]...)
		return nil
	})
}

// Stream returns one stream. Errors: ErrNotFound.
func (c *Catalog) Stream(t, ns, name string) (Stream, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := c.file.stream(t, ns, name); i >= 0 {
		return c.file.Streams[i], nil
	}
	return Stream{}, fmt.Errorf("%w: stream %s/%s/%s", ErrNotFound, t, ns, name)
}

// Streams lists a namespace's streams sorted by name; t="" lists every stream.
func (c *Catalog) Streams(t, ns string) []Stream {
	c.mu.RLock()
	var out []Stream
	for _, s := range c.file.Streams {
		if t == "" || (s.TenantID == t && s.Namespace == ns) {
			out = append(out, s)
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.TenantID+"/"+a.Namespace+"/"+a.Stream < b.TenantID+"/"+b.Namespace+"/"+b.Stream
	})
	return out
}

// CreateCache adds a cache to an existing namespace; apply (may be nil) creates it in the
// engine first. Errors: ErrInvalid, ErrNotFound, ErrExists, apply's.
func (c *Catalog) CreateCache(x Cache, apply func(Cache) error) (Cache, error) {
	if err := checkNewNames(x.TenantID, x.Namespace, x.Cache); err != nil {
		return x, err
	}
	if x.DisplayName == "" {
		x.DisplayName = x.Cache
	}
	if x.Shards == 0 {
		x.Shards = 1
	}
	if x.Durable == nil {
		durable := true
		x.Durable = &durable
	}
	if x.Shards > 4096 {
		return x, fmt.Errorf("%w: shards %d (1..4096)", ErrInvalid, x.Shards)
	}
	err := c.mutate(func(f *catalogFile) error {
		if f.namespace(x.TenantID, x.Namespace) < 0 {
			return fmt.Errorf("%w: namespace %s/%s", ErrNotFound, x.TenantID, x.Namespace)
		}
		if f.cache(x.TenantID, x.Namespace, x.Cache) >= 0 {
			return fmt.Errorf("%w: cache %s/%s/%s", ErrExists, x.TenantID, x.Namespace, x.Cache)
		}
		if err := c.checkShardLimit(f, x.Shards); err != nil {
			return err
		}
		if apply != nil {
			if err := apply(x); err != nil {
				return err
			}
		}
		f.Caches = append(f.Caches, x)
		return nil
	})
	return x, err
}

// DeleteCache removes a cache; apply (may be nil) deletes it from the engine first.
// Errors: ErrNotFound, apply's.
func (c *Catalog) DeleteCache(t, ns, name string, apply func(Cache) error) error {
	return c.mutate(func(f *catalogFile) error {
		i := f.cache(t, ns, name)
		if i < 0 {
			return fmt.Errorf("%w: cache %s/%s/%s", ErrNotFound, t, ns, name)
		}
		if apply != nil {
			if err := apply(f.Caches[i]); err != nil {
				return err
			}
		}
		f.Caches = append(f.Caches[:i], f.Caches[i+1:]...)
		return nil
	})
}

// Cache returns one cache. Errors: ErrNotFound.
func (c *Catalog) Cache(t, ns, name string) (Cache, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if i := c.file.cache(t, ns, name); i >= 0 {
		return c.file.Caches[i], nil
	}
	return Cache{}, fmt.Errorf("%w: cache %s/%s/%s", ErrNotFound, t, ns, name)
}

// Caches lists a namespace's caches sorted by name; t="" lists every cache.
func (c *Catalog) Caches(t, ns string) []Cache {
	c.mu.RLock()
	var out []Cache
	for _, x := range c.file.Caches {
		if t == "" || (x.TenantID == t && x.Namespace == ns) {
			out = append(out, x)
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Cache < out[j].Cache })
	return out
}

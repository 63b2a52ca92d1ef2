package meta

import "fmt"

// Tenant is a tenant of the catalog (the broker admin API's shape).
type Tenant struct {
	TenantID    string `json:"tenant_id"`
	DisplayName string `json:"display_name"`
}

// Namespace is a namespace of a tenant.
type Namespace struct {
	TenantID    string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	DisplayName string `json:"display_name"`
}

// Retention is a stream's retention (seconds, bytes; nil = unbounded).
type Retention struct {
	MaxAgeSeconds *int64 `json:"max_age_seconds,omitempty"`
	MaxSizeBytes  *int64 `json:"max_size_bytes,omitempty"`
}

// Stream is a stream of the catalog: the broker admin API's fields plus
// replication_factor (issue 17 item 3) and incarnation (seed,
// "stream_incarnations": 0 until the feature is finalized). CreatedIndex is
// the Raft index of the create.
type Stream struct {
	TenantID          string    `json:"tenant_id"`
	Namespace         string    `json:"namespace"`
	Stream            string    `json:"stream"`
	Kind              string    `json:"kind"`
	Shards            uint32    `json:"shards"`
	Retention         Retention `json:"retention"`
	Consistency       string    `json:"consistency"`
	Delivery          string    `json:"delivery"`
	Durable           bool      `json:"durable"`
	Routing           string    `json:"routing"`
	ReplicationFactor int       `json:"replication_factor"`
	Incarnation       uint64    `json:"incarnation,omitempty"`
	CreatedIndex      uint64    `json:"created_index"`
}

// Cache is a cache of the catalog, with replication_factor and incarnation
// (seed, "cache_incarnations").
type Cache struct {
	TenantID          string `json:"tenant_id"`
	Namespace         string `json:"namespace"`
	Cache             string `json:"cache"`
	DisplayName       string `json:"display_name"`
	Shards            uint32 `json:"shards"`
	Durable           *bool  `json:"durable,omitempty"`
	ReplicationFactor int    `json:"replication_factor"`
	Incarnation       uint64 `json:"incarnation,omitempty"`
	CreatedIndex      uint64 `json:"created_index"`
}

// Tombstone records a deleted stream or cache name (Kind "stream" or
// "cache") and the incarnation deleted: the only thing that lets a broker
// remove data (seed, "stream_incarnations").
type Tombstone struct {
	Kind         string `json:"kind"`
	TenantID     string `json:"tenant_id"`
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Incarnation  uint64 `json:"incarnation"`
	DeletedIndex uint64 `json:"deleted_index"`
}

// Broker is a registered broker. Incarnation counts its accepted
// registrations (1 after the first); StorageID is kept only from entries at
// LevelIdentities; Features only from LevelFeatures. LastSeenMs is the
// at_ms of its last registration or heartbeat.
type Broker struct {
	NodeID          string            `json:"node_id"`
	StorageID       string            `json:"storage_id,omitempty"`
	ClientAddr      string            `json:"client_addr"`
	InternalAddr    string            `json:"internal_addr"`
	Features        []string          `json:"features"`
	Settings        map[string]string `json:"settings,omitempty"`
	MaxLevel        Level             `json:"max_level"`
	Incarnation     uint64            `json:"incarnation"`
	Draining        bool              `json:"draining"`
	LastSeenMs      int64             `json:"last_seen_ms"`
	RegisteredIndex uint64            `json:"registered_index"`
}

// ShardRef names one shard: Kind "stream" or "cache", the catalog name and
// the shard number.
type ShardRef struct {
	Kind      string `json:"kind"`
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Shard     uint32 `json:"shard"`
}

// Key is "kind/tenant/namespace/name/shard", the tables' key.
func (r ShardRef) Key() string {
	return fmt.Sprintf("%s/%s/%s/%s/%d", r.Kind, r.TenantID, r.Namespace, r.Name, r.Shard)
}

// Assignment is one shard's replica set: its leader, followers and
// generation, and the incarnation of the stream or cache it belongs to.
// Index is the Raft index that last set it.
type Assignment struct {
	ShardRef
	Incarnation uint64   `json:"incarnation,omitempty"`
	Leader      string   `json:"leader"`
	Followers   []string `json:"followers"`
	Generation  uint64   `json:"generation"`
	Index       uint64   `json:"index"`
}

// ReplicaState is one replica named in a report: its node, the storage
// identity it was counted under, its durable_offset, and (stamped reports)
// the node's incarnation when the report was applied.
type ReplicaState struct {
	NodeID        string `json:"node_id"`
	StorageID     string `json:"storage_id,omitempty"`
	DurableOffset uint64 `json:"durable_offset"`
	Incarnation   uint64 `json:"incarnation,omitempty"`
}

// Report is the latest replica report of a shard. Stamped reports (entries
// at LevelReportStamps) carry LeaderIncarnation and each replica's
// Incarnation (seed, "Storage identities during a roll").
type Report struct {
	ShardRef
	Leader            string         `json:"leader"`
	LeaderIncarnation uint64         `json:"leader_incarnation,omitempty"`
	Generation        uint64         `json:"generation"`
	Replicas          []ReplicaState `json:"replicas"`
	Stamped           bool           `json:"stamped"`
	AtMs              int64          `json:"at_ms"`
	Index             uint64         `json:"index"`
	FenceRefusal      *FenceRefusal  `json:"fence_refusal,omitempty"` // the leader's, at Generation
}

// FeatureState is a finalized fleet feature. Auto is set when the new-cluster
// rule finalized it.
type FeatureState struct {
	Name           string `json:"name"`
	FinalizedIndex uint64 `json:"finalized_index"`
	Auto           bool   `json:"auto"`
}

// Member is a control-plane member's reported metadata level.
type Member struct {
	ID    string `json:"id"`
	Level Level  `json:"level"`
	Index uint64 `json:"index"`
}

// Meta holds the state's scalars: the group's metadata floor, whether a
// stream or cache was ever created, whether a broker registered twice, and
// the at_ms of the first accepted registration (0 = none), which start the
// new-cluster rule's ten minutes.
type Meta struct {
	Floor               Level `json:"floor"`
	EverCreated         bool  `json:"ever_created"`
	RegisteredTwice     bool  `json:"registered_twice"`
	FirstRegistrationMs int64 `json:"first_registration_ms"`
}

// State is one point-in-time, immutable view of the state machine: a
// frozen go-memdb snapshot (O(1) to take) and the scalars. Every accessor
// returns copies sorted by key; a State is safe to keep, and to read from
// any goroutine, while Apply goes on.
type State struct {
	index       uint64
	meta        Meta
	st          *store
	tenants     table[Tenant]
	namespaces  table[Namespace]
	streams     table[Stream]
	caches      table[Cache]
	tombstones  table[Tombstone]
	brokers     table[Broker]
	assignments table[Assignment]
	reports     table[Report]
	features    table[FeatureState]
	members     table[Member]
	generations table[generationRecord]
}

// Index gives the Raft index of the last entry applied to the state.
func (s *State) Index() uint64 { return s.index }

// Meta gives the scalars.
func (s *State) Meta() Meta { return s.meta }

// Floor gives the group's metadata floor: the highest level a finalized
// feature or a committed entry needed.
func (s *State) Floor() Level { return s.meta.Floor }

// Tenants gives every tenant.
func (s *State) Tenants() []Tenant { return s.tenants.values() }

// Namespaces gives every namespace.
func (s *State) Namespaces() []Namespace { return s.namespaces.values() }

// Streams gives every stream.
func (s *State) Streams() []Stream { return s.streams.values() }

// Caches gives every cache.
func (s *State) Caches() []Cache { return s.caches.values() }

// Tombstones gives every tombstone.
func (s *State) Tombstones() []Tombstone { return s.tombstones.values() }

// Brokers gives every registered broker.
func (s *State) Brokers() []Broker { return s.brokers.values() }

// Broker gives one broker.
func (s *State) Broker(id string) (Broker, bool) { return s.brokers.get(id) }

// Assignments gives every shard assignment.
func (s *State) Assignments() []Assignment { return s.assignments.values() }

// Assignment gives one shard's assignment.
func (s *State) Assignment(r ShardRef) (Assignment, bool) { return s.assignments.get(r.Key()) }

// Reports gives every shard's latest replica report.
func (s *State) Reports() []Report { return s.reports.values() }

// Enabled gives the finalized features in the seed's order.
func (s *State) Enabled() []FeatureState {
	var out []FeatureState
	for _, f := range FeatureOrder {
		if st, ok := s.features.get(f); ok {
			out = append(out, st)
		}
	}
	return out
}

// IsEnabled reports whether feature is finalized.
func (s *State) IsEnabled(feature string) bool { _, ok := s.features.get(feature); return ok }

// Members gives every member's reported level.
func (s *State) Members() []Member { return s.members.values() }

// HighestGeneration gives the highest generation known for a shard (reported
// by a broker or assigned), and whether any is known.
func (s *State) HighestGeneration(r ShardRef) (uint64, bool) { return s.generation(r.Key()) }

// HighestGenerationKey is HighestGeneration by shard key (ShardRef.Key, the
// registration's and heartbeat's generations keys).
func (s *State) HighestGenerationKey(key string) (uint64, bool) { return s.generation(key) }

// generation gives the highest generation known under a shard key.
func (s *State) generation(key string) (uint64, bool) {
	g, ok := s.generations.get(key)
	return g.Generation, ok
}

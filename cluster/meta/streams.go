package meta

// CreateStream creates a stream with its initial placement (kind
// create_stream): the broker admin API's fields plus replication_factor
// (1..7, 0 = 1) and AtMs, the proposer's wall clock in Unix milliseconds,
// which decides which brokers are live. Defaults: kind Stream, 1 shard,
// consistency Leader, delivery AtMostOnce, routing jump_hash once
// jump_hash_routing is finalized and modulo before. Refusals: 400 invalid,
// 404 namespace, 409 exists or a name deleted before stream_incarnations
// (seed, "stream_incarnations"), 409 jump_hash below level 3, 503
// *PlacementError.
type CreateStream struct {
	TenantID          string    `json:"tenant_id"`
	Namespace         string    `json:"namespace"`
	Stream            string    `json:"stream"`
	StreamKind        string    `json:"kind,omitempty"`
	Shards            uint32    `json:"shards,omitempty"`
	Retention         Retention `json:"retention"`
	Consistency       string    `json:"consistency,omitempty"`
	Delivery          string    `json:"delivery,omitempty"`
	Durable           bool      `json:"durable"`
	Routing           string    `json:"routing,omitempty"`
	ReplicationFactor int       `json:"replication_factor,omitempty"`
	AtMs              int64     `json:"at_ms"`
}

// DeleteStream deletes a stream, leaving a tombstone (kind delete_stream).
// 404 when absent.
type DeleteStream struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
}

// Kind gives create_stream.
func (CreateStream) Kind() Kind { return KindCreateStream }

// Kind gives delete_stream.
func (DeleteStream) Kind() Kind { return KindDeleteStream }

// A jump_hash stream needs level 3; an incarnated create (stream_incarnations
// finalized) needs 10. A create naming no routing gains from level 3 even
// before jump_hash_routing is finalized: apply picks the default on the state
// it is applied to, which may have the finalize the proposer's did not, and
// an entry at 3 may then become a jump_hash stream (seed: "streams created
// from then on map routing keys to shards with jump consistent hashing").
func (c CreateStream) levels(s *State) (Level, Level) {
	req := LevelBase
	if c.Routing == "jump_hash" || (c.Routing == "" && s.IsEnabled(FeatureJumpHashRouting)) {
		req = LevelJumpHash
	}
	full := req
	if c.Routing == "" {
		full = LevelJumpHash
	}
	if s.IsEnabled(FeatureStreamIncarnations) {
		req = max(req, LevelDeleteShards)
		full = max(full, req)
	}
	return req, full
}

// atLevel gives the create as written in an entry at level: below level 3,
// where no jump_hash stream can be created, a create naming no routing names
// modulo, so a finalize applied between its proposal and its apply cannot turn
// it into a jump_hash stream its entry's level refuses (409 entry_level). A
// member below level 3 reads "modulo" as it read the default. The caller's
// command is not changed.
func (c *CreateStream) atLevel(level Level) Command {
	if c.Routing != "" || level >= LevelJumpHash {
		return c
	}
	pinned := *c
	pinned.Routing = "modulo"
	return &pinned
}

func (DeleteStream) levels(*State) (Level, Level) { return LevelBase, LevelDeleteShards }

func (c *CreateStream) normalize(s *State) error {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&c.StreamKind, "Stream")
	def(&c.Consistency, "Leader")
	def(&c.Delivery, "AtMostOnce")
	if c.Routing == "" && s.IsEnabled(FeatureJumpHashRouting) {
		c.Routing = "jump_hash"
	}
	def(&c.Routing, "modulo")
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	switch {
	case c.StreamKind != "Stream" && c.StreamKind != "Queue":
		return invalid("kind %q (Stream or Queue)", c.StreamKind)
	case c.Shards > 4096:
		return invalid("shards %d (1..4096)", c.Shards)
	case c.Consistency != "Leader" && c.Consistency != "Quorum":
		return invalid("consistency %q (Leader or Quorum)", c.Consistency)
	case c.Delivery != "AtMostOnce" && c.Delivery != "AtLeastOnce":
		return invalid("delivery %q (AtMostOnce or AtLeastOnce)", c.Delivery)
	case c.Routing != "modulo" && c.Routing != "jump_hash":
		return invalid("routing %q (modulo or jump_hash)", c.Routing)
	case c.Retention.MaxAgeSeconds != nil && *c.Retention.MaxAgeSeconds < 0,
		c.Retention.MaxSizeBytes != nil && *c.Retention.MaxSizeBytes < 0:
		return invalid("negative retention")
	case c.ReplicationFactor < 1 || c.ReplicationFactor > MaxReplicationFactor:
		return invalid("replication_factor %d (1..%d)", c.ReplicationFactor, MaxReplicationFactor)
	}
	return nil
}

// MaxReplicationFactor bounds replication_factor.
const MaxReplicationFactor = 7

func (c *CreateStream) apply(tx *txn) (any, error) {
	if err := checkNames(c.TenantID, c.Namespace, c.Stream); err != nil {
		return nil, err
	}
	if err := c.normalize(&tx.s); err != nil {
		return nil, err
	}
	if c.Routing == "jump_hash" && tx.level < LevelJumpHash {
		return nil, entryBelow("a jump_hash stream", LevelJumpHash, tx.level)
	}
	inc, err := tx.nextIncarnation("stream", c.TenantID, c.Namespace, c.Stream, FeatureStreamIncarnations)
	if err != nil {
		return nil, err
	}
	st := Stream{TenantID: c.TenantID, Namespace: c.Namespace, Stream: c.Stream, Kind: c.StreamKind, Shards: c.Shards,
		Retention: c.Retention, Consistency: c.Consistency, Delivery: c.Delivery, Durable: c.Durable,
		Routing: c.Routing, ReplicationFactor: c.ReplicationFactor, Incarnation: inc, CreatedIndex: tx.index}
	if err := tx.place("stream", c.TenantID, c.Namespace, c.Stream, c.Shards, c.ReplicationFactor, inc, c.AtMs); err != nil {
		return nil, err
	}
	key := c.TenantID + "/" + c.Namespace + "/" + c.Stream
	tx.s.streams.put(st)
	tx.s.meta.EverCreated = true
	tx.record("stream", OpUpsert, key, st)
	return st, nil
}

// nextIncarnation checks the namespace and the name and gives the new
// incarnation: 0 before feature is finalized (and then a tombstoned name is
// refused, 409), else one above the tombstone's (1 for a new name).
func (tx *txn) nextIncarnation(kind, tenant, ns, name, feature string) (uint64, error) {
	if _, ok := tx.s.namespaces.get(tenant + "/" + ns); !ok {
		return 0, notFound("namespace %s/%s not found", tenant, ns)
	}
	key := tenant + "/" + ns + "/" + name
	_, exists := tx.s.streams.get(key)
	if kind == "cache" {
		_, exists = tx.s.caches.get(key)
	}
	if exists {
		return 0, conflict("exists", "%s %s exists", kind, key)
	}
	tomb, deleted := tx.s.tombstones.get(kind + "/" + key)
	if !tx.s.IsEnabled(feature) {
		if deleted {
			return 0, conflict("name_deleted", "%s %s was deleted since this release; finalize %s first, "+
				"or a %s created again under the name would reopen the deleted one's data", kind, key, feature, kind)
		}
		return 0, nil
	}
	return tomb.Incarnation + 1, nil
}

func (c *DeleteStream) apply(tx *txn) (any, error) {
	key := c.TenantID + "/" + c.Namespace + "/" + c.Stream
	st, ok := tx.s.streams.get(key)
	if !ok {
		return nil, notFound("stream %s not found", key)
	}
	tx.deleteNamed("stream", st.TenantID, st.Namespace, st.Stream, st.Incarnation)
	return nil, nil
}

// CreateCache creates a cache with its initial placement (kind
// create_cache); shards 1..4096 (0 = 1), replication_factor as for streams,
// AtMs the proposer's wall clock. Refusals as CreateStream's, with
// cache_incarnations for the deleted-name rule.
type CreateCache struct {
	TenantID          string `json:"tenant_id"`
	Namespace         string `json:"namespace"`
	Cache             string `json:"cache"`
	DisplayName       string `json:"display_name"`
	Shards            uint32 `json:"shards,omitempty"`
	Durable           *bool  `json:"durable,omitempty"`
	ReplicationFactor int    `json:"replication_factor,omitempty"`
	AtMs              int64  `json:"at_ms"`
}

// DeleteCache deletes a cache, leaving a tombstone (kind delete_cache).
type DeleteCache struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Cache     string `json:"cache"`
}

// Kind gives create_cache.
func (CreateCache) Kind() Kind { return KindCreateCache }

// Kind gives delete_cache.
func (DeleteCache) Kind() Kind { return KindDeleteCache }

// An incarnated cache create (cache_incarnations finalized) needs level 14.
func (c CreateCache) levels(s *State) (Level, Level) {
	if s.IsEnabled(FeatureCacheIncarnations) {
		return LevelCacheIncarnat, LevelCacheIncarnat
	}
	return LevelBase, LevelBase
}

func (DeleteCache) levels(*State) (Level, Level) { return LevelBase, LevelDeleteShards }

func (c *CreateCache) apply(tx *txn) (any, error) {
	if err := checkNames(c.TenantID, c.Namespace, c.Cache); err != nil {
		return nil, err
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.Shards > 4096 || c.ReplicationFactor < 1 || c.ReplicationFactor > MaxReplicationFactor {
		return nil, invalid("shards %d (1..4096), replication_factor %d (1..%d)", c.Shards, c.ReplicationFactor, MaxReplicationFactor)
	}
	inc, err := tx.nextIncarnation("cache", c.TenantID, c.Namespace, c.Cache, FeatureCacheIncarnations)
	if err != nil {
		return nil, err
	}
	if err := tx.place("cache", c.TenantID, c.Namespace, c.Cache, c.Shards, c.ReplicationFactor, inc, c.AtMs); err != nil {
		return nil, err
	}
	ca := Cache{TenantID: c.TenantID, Namespace: c.Namespace, Cache: c.Cache, DisplayName: c.DisplayName,
		Shards: c.Shards, Durable: c.Durable, ReplicationFactor: c.ReplicationFactor, Incarnation: inc, CreatedIndex: tx.index}
	key := c.TenantID + "/" + c.Namespace + "/" + c.Cache
	tx.s.caches.put(ca)
	tx.s.meta.EverCreated = true
	tx.record("cache", OpUpsert, key, ca)
	return ca, nil
}

func (c *DeleteCache) apply(tx *txn) (any, error) {
	key := c.TenantID + "/" + c.Namespace + "/" + c.Cache
	ca, ok := tx.s.caches.get(key)
	if !ok {
		return nil, notFound("cache %s not found", key)
	}
	tx.deleteNamed("cache", ca.TenantID, ca.Namespace, ca.Cache, ca.Incarnation)
	return nil, nil
}

package meta

import "slices"

// RegisterBroker registers a broker or registers it again (kind
// register_broker): its node id, the storage identity of its data directory,
// its client and internal advertised addresses, the fleet features it
// implements, the settings that dropped features (FELIX_QUORUM_READS,
// FELIX_INTERNAL_FENCE), per shard (ShardRef.Key) the highest generation it
// has seen, its build's max metadata level, and AtMs, the proposer's wall
// clock (Unix ms). Features are kept from level 2, StorageID from level 12.
// Refusals: 400 bad node id, 409 *RegistrationError when it lacks an enabled
// feature (seed, "Fleet features", "A new cluster").
type RegisterBroker struct {
	NodeID       string            `json:"node_id"`
	StorageID    string            `json:"storage_id,omitempty"`
	ClientAddr   string            `json:"client_addr"`
	InternalAddr string            `json:"internal_addr"`
	Features     []string          `json:"features"`
	Settings     map[string]string `json:"settings,omitempty"`
	Generations  map[string]uint64 `json:"generations,omitempty"`
	MaxLevel     Level             `json:"max_level"`
	AtMs         int64             `json:"at_ms"`
}

// Kind gives register_broker.
func (RegisterBroker) Kind() Kind { return KindRegisterBroker }

func (RegisterBroker) levels(*State) (Level, Level) { return LevelBase, LevelIdentities }

func (c *RegisterBroker) apply(tx *txn) (any, error) {
	if err := checkNames(c.NodeID); err != nil {
		return nil, err
	}
	var features []string
	if tx.level >= LevelFeatures {
		features = slices.Sorted(slices.Values(c.Features))
		features = slices.Compact(features)
	}
	if err := checkRegistration(&tx.s, c.NodeID, features, c.Settings); err != nil {
		return nil, err
	}
	b, again := tx.s.brokers.get(c.NodeID)
	if again {
		tx.s.meta.RegisteredTwice = true
	}
	b = Broker{NodeID: c.NodeID, ClientAddr: c.ClientAddr, InternalAddr: c.InternalAddr, Features: features,
		Settings: c.Settings, MaxLevel: c.MaxLevel, Incarnation: b.Incarnation + 1, LastSeenMs: c.AtMs,
		RegisteredIndex: tx.index}
	if tx.level >= LevelIdentities {
		b.StorageID = c.StorageID
	}
	if tx.s.meta.FirstRegistrationMs == 0 {
		tx.s.meta.FirstRegistrationMs = max(c.AtMs, 1)
	}
	for _, k := range slices.Sorted(mapKeys(c.Generations)) {
		tx.noteGenerationKey(k, c.Generations[k])
	}
	tx.s.brokers.put(b)
	tx.record("broker", OpUpsert, b.NodeID, b)
	return b, nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (tx *txn) noteGenerationKey(key string, g uint64) {
	if hi, ok := tx.s.generation(key); !ok || g > hi {
		tx.s.generations.put(generationRecord{Key: key, Generation: g})
	}
}

// Heartbeat marks a registered broker seen at AtMs (Unix ms), draining or
// not, and raises the highest generations it has seen (kind heartbeat). 404
// when the broker is not registered. A heartbeat is in the feed only when
// Draining changes.
type Heartbeat struct {
	NodeID      string            `json:"node_id"`
	Draining    bool              `json:"draining"`
	Generations map[string]uint64 `json:"generations,omitempty"`
	AtMs        int64             `json:"at_ms"`
}

// Kind gives heartbeat.
func (Heartbeat) Kind() Kind { return KindHeartbeat }

func (Heartbeat) levels(*State) (Level, Level) { return LevelBase, LevelBase }

func (c *Heartbeat) apply(tx *txn) (any, error) {
	b, ok := tx.s.brokers.get(c.NodeID)
	if !ok {
		return nil, notFound("broker %s is not registered", c.NodeID)
	}
	changed := b.Draining != c.Draining
	b.Draining = c.Draining
	b.LastSeenMs = max(b.LastSeenMs, c.AtMs)
	for _, k := range slices.Sorted(mapKeys(c.Generations)) {
		tx.noteGenerationKey(k, c.Generations[k])
	}
	tx.s.brokers.put(b)
	if changed {
		tx.record("broker", OpUpsert, b.NodeID, b)
	}
	return b, nil
}

// ReplicaReport is a shard leader's report of its replicas (kind
// replica_report): the shard, the leader that made it, its generation, each
// replica's node, storage identity and durable_offset, and AtMs. From level
// 13 the control plane stamps it with the leader's and every named node's
// incarnation; from level 12 it keeps the storage identities (seed, "Storage
// identities during a roll"). Refusals: 404 unknown shard or leader, 409 a
// generation below the shard's assignment.
type ReplicaReport struct {
	ShardRef
	Leader     string         `json:"leader"`
	Generation uint64         `json:"generation"`
	Replicas   []ReplicaState `json:"replicas"`
	AtMs       int64          `json:"at_ms"`
	// FenceRefusal, when set, says the leader's fence round at Generation refused to
	// open (issue 20, known gap 1): kept with the report for placement.
	FenceRefusal *FenceRefusal `json:"fence_refusal,omitempty"`
}

// FenceRefusal is a promoted leader's refusal to open: a fenced replica, Ahead, holds
// the gating log at AheadDurable (durable_offset) with newest record of AheadGeneration,
// ahead of the leader (docs/failover.md, "Fence rounds").
type FenceRefusal struct {
	Ahead           string `json:"ahead"`
	AheadDurable    uint64 `json:"ahead_durable"`
	AheadGeneration uint64 `json:"ahead_generation"`
}

// Kind gives replica_report.
func (ReplicaReport) Kind() Kind { return KindReplicaReport }

func (ReplicaReport) levels(*State) (Level, Level) { return LevelBase, LevelReportStamps }

func (c *ReplicaReport) apply(tx *txn) (any, error) {
	a, ok := tx.s.assignments.get(c.Key())
	if !ok {
		return nil, notFound("shard %s has no assignment", c.Key())
	}
	leader, ok := tx.s.brokers.get(c.Leader)
	if !ok {
		return nil, notFound("broker %s is not registered", c.Leader)
	}
	if c.Generation < a.Generation {
		return nil, conflict("stale_generation", "report for %s at generation %d; the shard is at %d",
			c.Key(), c.Generation, a.Generation)
	}
	r := Report{ShardRef: c.ShardRef, Leader: c.Leader, Generation: c.Generation, AtMs: c.AtMs, Index: tx.index,
		Stamped: tx.level >= LevelReportStamps, FenceRefusal: c.FenceRefusal}
	if r.Stamped {
		r.LeaderIncarnation = leader.Incarnation
	}
	for _, rep := range c.Replicas {
		if tx.level < LevelIdentities {
			rep.StorageID = ""
		}
		rep.Incarnation = 0
		if b, ok := tx.s.brokers.get(rep.NodeID); ok && r.Stamped {
			rep.Incarnation = b.Incarnation
		}
		r.Replicas = append(r.Replicas, rep)
	}
	tx.s.reports.put(r)
	tx.noteGeneration(c.ShardRef, c.Generation)
	return r, nil
}

// SetAssignment replaces an existing shard's replica set (kind
// set_assignment; the placement issue's failover builds on it). Refusals:
// 404 no assignment, 400 an unregistered or repeated broker, 409 a
// generation below the shard's or below the highest a broker reported.
type SetAssignment struct {
	ShardRef
	Leader     string   `json:"leader"`
	Followers  []string `json:"followers"`
	Generation uint64   `json:"generation"`
}

// Kind gives set_assignment.
func (SetAssignment) Kind() Kind { return KindSetAssignment }

func (SetAssignment) levels(*State) (Level, Level) { return LevelBase, LevelBase }

func (c *SetAssignment) apply(tx *txn) (any, error) {
	a, ok := tx.s.assignments.get(c.Key())
	if !ok {
		return nil, notFound("shard %s has no assignment", c.Key())
	}
	set := append([]string{c.Leader}, c.Followers...)
	for i, id := range set {
		if _, ok := tx.s.brokers.get(id); !ok {
			return nil, invalid("broker %s is not registered", id)
		}
		if slices.Contains(set[:i], id) {
			return nil, invalid("broker %s is twice in the replica set", id)
		}
	}
	if hi, _ := tx.s.generation(c.Key()); c.Generation < a.Generation || c.Generation < hi {
		return nil, conflict("stale_generation", "generation %d for %s is below %d",
			c.Generation, c.Key(), max(a.Generation, hi))
	}
	a.Leader, a.Followers, a.Generation, a.Index = c.Leader, slices.Clone(c.Followers), c.Generation, tx.index
	tx.putAssignment(a)
	return a, nil
}

// MemberLevelReport records a control-plane member's metadata level (kind
// member_level_report): the Raft wrapper proposes one when a member starts
// or reports a new build.
type MemberLevelReport struct {
	MemberID string `json:"member_id"`
	Level    Level  `json:"level"`
}

// Kind gives member_level_report.
func (MemberLevelReport) Kind() Kind { return KindMemberLevelReport }

func (MemberLevelReport) levels(*State) (Level, Level) { return LevelBase, LevelBase }

func (c *MemberLevelReport) apply(tx *txn) (any, error) {
	if c.MemberID == "" {
		return nil, invalid("member_id is empty")
	}
	m := Member{ID: c.MemberID, Level: c.Level, Index: tx.index}
	tx.s.members.put(m)
	tx.record("member", OpUpsert, m.ID, m)
	return m, nil
}

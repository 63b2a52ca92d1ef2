package meta

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The fleet features (seed, "Fleet features"; spec/config.md §9).
const (
	FeatureJumpHashRouting         = "jump_hash_routing"
	FeatureGenerationStart         = "generation_start"
	FeatureMajorityAck             = "majority_ack"
	FeatureLeaseFreeReads          = "lease_free_reads"
	FeatureFencedCaches            = "fenced_caches"
	FeaturePublisherPrincipal      = "publisher_principal"
	FeatureGroupCursorDependencies = "group_cursor_dependencies"
	FeatureAtomicCommit            = "atomic_commit"
	FeatureStreamIncarnations      = "stream_incarnations"
	FeatureCacheIncarnations       = "cache_incarnations"
)

// FeatureOrder is the order a new cluster finalizes in (spec/config.md §9's
// table): every prerequisite comes before the features that need it.
var FeatureOrder = []string{
	FeatureJumpHashRouting, FeatureGenerationStart, FeatureMajorityAck, FeatureLeaseFreeReads,
	FeatureFencedCaches, FeaturePublisherPrincipal, FeatureGroupCursorDependencies, FeatureAtomicCommit,
	FeatureStreamIncarnations, FeatureCacheIncarnations,
}

// featurePrerequisites are the features that must be enabled first (seed:
// majority_ack needs generation_start; lease_free_reads and fenced_caches
// need both).
var featurePrerequisites = map[string][]string{
	FeatureMajorityAck:    {FeatureGenerationStart},
	FeatureLeaseFreeReads: {FeatureGenerationStart, FeatureMajorityAck},
	FeatureFencedCaches:   {FeatureGenerationStart, FeatureMajorityAck},
}

// Prerequisites gives the features feature needs enabled first.
func Prerequisites(feature string) []string { return slices.Clone(featurePrerequisites[feature]) }

// KnownFeature reports whether this build knows feature.
func KnownFeature(feature string) bool { return slices.Contains(FeatureOrder, feature) }

// FeatureLevel gives the metadata level every member must be at to finalize
// feature, which the group's floor rises to once it is: 10 for
// stream_incarnations, 3 for jump_hash_routing, 14 for cache_incarnations
// (its own paragraph: "refuses the finalize with 409 until every member is
// at metadata version 14"), 2 for the others.
func FeatureLevel(feature string) Level {
	switch feature {
	case FeatureStreamIncarnations:
		return LevelDeleteShards
	case FeatureJumpHashRouting:
		return LevelJumpHash
	case FeatureCacheIncarnations:
		return LevelCacheIncarnat
	}
	return LevelFeatures
}

// CheckFinalize gives the reasons feature cannot be finalized on s at nowMs
// (Unix ms; brokers down by then are not counted), or nil: an unknown
// feature, a prerequisite not enabled, a member below FeatureLevel, a live
// or draining broker that does not report it (seed, "Runbook: rolling out a
// fleet feature"). The dry run is this call. A feature already enabled
// passes (finalizing is idempotent and one-way).
func CheckFinalize(s *State, feature string, nowMs int64, liveness time.Duration) *FinalizeError {
	if !KnownFeature(feature) {
		return &FinalizeError{Feature: feature, Unknown: true}
	}
	if s.IsEnabled(feature) {
		return nil
	}
	e := &FinalizeError{Feature: feature, LevelNeeded: FeatureLevel(feature)}
	for _, p := range featurePrerequisites[feature] {
		if !s.IsEnabled(p) {
			e.MissingPrerequisites = append(e.MissingPrerequisites, p)
		}
	}
	for _, m := range s.members.values() {
		if m.Level < e.LevelNeeded {
			e.LowMember, e.LowLevel = m.ID, m.Level
			break
		}
	}
	e.Lacking = LackingBrokers(s, feature, nowMs, liveness)
	if len(e.MissingPrerequisites) == 0 && e.LowMember == "" && len(e.Lacking) == 0 {
		return nil
	}
	return e
}

// LackingBrokers names the live or draining brokers at nowMs that do not
// report feature, sorted; a down broker is not counted (seed: "A broker that
// is down is not counted, and will be refused if it comes back").
func LackingBrokers(s *State, feature string, nowMs int64, liveness time.Duration) []string {
	var out []string
	for _, b := range s.brokers.values() {
		if BrokerState(b, nowMs, liveness) != "down" && !slices.Contains(b.Features, feature) {
			out = append(out, b.NodeID)
		}
	}
	return out
}

// FinalizeFeature enables a fleet feature, one-way (kind finalize_feature):
// Auto is set by the new-cluster rule, which the state refuses (409 code
// not_new) once a stream or cache was created or a broker registered twice.
// AtMs (Unix ms) decides which brokers are live. The entry's level is
// FeatureLevel. Refusals: *FinalizeError (409, 404 unknown).
type FinalizeFeature struct {
	Feature string `json:"feature"`
	Auto    bool   `json:"auto,omitempty"`
	AtMs    int64  `json:"at_ms"`
}

// Kind gives finalize_feature.
func (FinalizeFeature) Kind() Kind { return KindFinalizeFeature }

func (c FinalizeFeature) levels(*State) (Level, Level) {
	l := FeatureLevel(c.Feature)
	return l, l
}

func (c *FinalizeFeature) apply(tx *txn) (any, error) {
	if e := CheckFinalize(&tx.s, c.Feature, c.AtMs, tx.cfg.LivenessTimeout); e != nil {
		return nil, e
	}
	if st, ok := tx.s.features.get(c.Feature); ok {
		return st, nil
	}
	if c.Auto && !IsNewCluster(&tx.s) {
		return nil, conflict("not_new", "fleet feature %s: the cluster is no longer new "+
			"(a stream or cache was created, or a broker registered twice); finalize it with the runbook", c.Feature)
	}
	if tx.level < FeatureLevel(c.Feature) {
		return nil, entryBelow("finalizing "+c.Feature, FeatureLevel(c.Feature), tx.level)
	}
	st := FeatureState{Name: c.Feature, FinalizedIndex: tx.index, Auto: c.Auto}
	tx.s.features.put(st)
	tx.s.meta.Floor = max(tx.s.meta.Floor, FeatureLevel(c.Feature))
	tx.record("feature", OpUpsert, c.Feature, st)
	return st, nil
}

// RegistrationError refuses a broker that lacks an enabled feature (seed,
// "Fleet features" and "A new cluster: the first broker's configuration
// wins"; HTTPStatus 409). Missing is in FeatureOrder; Settings are the
// broker's reported settings, which add the seed's hint for
// FELIX_QUORUM_READS=lease and FELIX_INTERNAL_FENCE=false.
type RegistrationError struct {
	NodeID   string
	Missing  []string
	Settings map[string]string
}

// HTTPStatus is 409.
func (e *RegistrationError) HTTPStatus() int { return statusConflict }

// Error is the seed's message, on one line.
func (e *RegistrationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s does not support fleet feature(s) %s that the fleet has enabled; "+
		"run a build that has them, since an enabled feature cannot be disabled", e.NodeID, strings.Join(e.Missing, ", "))
	if e.Settings["FELIX_INTERNAL_FENCE"] == "false" && slices.Contains(e.Missing, FeatureMajorityAck) {
		b.WriteString("; a broker started with FELIX_INTERNAL_FENCE=false does not support majority_ack: " +
			"unset FELIX_INTERNAL_FENCE (the default fences on promotion) and restart the broker")
	}
	if e.Settings["FELIX_QUORUM_READS"] == "lease" && slices.Contains(e.Missing, FeatureLeaseFreeReads) {
		b.WriteString("; a broker started with FELIX_QUORUM_READS=lease does not support lease_free_reads: " +
			"unset FELIX_QUORUM_READS (the default reads by a round) and restart the broker")
	}
	return b.String()
}

// checkRegistration refuses a broker without every enabled feature.
func checkRegistration(s *State, node string, features []string, settings map[string]string) error {
	var missing []string
	for _, f := range s.Enabled() {
		if !slices.Contains(features, f.Name) {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &RegistrationError{NodeID: node, Missing: missing, Settings: settings}
}

// IsNewCluster reports the seed's "new cluster" on the state: no stream or
// cache was ever created and no broker has registered twice ("A new cluster
// starts with them finalized"). Every member running this release is
// AutoFinalizePlan's check, since only the Raft wrapper knows the voters.
func IsNewCluster(s *State) bool { return !s.meta.EverCreated && !s.meta.RegisteredTwice }

package checker

import (
	"fmt"
	"sort"
	"strings"

	"felix/testbed/history"
)

// Anomaly names a kind of finding; the package doc says how each is detected.
type Anomaly string

// The anomalies the checkers report.
const (
	LostWrite          Anomaly = "lost-write"                   // acked, at or below a read offset, never read
	Duplicate          Anomaly = "duplicate"                    // one payload at two offsets
	InconsistentOffset Anomaly = "inconsistent-offset"          // two payloads at one offset
	NonMonotonicRead   Anomaly = "non-monotonic-read"           // a subscription's offsets went backwards (or repeated)
	SkippedRead        Anomaly = "skipped-read"                 // an unflagged gap in a subscription
	DirtyRead          Anomaly = "dirty-read"                   // a read of a payload whose every publish definitely failed
	Unseen             Anomaly = "unseen"                       // acked, never read, though final reads ran
	ReplicasDiverged   Anomaly = "replicas-diverged"            // replicas' committed logs differ
	NonLinearCache     Anomaly = "non-linearizable-cache"       // a cache key's operations have no linearization
	NonLinearCounter   Anomaly = "non-linearizable-counter"     // a counter's operations have no linearization
	NonLinearCatalog   Anomaly = "non-linearizable-catalog"     // a catalog entry's operations have no linearization
	NonLinearStream    Anomaly = "non-linearizable-stream-read" // a point-read stream offset's operations have none
	GroupSkip          Anomaly = "group-skip"                   // a group acked past (or acked) an offset it never delivered
	GroupUndelivered   Anomaly = "group-undelivered"            // an owed offset never delivered, though final polls ran
	GroupEarlyDead     Anomaly = "group-early-dead-letter"      // dead-lettered before max_deliveries deliveries
)

// Finding is one anomaly found in a history.
//
// Stream and Shard name the stream shard (stream findings, group findings,
// stream-read linearizability); Object names the cache key, counter, catalog
// entry or group ("cache c key k", "group g"). Offsets are the stream offsets
// involved, ascending. Ops are the history indices (Op.Index) of the
// operations involved, ascending. Visualization is the path of porcupine's
// HTML file for a linearizability finding, when one was written.
type Finding struct {
	Anomaly       Anomaly  `json:"anomaly"`
	Stream        string   `json:"stream,omitempty"`
	Shard         int      `json:"shard"`
	Object        string   `json:"object,omitempty"`
	Offsets       []uint64 `json:"offsets,omitempty"`
	Ops           []int    `json:"ops,omitempty"`
	Detail        string   `json:"detail,omitempty"`
	Visualization string   `json:"visualization,omitempty"`
}

// String renders the finding on one line:
// "anomaly stream s shard n [object] offsets [..] ops [..]: detail".
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(string(f.Anomaly))
	if f.Stream != "" {
		fmt.Fprintf(&b, " stream %s shard %d", f.Stream, f.Shard)
	}
	if f.Object != "" {
		fmt.Fprintf(&b, " %s", f.Object)
	}
	if len(f.Offsets) > 0 {
		fmt.Fprintf(&b, " offsets %s", listString(f.Offsets, 16))
	}
	if len(f.Ops) > 0 {
		fmt.Fprintf(&b, " ops %s", listString(f.Ops, 16))
	}
	if f.Detail != "" {
		fmt.Fprintf(&b, ": %s", f.Detail)
	}
	if f.Visualization != "" {
		fmt.Fprintf(&b, " (visualization %s)", f.Visualization)
	}
	return b.String()
}

// listString prints at most limit elements of xs, then "... (n in all)".
func listString[T any](xs []T, limit int) string {
	if len(xs) <= limit {
		return fmt.Sprint(xs)
	}
	return fmt.Sprintf("%v ... (%d in all)", xs[:limit], len(xs))
}

// sortFindings orders findings by anomaly, stream, shard, object, first
// offset, first op: a stable report for one history.
func sortFindings(fs []Finding) {
	first := func(xs []uint64) uint64 {
		if len(xs) == 0 {
			return 0
		}
		return xs[0]
	}
	firstOp := func(xs []int) int {
		if len(xs) == 0 {
			return -1
		}
		return xs[0]
	}
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		switch {
		case a.Anomaly != b.Anomaly:
			return a.Anomaly < b.Anomaly
		case a.Stream != b.Stream:
			return a.Stream < b.Stream
		case a.Shard != b.Shard:
			return a.Shard < b.Shard
		case a.Object != b.Object:
			return a.Object < b.Object
		case first(a.Offsets) != first(b.Offsets):
			return first(a.Offsets) < first(b.Offsets)
		}
		return firstOp(a.Ops) < firstOp(b.Ops)
	})
}

// opIndices maps positions in h.Ops to Op.Index values, sorted and deduplicated.
func opIndices(h *history.History, positions []int) []int {
	out := make([]int, 0, len(positions))
	for _, p := range positions {
		out = append(out, h.Ops[p].Index)
	}
	return sortedUnique(out)
}

// sortedUnique sorts xs and drops repeats, in place.
func sortedUnique[T int | uint64](xs []T) []T {
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

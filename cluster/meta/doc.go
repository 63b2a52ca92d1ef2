// Package meta is the control plane's state machine: the catalog (tenants,
// namespaces, streams, caches and their tombstones), placement (each shard's
// leader, followers and generation), the registered brokers with their
// storage identities, replica reports, fleet features and metadata levels
// (docs/controlplane.md; issue 17 items 2, 4, 5 and 6;
// ../shared/seeds/upgrades-and-compatibility.txt, "Fleet features",
// "A new cluster", the metadata-version paragraphs, "Storage identities
// during a roll").
//
// The package is pure: no goroutines, clocks, I/O or global randomness
// (listed in tidy_test.go's purePackages). Time comes in as an argument:
// a command that needs it carries the proposer's wall clock (at_ms), so
// every member applies the same entry to the same state.
//
// A log entry is [kind u16][minimum metadata level u16][strict JSON body]
// (big-endian; entry.go). FSM.Apply applies one committed entry; a kind or
// level this build does not know, or a body it cannot read, is a *FatalError
// the Raft wrapper turns into "log and exit". A command the state refuses
// (a name taken, a finalize with a lacking broker) is not fatal: it lands in
// Result.Err with its HTTP status and leaves the state unchanged.
//
// State is held in plain maps with copy-on-write per table (state.go)
// rather than hashicorp/go-memdb: a snapshot is a shallow copy that marks
// every table shared, and the next write to a shared table copies that
// table first. Snapshots therefore cost O(tables) to take and one table
// copy per table written afterwards.
package meta

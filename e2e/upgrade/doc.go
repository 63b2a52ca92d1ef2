// Package upgrade is issue 21's upgrade test across builds (Deliver 3; seeds/upgrades-and-compatibility.txt,
// docs/upgrades.md): TestMain builds the previous release's felix-broker, felix and felix-controlplane from
// git (a worktree of the release's commit in a temp dir, removed afterwards) and the current ones, once; the
// tests then run them side by side as processes on 127.0.0.1, on each of the seed's five surfaces, old
// against new and the reverse:
//
//   - client protocol (client_test.go): the old felix CLI against the new broker and the new CLI against
//     the old broker: both work, the feature the other side lacks is absent (a typed answer, no hang);
//   - internal protocol (internal_test.go): a kind the old broker does not know is answered UnsupportedKind
//     on a stream it keeps; a static cluster of one broker of each build forwards in both directions (the
//     new dialler's StorageHello falls back to Hello); the forwarder's one legacy re-send against an owner
//     without kind 22;
//   - control-plane REST (controlplane_test.go): an old broker against the new control plane and a new
//     broker against the old one register, heartbeat, and serve a replicated stream;
//   - fleet features (fleet_test.go): a rolling upgrade stopped half-way and reversed changes nothing, a
//     finalize is refused while a serving broker lacks the feature, and an old broker registering after the
//     finalize gets 409 and exits;
//   - storage format (storage_test.go): the new build reads what the old one wrote; a segment at a version
//     newer than either build reads is refused by both.
//
// Where the previous release predates a piece (or both builds have the same one), the test says so with
// t.Log and uses a stand-in for the newer piece instead; it never skips silently. The package runs only
// with FELIX_UPGRADE_E2E=1 (make upgrade-e2e; .ci/run): it builds a second copy of the module. The
// release is the one before the newest in testdata/releases.txt (found by its tag, else by its commit);
// FELIX_UPGRADE_FROM=<tag> picks another.
package upgrade

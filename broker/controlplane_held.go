package broker

// What a cluster-mode broker holds of the control plane across restarts (controlplane.go):
// after every install the mirror is written to <data>/controlplane.json (the snapshot
// shape plus the feed position), so a broker restarted while the control plane is away
// starts from its last view of the catalog and placement instead of waiting: it installs
// the held state before its engine opens, becomes ready, and registers in the background
// (a 409 then still stops it). A first start (no file) waits for its registration and the first snapshot.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"felix/cluster/meta/metaclient"
)

// heldFile is the held state's file in the data dir.
const heldFile = "controlplane.json"

// heldState is the file's JSON: the mirror as a snapshot at its seq and epoch.
type heldState struct {
	Version  int                 `json:"version"` // 1
	Snapshot metaclient.Snapshot `json:"snapshot"`
}

// snapshot is the mirror in the snapshot's shape (its seq and epoch included).
func (m *cpMirror) snapshot() metaclient.Snapshot {
	return metaclient.Snapshot{Seq: m.seq, Epoch: m.epoch, Tenants: values(m.tenants), Namespaces: values(m.namespaces),
		Streams: values(m.streams), Caches: values(m.caches), Tombstones: values(m.tombstones),
		Assignments: values(m.assignments), Brokers: values(m.brokers), Features: values(m.features)}
}

// values lists a table's rows (in no order).
func values[V any](table map[string]V) []V { return slices.Collect(maps.Values(table)) }

// saveHeld writes the mirror to the held file (atomically); a failure is logged: the
// broker keeps running, and a restart then waits for the control plane.
func (cp *controlPlane) saveHeld() {
	cp.mu.Lock()
	data, err := json.Marshal(heldState{Version: 1, Snapshot: cp.mirror.snapshot()})
	cp.mu.Unlock()
	if err == nil {
		err = WriteFileAtomic(filepath.Join(cp.s.cfg.DataDir, heldFile), data)
	}
	if err != nil {
		cp.s.log.Warn("control-plane state not written to the data dir (a restart waits for the control plane)", "err", err)
	}
}

// loadHeld reads the held file: ok=false when there is none. Errors: a file that does not
// read or decode, or of another version (the broker then waits for the control plane).
func (cp *controlPlane) loadHeld() (metaclient.Snapshot, bool, error) {
	data, err := os.ReadFile(filepath.Join(cp.s.cfg.DataDir, heldFile))
	if errors.Is(err, fs.ErrNotExist) {
		return metaclient.Snapshot{}, false, nil
	}
	if err != nil {
		return metaclient.Snapshot{}, false, err
	}
	var h heldState
	if err := json.Unmarshal(data, &h); err != nil {
		return metaclient.Snapshot{}, false, fmt.Errorf("%s: %w", heldFile, err)
	}
	if h.Version != 1 {
		return metaclient.Snapshot{}, false, fmt.Errorf("%s: version %d, want 1", heldFile, h.Version)
	}
	return h.Snapshot, true, nil
}

// installHeld, before the engine opens (openControlPlane), puts the held state in place:
// the mirror, the ownership table and the peers, so the first reconcile pass opens the
// shards the broker held (the catalog file already holds what was installed with it).
// Reports whether there was one.
func (cp *controlPlane) installHeld() bool {
	snap, ok, err := cp.loadHeld()
	if err != nil {
		cp.s.log.Warn("control-plane state held in the data dir not read: waiting for the control plane", "err", err)
	}
	if !ok || err != nil {
		return false
	}
	m := mirrorOf(snap)
	owners := m.ownership()
	cp.mu.Lock()
	cp.mirror = m
	cp.mu.Unlock()
	cp.owners.Store(&owners)
	cp.cursor.Store(m.seq)
	cp.s.SetPlacement(cp.place, m.peers())
	cp.s.log.Info("serving from the control-plane state held in the data dir until the registration",
		"seq", snap.Seq, "epoch", snap.Epoch, "shards", len(owners))
	return true
}

// startFromHeld starts the loops with the registration first, in the background: a
// refusal then stops the broker through Run (controlPlaneFatal).
func (cp *controlPlane) startFromHeld() {
	cp.startLoops(func(ctx context.Context) bool {
		if err := cp.register(ctx); err != nil {
			if ctx.Err() == nil {
				cp.fatal <- err
			}
			return false
		}
		return true
	})
}

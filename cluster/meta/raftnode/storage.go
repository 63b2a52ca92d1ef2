package raftnode

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// StorageIDFile is the file in a member's data dir holding its storage
// identity (docs/controlplane.md, "Raft": storage identity).
const StorageIDFile = "storage-id"

// ErrBadStorageID is LoadOrCreateStorageID's error for a storage-id file
// that does not hold one id (16 lower-case hex digits).
var ErrBadStorageID = errors.New("raftnode: the storage-id file does not hold a storage id")

// LoadOrCreateStorageID gives the storage identity of the data dir dir: the
// id in dir/storage-id, or, when the file is missing (a new or wiped data
// dir), a new random one (8 bytes of crypto/rand, 16 hex digits) written
// atomically (a temp file, fdatasync, rename, fsync of dir); created reports
// the latter. Errors: the dir's I/O errors, ErrBadStorageID for a file that
// does not hold one id.
func LoadOrCreateStorageID(dir string) (id string, created bool, err error) {
	path := filepath.Join(dir, StorageIDFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		id = strings.TrimSpace(string(data))
		if !validStorageID(id) {
			return "", false, fmt.Errorf("%w: %s", ErrBadStorageID, path)
		}
		return id, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", false, fmt.Errorf("raftnode: %w", err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, fmt.Errorf("raftnode: storage id: %w", err)
	}
	id = hex.EncodeToString(b[:])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("raftnode: %w", err)
	}
	if err := writeFileSynced(dir, StorageIDFile, []byte(id+"\n")); err != nil {
		return "", false, fmt.Errorf("raftnode: storage id: %w", err)
	}
	return id, true, nil
}

// writeFileSynced writes data to dir/name through a temp file that is
// fdatasynced and renamed over name, then fsyncs dir (the rename is durable).
func writeFileSynced(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if errClose := tmp.Close(); err == nil {
		err = errClose
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func validStorageID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// ServerID gives a member's Raft server id, NODE_ID/STORAGE_ID: the
// operator's node id and the data dir's storage identity, so a member that
// lost its disk comes back as a new server (seed "Storage identities during
// a roll"; issue 17 item 1). nodeID must not contain '/'.
func ServerID(nodeID, storageID string) raft.ServerID {
	return raft.ServerID(nodeID + "/" + storageID)
}

// SplitServerID gives a server id's node id and storage id (storage "" for
// an id without '/', as in tests that name members by address).
func SplitServerID(id raft.ServerID) (nodeID, storageID string) {
	nodeID, storageID, _ = strings.Cut(string(id), "/")
	return nodeID, storageID
}

// HasState reports whether dir holds Raft state (a log entry, a term or a
// snapshot: raft.HasExistingState over its WAL and snapshot store), without
// starting Raft. A dir never started, or started but never bootstrapped nor
// fed by a leader, has none. Errors: the stores' open errors.
func HasState(dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "wal")); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	mdb := &metadb.BoltMetaDB{}
	store, err := wal.Open(filepath.Join(dir, "wal"), wal.WithMetaStore(mdb))
	if err != nil {
		_ = mdb.Close()
		return false, fmt.Errorf("raftnode: open wal: %w", err)
	}
	defer func() { _ = store.Close(); _ = mdb.Close() }()
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(dir, "snapshots"), 2, hclog.NewNullLogger())
	if err != nil {
		return false, fmt.Errorf("raftnode: snapshot store: %w", err)
	}
	return raft.HasExistingState(store, store, snaps)
}

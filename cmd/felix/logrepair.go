package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"felix/seglog"
)

// dataDirLockFile is the file a broker holds an exclusive flock(2) on for its whole
// life (broker.LockFileName, docs/operations.md "One broker per data directory").
const dataDirLockFile = "LOCK"

// shardCompanions are the companion logs a stream shard directory may hold (the records
// log is the directory itself; docs/storage-format.md).
var shardCompanions = []seglog.Companion{"producers", seglog.CompanionGroups, seglog.CompanionDeadLetters}

func (a *app) logRepair() *cobra.Command {
	return &cobra.Command{
		Use:   "repair --stream NAME [--shard N]",
		Short: "Cut a damaged tail of a shard's logs to the last valid record (the broker must be stopped)",
		Long: `Repairs the logs of one stream shard under --data-dir (its records log and the
producers, groups and dead-letters companions): a bad record at the tail of a log's newest
segment, and everything after it, is written to repair-<segment>-at-<byte>.dropped in the
log's directory, then the segment is truncated to its last valid record. Damage in an older
(sealed) segment is reported and left alone (exit 7): the broker reads around it. Refused
while a broker holds the data directory (exit 1).`,
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := a.logDir(cmd, args)
			if err != nil {
				return err
			}
			root, _ := cmd.Flags().GetString("data-dir")
			unlock, err := lockForRepair(root)
			if err != nil {
				return err
			}
			defer unlock()
			return a.repairShard(dir)
		},
	}
}

// lockForRepair takes the broker's data-dir lock (non-blocking) for the repair's
// duration, so no broker can open the logs meanwhile. Errors: a broker holds it.
func lockForRepair(root string) (func(), error) {
	path := filepath.Join(root, dataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, withKind(ErrStorageFailed, fmt.Errorf("lock %s: %w", path, err))
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by a broker (pid %s): stop it before log repair", root, holder)
		}
		return nil, withKind(ErrStorageFailed, fmt.Errorf("lock %s: %w", path, err))
	}
	return func() { f.Close() }, nil
}

// repairShard runs seglog.Repair on the shard directory's logs that exist.
func (a *app) repairShard(dir string) error {
	dirs := []string{dir}
	for _, c := range shardCompanions {
		if st, err := os.Stat(seglog.CompanionDir(dir, c)); err == nil && st.IsDir() {
			dirs = append(dirs, seglog.CompanionDir(dir, c))
		}
	}
	w := a.stdout
	if a.jsonOut {
		w = io.Discard
	}
	var sealed error
	for _, d := range dirs {
		res, err := seglog.Repair(d, w, seglog.ToolOptions{})
		switch {
		case errors.Is(err, seglog.ErrRepairSealed):
			fmt.Fprintf(w, "%s: %v\n", d, err)
			sealed = withKind(ErrCorrupt, fmt.Errorf("%s: damage in a sealed segment left as is", d))
		case errors.Is(err, seglog.ErrCorruption):
			return withKind(ErrCorrupt, err)
		case err != nil:
			return withKind(ErrStorageFailed, err)
		case a.jsonOut:
			a.printJSON(map[string]any{"dir": d, "repaired": res.Repaired, "segment": res.Segment, "at_byte": res.At,
				"dropped_bytes": res.DroppedBytes, "dropped_records": res.DroppedRecords, "side_file": res.SideFile})
		}
	}
	return sealed
}

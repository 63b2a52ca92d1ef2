package broker

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// LockFileName is the file in FELIX_DURABLE_STORAGE_DIR that one broker
// process holds an exclusive flock(2) on for its whole life. The kernel drops
// the lock when the process exits, however it exits (SIGKILL included), so a
// crash never leaves a stale lock behind.
const LockFileName = "LOCK"

// ErrDataDirLocked is returned by New when another process already serves the
// data dir: two brokers appending to one log would hand out the same offsets
// and lose acknowledged records.
var ErrDataDirLocked = errors.New("broker: data dir is in use by another process")

// lockDataDir takes the exclusive, non-blocking flock on dir/LOCK and writes
// this process's pid into it (for people; the lock is the flock, not the
// content). Errors: ErrDataDirLocked (naming the holder's pid when readable),
// or the open/flock error.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broker: lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (held by pid %s)", ErrDataDirLocked, dir, string(holder))
		}
		return nil, fmt.Errorf("broker: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())), 0)
	}
	return f, nil
}

// unlockDataDir releases the data dir lock taken by New (closing the file
// drops the flock). Safe to call more than once.
func (s *Server) unlockDataDir() {
	if s.dirLock != nil {
		s.dirLock.Close()
		s.dirLock = nil
	}
}

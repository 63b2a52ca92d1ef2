package netq

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quic-go/quic-go"

	"felix/internal/vfs"
)

// ResetKeyFile is the name of the stateless-reset key file in the broker's data dir.
const ResetKeyFile = "quic-reset.key"

// ResetKeySize is the size of a stateless-reset key in bytes (quic.StatelessResetKey).
const ResetKeySize = len(quic.StatelessResetKey{})

// ErrBadResetKey: the reset key file exists but does not hold exactly ResetKeySize bytes.
// The broker refuses to start rather than silently replace it (delete the file to make a
// new key; clients of the previous process then wait out their idle timeout once).
var ErrBadResetKey = errors.New("netq: stateless reset key file is not 32 bytes")

// LoadOrCreateResetKey returns the QUIC stateless-reset key kept in dir/ResetKeyFile,
// creating it on first use: ResetKeySize bytes from crypto/rand, written to a temporary
// file (mode 0600), fsynced, renamed into place, and the directory fsynced. The key lets a
// restarted broker answer packets of its predecessor's connections with a stateless reset
// (RFC 9000 §10.3), so clients reconnect at once instead of waiting out the idle timeout;
// it must therefore survive restarts and stay secret (whoever knows it can reset the
// broker's connections). Errors: ErrBadResetKey (file of the wrong size), and file system
// errors wrapped with the path. dir must exist.
func LoadOrCreateResetKey(dir string) (*quic.StatelessResetKey, error) {
	return loadOrCreateResetKey(vfs.OSFS{}, rand.Reader, dir)
}

// loadOrCreateResetKey is LoadOrCreateResetKey on the file seam fsys (fault injection in
// tests: vfstest.FaultFS).
func loadOrCreateResetKey(fsys vfs.FS, random io.Reader, dir string) (*quic.StatelessResetKey, error) {
	path := filepath.Join(dir, ResetKeyFile)
	data, err := vfs.ReadFile(fsys, path)
	if err == nil {
		if len(data) != ResetKeySize {
			return nil, fmt.Errorf("%w: %s holds %d bytes", ErrBadResetKey, path, len(data))
		}
		var key quic.StatelessResetKey
		copy(key[:], data)
		return &key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("netq: read reset key %s: %w", path, err)
	}
	var key quic.StatelessResetKey
	if _, err := io.ReadFull(random, key[:]); err != nil {
		return nil, fmt.Errorf("netq: random reset key: %w", err)
	}
	err = vfs.WriteFileAtomic(fsys, path, key[:], 0o600)
	var ae *vfs.AtomicError
	if errors.As(err, &ae) {
		switch ae.Op {
		case vfs.StepRename:
			return nil, fmt.Errorf("netq: install reset key %s: %w", path, ae.Err)
		case vfs.StepSyncDir:
			return nil, fmt.Errorf("netq: sync %s after writing the reset key: %w", dir, ae.Err)
		default:
			return nil, fmt.Errorf("netq: write reset key %s: %w", ae.Path, ae.Err)
		}
	}
	if err != nil {
		return nil, err
	}
	return &key, nil
}

package netq

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/quic-go/quic-go"
)

// ResetKeyFile is the name of the stateless-reset key file in the broker's data dir.
const ResetKeyFile = "quic-reset.key"

// ResetKeySize is the size of a stateless-reset key in bytes (quic.StatelessResetKey).
const ResetKeySize = len(quic.StatelessResetKey{})

// ErrBadResetKey: the reset key file exists but does not hold exactly ResetKeySize bytes.
// The broker refuses to start rather than silently replace it (delete the file to make a
// new key; clients of the previous process then wait out their idle timeout once).
var ErrBadResetKey = errors.New("netq: stateless reset key file is not 32 bytes")

// keyFS is the file seam of LoadOrCreateResetKey (fault injection in tests).
type keyFS interface {
	ReadFile(name string) ([]byte, error)
	// WriteSynced creates name with mode perm, writes data and fsyncs it.
	WriteSynced(name string, data []byte, perm os.FileMode) error
	Rename(oldName, newName string) error
	Remove(name string) error
	// SyncDir fsyncs the directory so a rename in it is durable.
	SyncDir(dir string) error
}

type osKeyFS struct{}

func (osKeyFS) ReadFile(name string) ([]byte, error) { return os.ReadFile(name) }
func (osKeyFS) Rename(o, n string) error             { return os.Rename(o, n) }
func (osKeyFS) Remove(name string) error             { return os.Remove(name) }

func (osKeyFS) WriteSynced(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (osKeyFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// LoadOrCreateResetKey returns the QUIC stateless-reset key kept in dir/ResetKeyFile,
// creating it on first use: ResetKeySize bytes from crypto/rand, written to a temporary
// file (mode 0600), fsynced, renamed into place, and the directory fsynced. The key lets a
// restarted broker answer packets of its predecessor's connections with a stateless reset
// (RFC 9000 §10.3), so clients reconnect at once instead of waiting out the idle timeout;
// it must therefore survive restarts and stay secret (whoever knows it can reset the
// broker's connections). Errors: ErrBadResetKey (file of the wrong size), and file system
// errors wrapped with the path. dir must exist.
func LoadOrCreateResetKey(dir string) (*quic.StatelessResetKey, error) {
	return loadOrCreateResetKey(osKeyFS{}, rand.Reader, dir)
}

func loadOrCreateResetKey(fsys keyFS, random io.Reader, dir string) (*quic.StatelessResetKey, error) {
	path := filepath.Join(dir, ResetKeyFile)
	data, err := fsys.ReadFile(path)
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
	tmp := path + ".tmp"
	_ = fsys.Remove(tmp) // a leftover of a crash mid-write: start clean, with our mode
	if err := fsys.WriteSynced(tmp, key[:], 0o600); err != nil {
		_ = fsys.Remove(tmp)
		return nil, fmt.Errorf("netq: write reset key %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return nil, fmt.Errorf("netq: install reset key %s: %w", path, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("netq: sync %s after writing the reset key: %w", dir, err)
	}
	return &key, nil
}

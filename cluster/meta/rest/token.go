package rest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is the admin token's file name in the data dir (mode 0600).
const TokenFile = "admin-token"

// LoadOrCreateToken reads dir/admin-token, or on first start writes a new
// random one (32 bytes, hex, mode 0600; issue 17 item 3, "an admin token file
// (0600) written on first start in the data dir"). created is true when it
// wrote the file. Errors: the file's I/O; an empty or group/world-readable
// token file is refused (fix its mode or remove it).
func LoadOrCreateToken(dir string) (token string, created bool, err error) {
	return loadOrCreateSecret(dir, TokenFile)
}

// loadOrCreateSecret is LoadOrCreateToken for the file dir/name.
func loadOrCreateSecret(dir, name string) (token string, created bool, err error) {
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err == nil {
		fi, serr := os.Stat(path)
		if serr != nil {
			return "", false, serr
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return "", false, fmt.Errorf("rest: %s has mode %v; it must be 0600", path, fi.Mode().Perm())
		}
		if t := strings.TrimSpace(string(data)); t != "" {
			return t, false, nil
		}
		return "", false, fmt.Errorf("rest: %s is empty", path)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(b)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, err
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		_ = f.Close()
		return "", false, err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return "", false, err
	}
	return token, true, nil
}

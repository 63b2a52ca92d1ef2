package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"felix/clock"
)

// KeyState is the life-cycle state of a tenant signing key (spec/auth.md §3.3 rotation).
type KeyState string

const (
	// KeyActive: the key that signs new tokens; exactly one per tenant. It also verifies.
	KeyActive KeyState = "active"
	// KeyVerifyOnly: a previous signing key; tokens it signed still verify.
	KeyVerifyOnly KeyState = "verify-only"
	// KeyRemoved: kept as a record only (private seed erased); tokens it signed are refused.
	KeyRemoved KeyState = "removed"
)

// keyStoreVersion is the "version" field of keys.json this build writes and reads.
const keyStoreVersion = 1

// KeyInfo describes one key; Public is nil for a removed key.
type KeyInfo struct {
	Tenant  string
	Kid     string // 32 lowercase hex digits (16 random bytes)
	Created time.Time
	State   KeyState
	Public  ed25519.PublicKey
}

// KeyStoreOptions are the seams of a KeyStore. Zero values mean OSFS{}, clock.Real() (the
// creation time of new keys) and crypto/rand.Reader.
type KeyStoreOptions struct {
	FS    FS
	Clock clock.Clock
	Rand  io.Reader
}

// KeyStore maps tenants to their Ed25519 keys and persists them to
// <dataDir>/auth/keys.json (mode 0600; directory 0700). Layout (docs/auth.md):
//
//	{"version":1,"tenants":[{"id":"default","created":"<RFC 3339>","keys":[
//	  {"kid":"<32 hex>","created":"<RFC 3339>","state":"active","seed":"<base64 32 bytes>"}]}]}
//
// Every mutation writes the whole file temp+fsync+rename and changes memory only after the
// write succeeded; on error the in-memory store is unchanged and the file holds either the
// old or the new contents. A KeyStore is safe for concurrent use. It is a KeySource.
type KeyStore struct {
	path string
	opts KeyStoreOptions

	mu      sync.RWMutex
	file    storeFile
	byKid   map[string]keyRef
	removed atomic.Uint64 // bumped on every RemoveKey: see Generation
}

type storeFile struct {
	Version int           `json:"version"`
	Tenants []tenantEntry `json:"tenants"`
}

type tenantEntry struct {
	ID      string     `json:"id"`
	Created time.Time  `json:"created"`
	Keys    []keyEntry `json:"keys"`
}

type keyEntry struct {
	Kid     string    `json:"kid"`
	Created time.Time `json:"created"`
	State   KeyState  `json:"state"`
	Seed    []byte    `json:"seed,omitempty"`
}

type keyRef struct {
	tenant  string
	state   KeyState
	private ed25519.PrivateKey // nil when removed
}

// KeyStorePath returns <dataDir>/auth/keys.json.
func KeyStorePath(dataDir string) string { return filepath.Join(dataDir, "auth", "keys.json") }

// OpenKeyStore loads <dataDir>/auth/keys.json, creating the auth directory (0700) when
// missing. A missing file is an empty store (nothing is written until the first mutation).
// Errors: ErrCorruptKeyStore (wrapped with the reason) when the file does not parse or breaks
// an invariant (unique tenants and kids, one active key per tenant, 32-byte seeds); I/O
// errors from the FS.
func OpenKeyStore(dataDir string, opts KeyStoreOptions) (*KeyStore, error) {
	if opts.FS == nil {
		opts.FS = OSFS{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Rand == nil {
		opts.Rand = rand.Reader
	}
	ks := &KeyStore{path: KeyStorePath(dataDir), opts: opts}
	if err := opts.FS.MkdirAll(filepath.Dir(ks.path), 0o700); err != nil {
		return nil, fmt.Errorf("auth: key store directory: %w", err)
	}
	data, err := readThrough(opts.FS, ks.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		ks.install(storeFile{Version: keyStoreVersion})
		return ks, nil
	case err != nil:
		return nil, fmt.Errorf("auth: read %s: %w", ks.path, err)
	}
	file, err := decodeStoreFile(data)
	if err != nil {
		return nil, fmt.Errorf("auth: %s: %w", ks.path, err)
	}
	ks.install(file)
	return ks, nil
}

// decodeStoreFile parses and checks keys.json.
func decodeStoreFile(data []byte) (storeFile, error) {
	var file storeFile
	if err := json.Unmarshal(data, &file); err != nil {
		return storeFile{}, fmt.Errorf("%w: %v", ErrCorruptKeyStore, err)
	}
	if file.Version != keyStoreVersion {
		return storeFile{}, fmt.Errorf("%w: version %d, want %d", ErrCorruptKeyStore, file.Version, keyStoreVersion)
	}
	tenants, kids := map[string]bool{}, map[string]bool{}
	for _, t := range file.Tenants {
		if !ValidName(t.ID) || tenants[t.ID] {
			return storeFile{}, fmt.Errorf("%w: tenant %q invalid or repeated", ErrCorruptKeyStore, t.ID)
		}
		tenants[t.ID] = true
		active := 0
		for _, k := range t.Keys {
			if !validKid(k.Kid) || kids[k.Kid] {
				return storeFile{}, fmt.Errorf("%w: kid %q invalid or repeated", ErrCorruptKeyStore, k.Kid)
			}
			kids[k.Kid] = true
			if reason := checkKeyEntry(k); reason != "" {
				return storeFile{}, fmt.Errorf("%w: key %s: %s", ErrCorruptKeyStore, k.Kid, reason)
			}
			if k.State == KeyActive {
				active++
			}
		}
		if active != 1 {
			return storeFile{}, fmt.Errorf("%w: tenant %q has %d active keys, want 1", ErrCorruptKeyStore, t.ID, active)
		}
	}
	return file, nil
}

func checkKeyEntry(k keyEntry) string {
	switch k.State {
	case KeyActive, KeyVerifyOnly:
		if len(k.Seed) != ed25519.SeedSize {
			return "seed is not 32 bytes"
		}
	case KeyRemoved:
		if len(k.Seed) != 0 {
			return "removed key still holds a seed"
		}
	default:
		return "unknown state " + quote(string(k.State))
	}
	return ""
}

func validKid(kid string) bool {
	if len(kid) != 32 {
		return false
	}
	_, err := hex.DecodeString(kid)
	return err == nil && kid == strings.ToLower(kid)
}

// install makes file the in-memory state. Callers hold mu for writing (or own ks alone).
func (ks *KeyStore) install(file storeFile) {
	byKid := make(map[string]keyRef)
	for _, t := range file.Tenants {
		for _, k := range t.Keys {
			ref := keyRef{tenant: t.ID, state: k.State}
			if k.State != KeyRemoved {
				ref.private = ed25519.NewKeyFromSeed(k.Seed)
			}
			byKid[k.Kid] = ref
		}
	}
	ks.file, ks.byKid = file, byKid
}

// mutate copies the state, applies change, persists the copy and installs it. change
// returns a value for the caller (a kid) or an error that aborts without writing.
func (ks *KeyStore) mutate(change func(next *storeFile) (string, error)) (string, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	next := cloneStoreFile(ks.file)
	result, err := change(&next)
	if err != nil {
		return "", err
	}
	data, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return "", fmt.Errorf("auth: encode key store: %w", err)
	}
	if err := writeFileAtomic(ks.opts.FS, ks.path, append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("auth: write %s: %w", ks.path, err)
	}
	ks.install(next)
	return result, nil
}

func cloneStoreFile(f storeFile) storeFile {
	out := storeFile{Version: f.Version, Tenants: make([]tenantEntry, len(f.Tenants))}
	for i, t := range f.Tenants {
		t.Keys = slices.Clone(t.Keys)
		out.Tenants[i] = t
	}
	return out
}

// newKey draws a kid (16 random bytes, hex) and an Ed25519 seed.
func (ks *KeyStore) newKey() (keyEntry, error) {
	var kidBytes [16]byte
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(ks.opts.Rand, kidBytes[:]); err != nil {
		return keyEntry{}, fmt.Errorf("auth: random kid: %w", err)
	}
	if _, err := io.ReadFull(ks.opts.Rand, seed); err != nil {
		return keyEntry{}, fmt.Errorf("auth: random key: %w", err)
	}
	return keyEntry{Kid: hex.EncodeToString(kidBytes[:]), Created: ks.opts.Clock.Now().UTC(), State: KeyActive, Seed: seed}, nil
}

// CreateTenant adds tenant with a fresh active signing key and returns its kid.
// Errors: ErrInvalidName, ErrTenantExists, random-source and I/O errors.
func (ks *KeyStore) CreateTenant(tenant string) (kid string, err error) {
	if !ValidName(tenant) {
		return "", fmt.Errorf("auth: tenant %q: %w", tenant, ErrInvalidName)
	}
	return ks.mutate(func(next *storeFile) (string, error) {
		if findTenant(next, tenant) >= 0 {
			return "", fmt.Errorf("auth: tenant %q: %w", tenant, ErrTenantExists)
		}
		key, err := ks.newKey()
		if err != nil {
			return "", err
		}
		next.Tenants = append(next.Tenants, tenantEntry{ID: tenant, Created: key.Created, Keys: []keyEntry{key}})
		return key.Kid, nil
	})
}

// Rotate adds a new active signing key to tenant and demotes the previous one to
// verify-only, so tokens it signed stay valid until RemoveKey. Returns the new kid.
// Errors: ErrUnknownTenant, random-source and I/O errors.
func (ks *KeyStore) Rotate(tenant string) (kid string, err error) {
	return ks.mutate(func(next *storeFile) (string, error) {
		i := findTenant(next, tenant)
		if i < 0 {
			return "", fmt.Errorf("auth: tenant %q: %w", tenant, ErrUnknownTenant)
		}
		key, err := ks.newKey()
		if err != nil {
			return "", err
		}
		keys := next.Tenants[i].Keys
		for j := range keys {
			if keys[j].State == KeyActive {
				keys[j].State = KeyVerifyOnly
			}
		}
		next.Tenants[i].Keys = append(keys, key)
		return key.Kid, nil
	})
}

// RemoveKey marks a verify-only key removed and erases its private seed; tokens it signed
// are refused from then on, including ones already in a verifier's cache (Generation).
// Errors: ErrUnknownKey (no such kid, or already removed), ErrKeyInUse (the tenant's active
// signing key: Rotate first), I/O errors.
func (ks *KeyStore) RemoveKey(kid string) error {
	_, err := ks.mutate(func(next *storeFile) (string, error) {
		for i := range next.Tenants {
			keys := next.Tenants[i].Keys
			for j := range keys {
				if keys[j].Kid != kid {
					continue
				}
				switch keys[j].State {
				case KeyActive:
					return "", fmt.Errorf("auth: key %s: %w", kid, ErrKeyInUse)
				case KeyRemoved:
					return "", fmt.Errorf("auth: key %s: %w", kid, ErrUnknownKey)
				}
				keys[j].State, keys[j].Seed = KeyRemoved, nil
				return "", nil
			}
		}
		return "", fmt.Errorf("auth: key %s: %w", kid, ErrUnknownKey)
	})
	if err == nil {
		ks.removed.Add(1)
	}
	return err
}

func findTenant(f *storeFile, tenant string) int {
	for i := range f.Tenants {
		if f.Tenants[i].ID == tenant {
			return i
		}
	}
	return -1
}

// Tenants returns the tenant ids in creation order.
func (ks *KeyStore) Tenants() []string {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	out := make([]string, len(ks.file.Tenants))
	for i, t := range ks.file.Tenants {
		out[i] = t.ID
	}
	return out
}

// HasTenant reports whether the store holds tenant.
func (ks *KeyStore) HasTenant(tenant string) bool {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	return findTenant(&ks.file, tenant) >= 0
}

// Keys lists tenant's keys, removed ones included, oldest first. Errors: ErrUnknownTenant.
func (ks *KeyStore) Keys(tenant string) ([]KeyInfo, error) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	i := findTenant(&ks.file, tenant)
	if i < 0 {
		return nil, fmt.Errorf("auth: tenant %q: %w", tenant, ErrUnknownTenant)
	}
	var out []KeyInfo
	for _, k := range ks.file.Tenants[i].Keys {
		info := KeyInfo{Tenant: tenant, Kid: k.Kid, Created: k.Created, State: k.State}
		if ref := ks.byKid[k.Kid]; ref.private != nil {
			info.Public = ref.private.Public().(ed25519.PublicKey)
		}
		out = append(out, info)
	}
	return out, nil
}

// signingKey returns tenant's active kid and private key. Errors: ErrUnknownTenant.
func (ks *KeyStore) signingKey(tenant string) (string, ed25519.PrivateKey, error) {
	ks.mu.RLock()
	defer ks.mu.RUnlock()
	i := findTenant(&ks.file, tenant)
	if i < 0 {
		return "", nil, fmt.Errorf("auth: tenant %q: %w", tenant, ErrUnknownTenant)
	}
	for _, k := range ks.file.Tenants[i].Keys {
		if k.State == KeyActive {
			return k.Kid, ks.byKid[k.Kid].private, nil
		}
	}
	return "", nil, fmt.Errorf("auth: tenant %q has no active key: %w", tenant, ErrCorruptKeyStore)
}

// VerificationKey implements KeySource: the public key of kid when it belongs to tenant and
// is not removed. Errors: ErrUnknownKey (also for a kid of another tenant, so a token cannot
// borrow a neighbour's key).
func (ks *KeyStore) VerificationKey(tenant, kid string) (ed25519.PublicKey, error) {
	ks.mu.RLock()
	ref, ok := ks.byKid[kid]
	ks.mu.RUnlock()
	if !ok || ref.tenant != tenant || ref.private == nil {
		return nil, ErrUnknownKey
	}
	return ref.private.Public().(ed25519.PublicKey), nil
}

// Generation implements KeySource: it changes whenever a key stops verifying (RemoveKey), so
// a verifier drops cached principals verified under an older generation.
func (ks *KeyStore) Generation() uint64 { return ks.removed.Load() }

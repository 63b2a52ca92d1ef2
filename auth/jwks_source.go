package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrInvalidJWKS: a JWKS document that does not parse or holds a key that is not a
// well-formed Ed25519 signing key (spec/auth.md §3.3). Wrapped with the reason.
var ErrInvalidJWKS = errors.New("invalid JWKS document")

// JWKS document bounds, checked before decoding.
const (
	// MaxJWKSBytes bounds the encoded document.
	MaxJWKSBytes = 64 << 10
	// MaxJWKSKeys bounds the keys of one tenant.
	MaxJWKSKeys = 64
	// maxKidBytes bounds a kid read from a JWKS document.
	maxKidBytes = 128
)

// ParseJWKS decodes the document served at /v1/tenants/{t}/.well-known/jwks.json
// (spec/auth.md §3.3) and checks every key: kty "OKP", crv "Ed25519", alg "EdDSA" or absent,
// use "sig" or absent, a kid of 1..128 printable ASCII bytes unique in the document, and x the
// unpadded base64url of exactly 32 bytes. At least one key is required. Errors:
// ErrInvalidJWKS (wrapped with the reason); a document over MaxJWKSBytes is refused unparsed.
func ParseJWKS(data []byte) (JWKS, error) {
	if len(data) > MaxJWKSBytes {
		return JWKS{}, fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidJWKS, len(data), MaxJWKSBytes)
	}
	var doc JWKS
	if err := json.Unmarshal(data, &doc); err != nil {
		return JWKS{}, fmt.Errorf("%w: %v", ErrInvalidJWKS, err)
	}
	if len(doc.Keys) == 0 || len(doc.Keys) > MaxJWKSKeys {
		return JWKS{}, fmt.Errorf("%w: %d keys, want 1..%d", ErrInvalidJWKS, len(doc.Keys), MaxJWKSKeys)
	}
	seen := make(map[string]bool, len(doc.Keys))
	for _, k := range doc.Keys {
		if reason := checkJWK(k); reason != "" {
			return JWKS{}, fmt.Errorf("%w: key %q: %s", ErrInvalidJWKS, k.Kid, reason)
		}
		if seen[k.Kid] {
			return JWKS{}, fmt.Errorf("%w: kid %q repeated", ErrInvalidJWKS, k.Kid)
		}
		seen[k.Kid] = true
	}
	return doc, nil
}

func checkJWK(k JWK) string {
	switch {
	case k.Kty != "OKP" || k.Crv != "Ed25519":
		return "not an Ed25519 (OKP) key"
	case k.Alg != "" && k.Alg != "EdDSA":
		return "alg is not EdDSA"
	case k.Use != "" && k.Use != "sig":
		return "use is not sig"
	case !printableKid(k.Kid):
		return "kid empty, too long or not printable ASCII"
	}
	x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return "x is not the unpadded base64url of 32 bytes"
	}
	return ""
}

func printableKid(kid string) bool {
	if len(kid) == 0 || len(kid) > maxKidBytes {
		return false
	}
	for i := 0; i < len(kid); i++ {
		if kid[i] <= ' ' || kid[i] >= 0x7f {
			return false
		}
	}
	return true
}

// JWKSKeySource is a KeySource fed with per-tenant JWKS documents, for a broker that gets
// its tenants' keys from the control plane (spec/auth.md §4 step 1) instead of a local
// KeyStore. Fetching, the 3600 s cache and refetch policy are the caller's; this type only
// holds the latest document of each tenant. Safe for concurrent use.
type JWKSKeySource struct {
	mu      sync.RWMutex
	tenants map[string]map[string]ed25519.PublicKey
	removed atomic.Uint64
}

// NewJWKSKeySource returns an empty source: every lookup fails until Set.
func NewJWKSKeySource() *JWKSKeySource {
	return &JWKSKeySource{tenants: make(map[string]map[string]ed25519.PublicKey)}
}

// Set replaces tenant's keys with those of doc (already checked by ParseJWKS; checked again
// here). When a kid known before is missing from doc, or its key changed, Generation moves,
// so cached tokens signed by it are re-verified (and refused). Errors: ErrInvalidName,
// ErrInvalidJWKS.
func (s *JWKSKeySource) Set(tenant string, doc JWKS) error {
	if !ValidName(tenant) {
		return fmt.Errorf("auth: tenant %q: %w", tenant, ErrInvalidName)
	}
	if len(doc.Keys) == 0 || len(doc.Keys) > MaxJWKSKeys {
		return fmt.Errorf("%w: %d keys, want 1..%d", ErrInvalidJWKS, len(doc.Keys), MaxJWKSKeys)
	}
	keys := make(map[string]ed25519.PublicKey, len(doc.Keys))
	for _, k := range doc.Keys {
		if reason := checkJWK(k); reason != "" {
			return fmt.Errorf("%w: key %q: %s", ErrInvalidJWKS, k.Kid, reason)
		}
		x, _ := base64.RawURLEncoding.Strict().DecodeString(k.X)
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for kid, old := range s.tenants[tenant] {
		if now, ok := keys[kid]; !ok || !now.Equal(old) {
			s.removed.Add(1)
			break
		}
	}
	s.tenants[tenant] = keys
	return nil
}

// VerificationKey implements KeySource. Errors: ErrUnknownKey.
func (s *JWKSKeySource) VerificationKey(tenant, kid string) (ed25519.PublicKey, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	key, ok := s.tenants[tenant][kid]
	if !ok {
		return nil, ErrUnknownKey
	}
	return key, nil
}

// Generation implements KeySource.
func (s *JWKSKeySource) Generation() uint64 { return s.removed.Load() }

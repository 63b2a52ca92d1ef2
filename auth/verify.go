package auth

import (
	"crypto/ed25519"
	"errors"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"felix/clock"
)

// Verifier turns a bearer token into a Principal (docs/architecture.md, auth contract).
// Implementations: *TokenVerifier (EdDSA tokens, cached) and DisabledVerifier
// (FELIX_AUTH=off).
type Verifier interface {
	// Verify returns the principal of token or an error matching ErrUnauthorized.
	Verify(token string) (*Principal, error)
}

// KeySource resolves a tenant's verification key by kid. *KeyStore is one; a cluster broker
// can plug a JWKS-fed source (spec/auth.md §4 step 1).
type KeySource interface {
	// VerificationKey returns the public key kid names for tenant, or an error (ErrUnknownKey)
	// when the tenant has no such verifying key.
	VerificationKey(tenant, kid string) (ed25519.PublicKey, error)
	// Generation changes whenever some key stops verifying; cached verifications made under
	// another generation are redone.
	Generation() uint64
}

// MaxTokenBytes bounds the token string; longer ones are refused before any parsing.
const MaxTokenBytes = 8 << 10

// DefaultCacheEntries is the verified-token cache bound used when VerifierOptions.CacheEntries
// is 0.
const DefaultCacheEntries = 16384

// VerifierOptions configure a TokenVerifier.
type VerifierOptions struct {
	// Keys resolves verification keys; required.
	Keys KeySource
	// Clock is the time tokens are checked at (nil: clock.Real()). Tests pass
	// clock/clocktest.Fake.
	Clock clock.Clock
	// CacheEntries bounds the verified-token cache; 0 means DefaultCacheEntries, a negative
	// value disables the cache.
	CacheEntries int
}

// TokenVerifier verifies Felix tokens (spec/auth.md §4 steps 2, 3 and 5) and caches the
// resulting principals by token string until their exp (plus Leeway), so verifying a token
// again costs one map lookup under a read lock instead of a signature check. Safe for
// concurrent use.
type TokenVerifier struct {
	keys   KeySource
	now    func() time.Time
	parser *jwt.Parser
	limit  int

	mu    sync.RWMutex
	cache map[string]cacheEntry
}

type cacheEntry struct {
	principal  *Principal
	until      time.Time // exp + Leeway
	generation uint64
}

// NewVerifier returns a verifier over opts.Keys.
func NewVerifier(opts VerifierOptions) *TokenVerifier {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.CacheEntries == 0 {
		opts.CacheEntries = DefaultCacheEntries
	}
	v := &TokenVerifier{keys: opts.Keys, now: opts.Clock.Now, limit: opts.CacheEntries}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
		jwt.WithStrictDecoding(),
	)
	if v.limit > 0 {
		v.cache = make(map[string]cacheEntry)
	}
	return v
}

// Verify checks token and returns its principal (spec/auth.md §4): algorithm EdDSA only
// (none, HS*, RS*, ES* ... are refused, including HS256 keyed with the public key), a kid
// header naming a verifying key of the token's tid, a valid signature, iss=felix-auth,
// aud=felix-broker, exp present and not past by more than Leeway, nbf (when present) not
// ahead by more than Leeway, and non-empty sub and tid. perms are expanded once; entries
// that do not parse grant nothing.
//
// Errors are *TokenError (errors.Is ErrUnauthorized) with a fixed Reason. A hit in the cache
// returns the same *Principal as the first call and does not allocate. Verify does not
// check tid against the auth frame: use Authenticate for that.
func (v *TokenVerifier) Verify(token string) (*Principal, error) {
	stale := false
	if v.cache != nil {
		v.mu.RLock()
		entry, ok := v.cache[token]
		v.mu.RUnlock()
		if ok && v.now().Before(entry.until) && entry.generation == v.keys.Generation() {
			return entry.principal, nil
		}
		stale = ok
	}
	generation := v.keys.Generation() // read before any key lookup: see KeySource
	principal, err := v.verify(token)
	if err != nil {
		if stale { // only a cached token takes the write lock on failure, not every bad token
			v.forget(token)
		}
		return nil, err
	}
	if v.cache != nil {
		v.remember(token, cacheEntry{principal: principal, until: principal.Expires.Add(Leeway), generation: generation})
	}
	return principal, nil
}

// verify is the uncached check.
func (v *TokenVerifier) verify(token string) (*Principal, error) {
	if token == "" {
		return nil, tokenErr("missing token", nil)
	}
	if len(token) > MaxTokenBytes {
		return nil, tokenErr("token too large", nil)
	}
	var c claims
	_, err := v.parser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodEdDSA {
			return nil, errWrongAlgorithm
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errMissingKid
		}
		return v.keys.VerificationKey(c.Tenant, kid)
	})
	if err != nil {
		return nil, classify(err)
	}
	if c.Subject == "" || c.Tenant == "" || c.IssuedAt == nil {
		return nil, tokenErr("missing sub, tid or iat", nil)
	}
	return newPrincipal(c.Tenant, c.Subject, c.IssuedAt.Time, c.ExpiresAt.Time, c.Permissions), nil
}

var (
	errWrongAlgorithm = errors.New("algorithm is not EdDSA")
	errMissingKid     = errors.New("missing kid header")
)

// classify maps a jwt-go error to a TokenError reason. Order matters: the library joins
// causes, and the most specific one wins.
func classify(err error) error {
	reasons := []struct {
		target error
		reason string
	}{
		{errWrongAlgorithm, "algorithm not allowed"},
		{errMissingKid, "missing kid"},
		{ErrUnknownKey, "unknown key"},
		{jwt.ErrTokenMalformed, "malformed token"},
		{jwt.ErrTokenExpired, "token expired"},
		{jwt.ErrTokenNotValidYet, "token not yet valid"},
		{jwt.ErrTokenUsedBeforeIssued, "token used before issued"},
		{jwt.ErrTokenInvalidIssuer, "wrong issuer"},
		{jwt.ErrTokenInvalidAudience, "wrong audience"},
		{jwt.ErrTokenRequiredClaimMissing, "missing claim"},
		{jwt.ErrTokenSignatureInvalid, "signature invalid"},
		{jwt.ErrTokenUnverifiable, "token unverifiable"},
	}
	for _, r := range reasons {
		if errors.Is(err, r.target) {
			return tokenErr(r.reason, err)
		}
	}
	return tokenErr("invalid token", err)
}

// remember stores an entry, first sweeping expired entries when the cache is full and then,
// if still full, dropping arbitrary entries (map order) until one slot is free.
func (v *TokenVerifier) remember(token string, entry cacheEntry) {
	now := v.now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.cache[token]; !ok && len(v.cache) >= v.limit {
		for key, e := range v.cache {
			if !now.Before(e.until) {
				delete(v.cache, key)
			}
		}
		for key := range v.cache {
			if len(v.cache) < v.limit {
				break
			}
			delete(v.cache, key)
		}
	}
	v.cache[token] = entry
}

// forget drops a token whose re-verification failed (expired, key removed).
func (v *TokenVerifier) forget(token string) {
	v.mu.Lock()
	delete(v.cache, token)
	v.mu.Unlock()
}

// CachedEntries returns the number of tokens in the verified-token cache (for metrics).
func (v *TokenVerifier) CachedEntries() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.cache)
}

// Authenticate runs the broker's auth-frame check (spec/auth.md §4 steps 1–5): verify token
// with v, then require the token's tid to equal tenantID. Errors: the Verify errors
// (ErrUnauthorized) or ErrTenantMismatch. With DisabledVerifier it returns an allow-all
// principal whose Tenant is tenantID.
func Authenticate(v Verifier, tenantID, token string) (*Principal, error) {
	p, err := v.Verify(token)
	if err != nil {
		return nil, err
	}
	if p.allowAll {
		// FELIX_AUTH=off: a principal of the requested tenant, so the broker can read
		// p.Tenant as it does with auth on.
		return &Principal{Tenant: tenantID, Subject: p.Subject, allowAll: true}, nil
	}
	if p.Tenant != tenantID {
		return nil, ErrTenantMismatch
	}
	return p, nil
}

// DisabledVerifier is the FELIX_AUTH=off verifier: every token, even an empty one, yields a
// principal for which every Allow succeeds. Bootstrap logs a warning whenever it is chosen.
type DisabledVerifier struct{}

// Verify implements Verifier; it never fails.
func (DisabledVerifier) Verify(string) (*Principal, error) { return allowAllPrincipal, nil }

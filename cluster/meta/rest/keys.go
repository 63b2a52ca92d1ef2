package rest

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"felix/auth"
	"felix/clock"
	"felix/cluster/meta"
)

// KeySecretFile is the file in the data dir holding the group's tenant-key
// secret (32 random bytes, hex, mode 0600); every member of a group needs the
// same one, as with the admin token.
const KeySecretFile = "tenant-key-secret"

// LoadOrCreateKeySecret reads dir/tenant-key-secret, or writes a new random
// one on first start (LoadOrCreateToken's rules: 0600, a group- or
// world-readable or empty file is refused). Errors: the file's I/O, a secret
// that is not 64 hex digits.
func LoadOrCreateKeySecret(dir string) (secret []byte, created bool, err error) {
	s, created, err := loadOrCreateSecret(dir, KeySecretFile)
	if err != nil {
		return nil, false, err
	}
	secret, err = hex.DecodeString(s)
	if err != nil || len(secret) != 32 {
		return nil, false, fmt.Errorf("rest: %s/%s does not hold 64 hex digits", dir, KeySecretFile)
	}
	return secret, created, nil
}

// TenantKeys holds the tenants' Ed25519 signing keys of one member
// (spec/auth.md §3.3; docs/controlplane.md, "Tenant keys and JWKS"). A
// tenant's first key is derived from the group's secret with HKDF-SHA256
// (info "felix tenant signing key v1", NUL, the tenant id; 16 bytes of kid,
// then the 32-byte seed), so every member that shares the secret signs and
// publishes the same key without replicating private keys through Raft; it is
// kept in an auth.KeyStore in the member's data dir (DIR/auth/keys.json).
// Rotation is not offered (a rotated key would not be the other members').
type TenantKeys struct {
	mu     sync.Mutex
	secret []byte
	next   bytes.Reader // the derived bytes the store reads as its randomness
	store  *auth.KeyStore
	issuer *auth.TokenIssuer
}

// OpenTenantKeys opens the key store under dataDir with the group's secret;
// clk stamps key creation and token times (nil = clock.Real()). Errors: the
// store's (auth.OpenKeyStore).
func OpenTenantKeys(dataDir string, secret []byte, clk clock.Clock) (*TenantKeys, error) {
	if clk == nil {
		clk = clock.Real()
	}
	k := &TenantKeys{secret: secret}
	store, err := auth.OpenKeyStore(dataDir, auth.KeyStoreOptions{Clock: clk, Rand: &k.next})
	if err != nil {
		return nil, err
	}
	k.store, k.issuer = store, auth.NewIssuer(store, clk, nil)
	return k, nil
}

// Fingerprint gives the first 8 bytes of the secret's SHA-256, hex: members
// whose fingerprints differ publish different keys (GET /v1/identity shows
// it; a member learning its peers warns).
func (k *TenantKeys) Fingerprint() string {
	sum := sha256.Sum256(k.secret)
	return hex.EncodeToString(sum[:8])
}

// ensure creates tenant's derived key when the store lacks it.
func (k *TenantKeys) ensure(tenant string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.store.HasTenant(tenant) {
		return nil
	}
	derived, err := hkdf.Key(sha256.New, k.secret, nil, "felix tenant signing key v1\x00"+tenant, 16+32)
	if err != nil {
		return err
	}
	k.next.Reset(derived)
	_, err = k.store.CreateTenant(tenant)
	return err
}

// JWKS gives tenant's JWKS document (its key created first when missing).
// Errors: auth.ErrInvalidName, the store's I/O.
func (k *TenantKeys) JWKS(tenant string) (auth.JWKS, error) {
	if err := k.ensure(tenant); err != nil {
		return auth.JWKS{}, err
	}
	return k.store.JWKS(tenant)
}

// Issue signs a Felix token for subject in tenant with perms, valid for ttl
// (auth.TokenIssuer.Issue: its errors).
func (k *TenantKeys) Issue(tenant, subject string, perms []string, ttl time.Duration) (string, error) {
	if err := k.ensure(tenant); err != nil {
		return "", err
	}
	return k.issuer.Issue(tenant, subject, perms, ttl)
}

// TokenRequest is POST /v1/tenants/{t}/tokens: a client token for subject
// with perms (spec/auth.md §1's "<action>:<object-pattern>"), valid for
// ttl_seconds (default auth.ExchangeTTL, 900).
type TokenRequest struct {
	Subject     string   `json:"subject"`
	Permissions []string `json:"perms"`
	TTLSeconds  int64    `json:"ttl_seconds"`
}

// TokenBody is the answer: the signed token and its lifetime in seconds.
type TokenBody struct {
	Token     string `json:"felix_token"`
	ExpiresIn int64  `json:"expires_in"`
	TokenType string `json:"token_type"`
}

func (h *Handler) keyRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/tenants/{t}/.well-known/jwks.json", h.jwks)
	m.HandleFunc("GET /v1/tenants/{t}/jwks", h.jwks)
	m.HandleFunc("POST /v1/tenants/{t}/tokens", h.write(h.issueToken))
}

// keysFor checks that the member holds tenant keys and that tenant is in its
// catalog (404 otherwise).
func (h *Handler) keysFor(tenant string) (*TenantKeys, error) {
	if h.cfg.Keys == nil {
		return nil, &meta.Refusal{Status: http.StatusNotFound, Code: "not_found", Message: "this member holds no tenant keys"}
	}
	for _, t := range h.cfg.Node.FSM.State().Tenants() {
		if t.TenantID == tenant {
			return h.cfg.Keys, nil
		}
	}
	return nil, &meta.Refusal{Status: http.StatusNotFound, Code: "not_found", Message: "no tenant " + tenant}
}

// jwks serves the tenant's JWKS (no auth: it holds public keys only), from
// the member's own state.
func (h *Handler) jwks(w http.ResponseWriter, r *http.Request) {
	keys, err := h.keysFor(r.PathValue("t"))
	if err != nil {
		h.fail(w, err)
		return
	}
	doc, err := keys.JWKS(r.PathValue("t"))
	if err != nil {
		h.fail(w, err)
		return
	}
	w.Header().Set("Cache-Control", "max-age=3600")
	writeJSON(w, http.StatusOK, doc)
}

// issueToken serves POST /v1/tenants/{t}/tokens (admin token): 200 with the
// token; 400 a bad subject, permission or ttl; 404 an unknown tenant.
func (h *Handler) issueToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	if err := decode(r, &req); err != nil {
		h.fail(w, err)
		return
	}
	tenant := r.PathValue("t")
	keys, err := h.keysFor(tenant)
	if err != nil {
		h.fail(w, err)
		return
	}
	ttl := auth.ExchangeTTL
	if req.TTLSeconds != 0 {
		ttl = time.Duration(req.TTLSeconds) * time.Second
	}
	tok, err := keys.Issue(tenant, req.Subject, req.Permissions, ttl)
	var pe *auth.PermissionError
	switch {
	case errors.Is(err, auth.ErrInvalidName) || errors.Is(err, auth.ErrInvalidTTL) || errors.As(err, &pe):
		h.fail(w, badRequest("%v", err))
		return
	case err != nil:
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, TokenBody{Token: tok, ExpiresIn: int64(ttl / time.Second), TokenType: "Bearer"})
}

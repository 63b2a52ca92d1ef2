package broker

// Client tokens in cluster mode (issue 17 item 3; spec/auth.md §3.3 and §4 step 1;
// docs/controlplane.md, "Which keys verify what"): with FELIX_AUTH on, a broker in cluster
// mode verifies the tokens of its clients (the auth frame) and the credentials of the
// forwards it serves as the owner with the control plane's JWKS of the token's tenant,
// fetched through metaclient, cached, refetched on an unknown kid at most once per
// jwksRefetchInterval per tenant, and kept while the control plane is away (also across a
// restart: jwksFile in the data dir). Its own key
// store (auth.Bootstrap) verifies only its admin API's tokens (its admin token).

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"felix/auth"
	"felix/clock"
	"felix/cluster/meta/metaclient"
)

const (
	// jwksTTL is how long a tenant's fetched JWKS is used before it is fetched again
	// (spec/auth.md §4 step 1: cached 3600 s).
	jwksTTL = 3600 * time.Second
	// jwksRefetchInterval is the least time between two fetches of one tenant's JWKS: a
	// token naming a kid the cached document lacks refetches it at most this often (the
	// spec's PROPOSED rate-limited refetch, so a new key is usable without waiting an hour).
	jwksRefetchInterval = 5 * time.Second
	// jwksFetchTimeout bounds one fetch (every member tried in turn): a verification waits
	// at most this long for a tenant's first document.
	jwksFetchTimeout = 2 * time.Second
)

// cpKeys is the cluster-mode auth.KeySource: per tenant, the control plane's JWKS in an
// auth.JWKSKeySource. Only tenants the control plane's catalog holds (known) are fetched,
// so a token naming any other tenant costs no request and holds no memory. Every document
// fetched is written to path (jwksFile in the data dir; "" writes none), read back at the
// next start. Safe for concurrent use.
type cpKeys struct {
	src   *auth.JWKSKeySource
	fetch func(ctx context.Context, tenant string) (auth.JWKS, error)
	known func(tenant string) bool
	clk   clock.Clock
	warn  func(msg string, args ...any)
	path  string

	mu      sync.Mutex
	tenants map[string]*tenantJWKS
	docs    map[string]heldTenantJWKS // what path holds
}

// jwksFile holds, in the data dir, the tenants' JWKS last fetched (public keys only), so a
// broker restarted while the control plane is away still verifies its clients' tokens.
const jwksFile = "controlplane-jwks.json"

// heldJWKS is jwksFile's JSON (version 1).
type heldJWKS struct {
	Version int                       `json:"version"`
	Tenants map[string]heldTenantJWKS `json:"tenants"`
}

// heldTenantJWKS is one tenant's document and when it was fetched (Unix ns).
type heldTenantJWKS struct {
	Fetched int64     `json:"fetched_unix_nano"`
	JWKS    auth.JWKS `json:"jwks"`
}

// save records tenant's document fetched at t and rewrites path (atomically); a failure is
// logged (a restart then waits for the control plane's JWKS).
func (k *cpKeys) save(tenant string, doc auth.JWKS, t time.Time) {
	if k.path == "" {
		return
	}
	k.mu.Lock()
	k.docs[tenant] = heldTenantJWKS{Fetched: t.UnixNano(), JWKS: doc}
	data, err := json.Marshal(heldJWKS{Version: 1, Tenants: k.docs})
	k.mu.Unlock()
	if err == nil {
		err = WriteFileAtomic(k.path, data)
	}
	if err != nil {
		k.warn("tenant JWKS not written to the data dir", "file", k.path, "err", err)
	}
}

// load installs the documents path holds (none: nothing); a file that does not read or
// decode, or of another version, is logged and ignored (the documents are fetched again).
func (k *cpKeys) load() {
	data, err := os.ReadFile(k.path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var h heldJWKS
	if err == nil {
		err = json.Unmarshal(data, &h)
	}
	if err == nil && h.Version != 1 {
		err = fmt.Errorf("version %d, want 1", h.Version)
	}
	if err != nil {
		k.warn("tenant JWKS held in the data dir not read: fetching them again", "file", k.path, "err", err)
		return
	}
	for tenant, d := range h.Tenants {
		if err := k.src.Set(tenant, d.JWKS); err != nil {
			k.warn("tenant JWKS held in the data dir skipped", "tenant", tenant, "err", err)
			continue
		}
		k.state(tenant).fetched.Store(d.Fetched)
		k.mu.Lock()
		k.docs[tenant] = d
		k.mu.Unlock()
	}
}

// tenantJWKS is one tenant's fetch state; mu serializes its fetches.
type tenantJWKS struct {
	mu      sync.Mutex
	tried   time.Time    // the last fetch attempt (under mu)
	fetched atomic.Int64 // when the last installed document was fetched, Unix ns (0: none yet)
}

// newCPKeys is the key source over fetch (the control plane's client's JWKS call),
// holding its documents in path ("" : none) and starting from those path holds; known
// reports whether the mirror holds a tenant.
func newCPKeys(fetch func(context.Context, string) (auth.JWKS, error), known func(string) bool, clk clock.Clock,
	warn func(string, ...any), path string) *cpKeys {
	k := &cpKeys{src: auth.NewJWKSKeySource(), fetch: fetch, known: known, clk: clk, warn: warn, path: path,
		tenants: map[string]*tenantJWKS{}, docs: map[string]heldTenantJWKS{}}
	if path != "" {
		k.load()
	}
	return k
}

// VerificationKey implements auth.KeySource: kid's key in tenant's cached JWKS, for a
// tenant the control plane's catalog holds (known). A tenant not fetched yet, or a kid the cached document lacks, fetches the document first (waiting
// for a fetch in progress; at most one fetch per jwksRefetchInterval, each bounded by
// jwksFetchTimeout); a document older than jwksTTL is refreshed unless a fetch is in
// progress, and kept when the control plane does not answer. Errors: auth.ErrUnknownKey (a
// tenant the control plane does not hold, a kid it does not publish, or no document fetched
// yet while it is away).
func (k *cpKeys) VerificationKey(tenant, kid string) (ed25519.PublicKey, error) {
	if !k.known(tenant) { // also a tenant the feed dropped: its tokens stop at once
		return nil, auth.ErrUnknownKey
	}
	key, err := k.src.VerificationKey(tenant, kid)
	st := k.state(tenant)
	fresh := st.fetched.Load() != 0 && k.clk.Now().Sub(time.Unix(0, st.fetched.Load())) < jwksTTL
	if err == nil && fresh {
		return key, nil
	}
	k.refresh(tenant, st, err != nil)
	return k.src.VerificationKey(tenant, kid)
}

// Generation implements auth.KeySource: it moves when a refresh drops or changes a key.
func (k *cpKeys) Generation() uint64 { return k.src.Generation() }

// state is tenant's fetch state (made on first use, for known tenants only).
func (k *cpKeys) state(tenant string) *tenantJWKS {
	k.mu.Lock()
	defer k.mu.Unlock()
	st := k.tenants[tenant]
	if st == nil {
		st = &tenantJWKS{}
		k.tenants[tenant] = st
	}
	return st
}

// refresh fetches tenant's JWKS, unless an attempt ran within jwksRefetchInterval, and
// installs it; a failure keeps the document held (logged). wait: wait for a fetch in
// progress (else return at once).
func (k *cpKeys) refresh(tenant string, st *tenantJWKS, wait bool) {
	if wait {
		st.mu.Lock()
	} else if !st.mu.TryLock() {
		return
	}
	defer st.mu.Unlock()
	now := k.clk.Now()
	if !st.tried.IsZero() && now.Sub(st.tried) < jwksRefetchInterval {
		return
	}
	st.tried = now
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	doc, err := k.fetch(ctx, tenant)
	if err == nil {
		err = k.src.Set(tenant, doc)
	}
	var api *metaclient.APIError
	switch {
	case err == nil:
		st.fetched.Store(now.UnixNano())
		k.save(tenant, doc, now)
	case errors.As(err, &api) && api.Status == 404:
		// not (or no longer) a tenant of the control plane: keys held stay until they expire
	default:
		k.warn("control plane: tenant JWKS not fetched: verifying with the keys held", "tenant", tenant, "err", err)
	}
}

// clientVerifier is the verifier of client tokens (the auth frame, and the credentials of
// the forwards served as the owner): in cluster mode with auth on, the control plane's JWKS
// (controlPlane.keys); else the broker's own (auth.Bootstrap's).
func (s *Server) clientVerifier() auth.Verifier {
	if s.clientAuth != nil {
		return s.clientAuth
	}
	return s.authRes.Verifier
}

// openClientAuth installs the cluster-mode client verifier (openControlPlane, after
// auth.Bootstrap): nothing with FELIX_AUTH=off or without cluster mode.
func (cp *controlPlane) openClientAuth() {
	s := cp.s
	if !s.cfg.Auth {
		return
	}
	known := func(tenant string) bool {
		cp.mu.Lock()
		defer cp.mu.Unlock()
		_, ok := cp.mirror.tenants[tenant]
		return ok
	}
	cp.keys = newCPKeys(cp.client.JWKS, known, cp.clk, s.log.Warn, filepath.Join(s.cfg.DataDir, jwksFile))
	s.clientAuth = auth.NewVerifier(auth.VerifierOptions{Keys: cp.keys, Clock: cp.clk})
}

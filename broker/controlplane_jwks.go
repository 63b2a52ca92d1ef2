package broker

// Client tokens in cluster mode (issue 17 item 3; spec/auth.md §3.3 and §4 step 1;
// docs/controlplane.md, "Which keys verify what"): with FELIX_AUTH on, a broker in cluster
// mode verifies the tokens of its clients (the auth frame) and the credentials of the
// forwards it serves as the owner with the control plane's JWKS of the token's tenant,
// fetched through metaclient, cached, refetched on an unknown kid at most once per
// jwksRefetchInterval per tenant, and kept while the control plane is away. Its own key
// store (auth.Bootstrap) verifies only its admin API's tokens (its admin token).

import (
	"context"
	"crypto/ed25519"
	"errors"
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
// so a token naming any other tenant costs no request and holds no memory. Safe for
// concurrent use.
type cpKeys struct {
	src   *auth.JWKSKeySource
	fetch func(ctx context.Context, tenant string) (auth.JWKS, error)
	known func(tenant string) bool
	clk   clock.Clock
	warn  func(msg string, args ...any)

	mu      sync.Mutex
	tenants map[string]*tenantJWKS
}

// tenantJWKS is one tenant's fetch state; mu serializes its fetches.
type tenantJWKS struct {
	mu      sync.Mutex
	tried   time.Time    // the last fetch attempt (under mu)
	fetched atomic.Int64 // when the last installed document was fetched, Unix ns (0: none yet)
}

// newCPKeys is the key source over the control plane's client; known reports whether the
// mirror holds a tenant.
func newCPKeys(c *metaclient.Client, known func(string) bool, clk clock.Clock, warn func(string, ...any)) *cpKeys {
	return &cpKeys{src: auth.NewJWKSKeySource(), fetch: c.JWKS, known: known, clk: clk, warn: warn,
		tenants: map[string]*tenantJWKS{}}
}

// VerificationKey implements auth.KeySource: kid's key in tenant's cached JWKS. A tenant
// not fetched yet, or a kid the cached document lacks, fetches the document first (waiting
// for a fetch in progress; at most one fetch per jwksRefetchInterval, each bounded by
// jwksFetchTimeout); a document older than jwksTTL is refreshed unless a fetch is in
// progress, and kept when the control plane does not answer. Errors: auth.ErrUnknownKey (a
// tenant the control plane does not hold, a kid it does not publish, or no document fetched
// yet while it is away).
func (k *cpKeys) VerificationKey(tenant, kid string) (ed25519.PublicKey, error) {
	key, err := k.src.VerificationKey(tenant, kid)
	st := k.state(tenant)
	fresh := st.fetched.Load() != 0 && k.clk.Now().Sub(time.Unix(0, st.fetched.Load())) < jwksTTL
	if (err == nil && fresh) || !k.known(tenant) {
		return key, err // a tenant the feed dropped keeps its keys until it is refreshed
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
	cp.keys = newCPKeys(cp.client, known, cp.clk, s.log.Warn)
	s.clientAuth = auth.NewVerifier(auth.VerifierOptions{Keys: cp.keys, Clock: cp.clk})
}

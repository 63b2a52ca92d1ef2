package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"felix/auth"
	"felix/clock/clocktest"
	"felix/cluster/meta/metaclient"
)

// jwksFixture is a cpKeys over a control plane stand-in: a key store's JWKS per tenant,
// counting fetches, answering ErrUnavailable while away and 404 for tenants it lacks.
type jwksFixture struct {
	keys    *cpKeys
	store   *auth.KeyStore
	clk     *clocktest.Fake
	fetches atomic.Int32
	away    atomic.Bool
	warned  atomic.Int32
	fetchFn func(context.Context, string) (auth.JWKS, error)
	known   map[string]bool // the tenants of the control plane's catalog
	path    string          // the held documents (jwksFile)
}

func newJWKSFixture(t *testing.T, known ...string) *jwksFixture {
	t.Helper()
	f := &jwksFixture{clk: clocktest.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	store, err := auth.OpenKeyStore(t.TempDir(), auth.KeyStoreOptions{Clock: f.clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateTenant("acme"); err != nil {
		t.Fatal(err)
	}
	f.store = store
	fetch := func(_ context.Context, tenant string) (auth.JWKS, error) {
		f.fetches.Add(1)
		if f.away.Load() {
			return auth.JWKS{}, fmt.Errorf("%w: test: the control plane is away", metaclient.ErrUnavailable)
		}
		doc, err := store.JWKS(tenant)
		if err != nil {
			return auth.JWKS{}, &metaclient.APIError{Status: 404, Code: "not_found", Message: "no tenant " + tenant}
		}
		return doc, nil
	}
	f.fetchFn = fetch
	f.known = map[string]bool{}
	for _, k := range known {
		f.known[k] = true
	}
	f.path = filepath.Join(t.TempDir(), jwksFile)
	f.restart()
	return f
}

// restart is a new cpKeys over the same control plane and data dir (a broker restarted).
func (f *jwksFixture) restart() {
	f.keys = newCPKeys(f.fetchFn, func(t string) bool { return f.known[t] }, f.clk, func(string, ...any) { f.warned.Add(1) }, f.path)
}

// token issues a token of tenant signed with the store's active key.
func (f *jwksFixture) token(t *testing.T, tenant string) string {
	t.Helper()
	tok, err := auth.NewIssuer(f.store, f.clk, nil).Issue(tenant, "svc", []string{"stream.publish:stream:" + tenant + "/prod/*"}, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *jwksFixture) verify(tok string) error {
	_, err := auth.NewVerifier(auth.VerifierOptions{Keys: f.keys, Clock: f.clk, CacheEntries: -1}).Verify(tok)
	return err
}

// TestClusterTokensVerifyWithTheControlPlaneJWKS: the first token of a tenant fetches its
// JWKS once and later ones use the cache; a token under a new kid refetches only after the
// rate limit; a tenant the control plane's catalog lacks is refused without a fetch; a
// tenant it holds without keys (404) is refused; past the TTL, with the control plane away,
// the held keys keep verifying (and the failed refresh is logged).
func TestClusterTokensVerifyWithTheControlPlaneJWKS(t *testing.T) {
	f := newJWKSFixture(t, "acme", "ghost")
	first := f.token(t, "acme")
	for range 3 {
		if err := f.verify(first); err != nil {
			t.Fatalf("a control-plane token: %v", err)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("fetches after three verifications: %d, want 1", n)
	}
	if _, err := f.store.Rotate("acme"); err != nil {
		t.Fatal(err)
	}
	rotated := f.token(t, "acme")
	f.clk.Advance(jwksRefetchInterval / 2)
	if err := f.verify(rotated); !errors.Is(err, auth.ErrUnauthorized) || f.fetches.Load() != 1 {
		t.Fatalf("a new kid within the rate limit: %v, %d fetches (want refused, 1)", err, f.fetches.Load())
	}
	f.clk.Advance(jwksRefetchInterval / 2)
	if err := f.verify(rotated); err != nil || f.fetches.Load() != 2 {
		t.Fatalf("a new kid after the rate limit: %v, %d fetches (want accepted, 2)", err, f.fetches.Load())
	}
	if err := f.verify(f.token(t, "acme")); err != nil || f.fetches.Load() != 2 {
		t.Fatalf("the cached new kid: %v, %d fetches", err, f.fetches.Load())
	}
	if _, err := f.store.CreateTenant("stranger"); err != nil {
		t.Fatal(err)
	}
	if err := f.verify(f.token(t, "stranger")); !errors.Is(err, auth.ErrUnauthorized) || f.fetches.Load() != 2 {
		t.Fatalf("a tenant the control plane lacks: %v, %d fetches (want refused, none)", err, f.fetches.Load())
	}
	if _, err := f.keys.VerificationKey("ghost", "00"); !errors.Is(err, auth.ErrUnknownKey) || f.fetches.Load() != 3 || f.warned.Load() != 0 {
		t.Fatalf("a known tenant without keys: %v, %d fetches, %d warnings", err, f.fetches.Load(), f.warned.Load())
	}
	f.away.Store(true)
	f.clk.Advance(jwksTTL)
	if err := f.verify(rotated); err != nil || f.fetches.Load() != 4 || f.warned.Load() != 1 {
		t.Fatalf("past the TTL with the control plane away: %v, %d fetches, %d warnings (want accepted, 4, 1)",
			err, f.fetches.Load(), f.warned.Load())
	}
}

// TestClusterTokensAcrossARestart: the documents fetched are held in the data dir, so a
// broker restarted while the control plane is away verifies the tokens it verified before
// without a fetch; a tenant the control plane's catalog no longer holds is refused at
// once, its keys held or not.
func TestClusterTokensAcrossARestart(t *testing.T) {
	f := newJWKSFixture(t, "acme")
	tok := f.token(t, "acme")
	if err := f.verify(tok); err != nil || f.fetches.Load() != 1 {
		t.Fatalf("before the restart: %v, %d fetches", err, f.fetches.Load())
	}
	f.away.Store(true)
	f.restart()
	if err := f.verify(tok); err != nil || f.fetches.Load() != 1 || f.warned.Load() != 0 {
		t.Fatalf("restarted while the control plane is away: %v, %d fetches, %d warnings (want accepted, 1, 0)",
			err, f.fetches.Load(), f.warned.Load())
	}
	delete(f.known, "acme")
	if err := f.verify(tok); !errors.Is(err, auth.ErrUnauthorized) || f.fetches.Load() != 1 {
		t.Fatalf("a tenant the control plane dropped: %v, %d fetches (want refused, 1)", err, f.fetches.Load())
	}
}

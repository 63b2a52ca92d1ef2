package auth

import (
	"crypto/ed25519"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"felix/clock/clocktest"
	"felix/internal/testseed"
)

// fakeClock is the module's fake clock (clock/clocktest.Fake).
type fakeClock = clocktest.Fake

// newFakeClock returns a Fake at 2026-03-01T12:00:00Z for deterministic expiry tests.
func newFakeClock() *fakeClock {
	return clocktest.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

// seededRand is a deterministic randomness source for t: seed, mixed with the test's seed
// (FELIX_TEST_SEED when set, else 0: the same keys every run).
func seededRand(t testing.TB, seed byte) *rand.ChaCha8 {
	t.Helper()
	var s [32]byte
	s[0] = seed
	binary.LittleEndian.PutUint64(s[1:9], testSeed(t))
	return rand.NewChaCha8(s)
}

// testSeeds holds each running test's seed, so a test that builds several sources logs
// its seed once.
var testSeeds sync.Map // testing.TB → uint64

// testSeed returns t's seed (testseed.Seed, default 0), taken and logged once per test.
func testSeed(t testing.TB) uint64 {
	t.Helper()
	if seed, ok := testSeeds.Load(t); ok {
		return seed.(uint64)
	}
	seed := testseed.Seed(t, 0)
	testSeeds.Store(t, seed)
	t.Cleanup(func() { testSeeds.Delete(t) })
	return seed
}

// fixture is a key store with tenants "ta" and "tb", an issuer and a verifier on one clock.
type fixture struct {
	dir      string
	clock    *fakeClock
	keys     *KeyStore
	issuer   *TokenIssuer
	verifier *TokenVerifier
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), clock: newFakeClock()}
	var err error
	f.keys, err = OpenKeyStore(f.dir, KeyStoreOptions{Clock: f.clock, Rand: seededRand(t, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"ta", "tb"} {
		if _, err := f.keys.CreateTenant(tenant); err != nil {
			t.Fatal(err)
		}
	}
	f.issuer = NewIssuer(f.keys, f.clock, seededRand(t, 2))
	f.verifier = NewVerifier(VerifierOptions{Keys: f.keys, Clock: f.clock})
	return f
}

func (f *fixture) issue(t testing.TB, tenant string, perms ...string) string {
	t.Helper()
	token, err := f.issuer.Issue(tenant, "alice", perms, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// rawClaims are valid claims for tenant as the issuer would write them, to be altered.
func (f *fixture) rawClaims(tenant string) claims {
	now := f.clock.Now()
	return claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Audience: jwt.ClaimStrings{Audience}, Subject: "mallory",
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		},
		Tenant:      tenant,
		Permissions: AdminPermissions(tenant),
	}
}

// sign signs c with method and key, setting the kid header when kid != "".
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c claims) string {
	t.Helper()
	token := jwt.NewWithClaims(method, c)
	if kid != "" {
		token.Header["kid"] = kid
	}
	s, err := token.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) signingKey(t testing.TB, tenant string) (string, ed25519.PrivateKey) {
	t.Helper()
	kid, key, err := f.keys.signingKey(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return kid, key
}

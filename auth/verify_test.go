package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func wantRefused(t *testing.T, v Verifier, token, reason string) {
	t.Helper()
	p, err := v.Verify(token)
	var te *TokenError
	if p != nil || !errors.Is(err, ErrUnauthorized) || !errors.As(err, &te) {
		t.Fatalf("got principal %v, err %v; want a *TokenError", p, err)
	}
	if reason != "" && te.Reason != reason {
		t.Fatalf("reason %q, want %q (%v)", te.Reason, reason, err)
	}
	if WireText(err) != "auth required" {
		t.Fatalf("wire text %q", WireText(err))
	}
}

func TestIssueVerifyRoundTrip(t *testing.T) {
	f := newFixture(t)
	token := f.issue(t, "ta", "stream.publish:stream:ta/ns/s", "cache.read:cache:ta/ns/*")
	p, err := f.verifier.Verify(token)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "ta" || p.Subject != "alice" || !p.Expires.Equal(f.clock.Now().Add(time.Hour)) || !p.IssuedAt.Equal(f.clock.Now()) {
		t.Fatalf("principal %+v", p)
	}
	if len(p.Permissions) != 2 || p.Permissions[0] != "stream.publish:stream:ta/ns/s" {
		t.Fatalf("perms %v", p.Permissions)
	}
	// Header and claim names are the spec's (spec/auth.md §3.1).
	parsed, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	mc := parsed.Claims.(jwt.MapClaims)
	kid, _, _ := f.keys.signingKey("ta")
	if parsed.Header["alg"] != "EdDSA" || parsed.Header["kid"] != kid {
		t.Fatalf("header %v", parsed.Header)
	}
	for _, claim := range []string{"iss", "aud", "sub", "tid", "iat", "exp", "jti", "perms"} {
		if _, ok := mc[claim]; !ok {
			t.Errorf("claim %s missing: %v", claim, mc)
		}
	}
	if mc["iss"] != "felix-auth" || mc["tid"] != "ta" {
		t.Errorf("claims %v", mc)
	}
}

func TestIssueRejectsBadInput(t *testing.T) {
	f := newFixture(t)
	ok := []string{"stream.publish:stream:ta/ns/s"}
	for name, c := range map[string]struct {
		tenant, subject string
		perms           []string
		ttl             time.Duration
		want            error
	}{
		"cross-tenant perm":  {"ta", "a", []string{"stream.publish:stream:tb/ns/s"}, time.Hour, ErrInvalidPermission},
		"tenant wildcard":    {"ta", "a", []string{"tenant.manage:tenant:*"}, time.Hour, ErrInvalidPermission},
		"stream wildcard":    {"ta", "a", []string{"stream.publish:stream:*"}, time.Hour, ErrInvalidPermission},
		"unknown action":     {"ta", "a", []string{"stream.delete:stream:ta/ns/s"}, time.Hour, ErrInvalidPermission},
		"no perms":           {"ta", "a", nil, time.Hour, ErrInvalidPermission},
		"unknown tenant":     {"tz", "a", []string{"stream.publish:stream:tz/ns/s"}, time.Hour, ErrUnknownTenant},
		"empty subject":      {"ta", "", ok, time.Hour, ErrInvalidName},
		"long subject":       {"ta", strings.Repeat("s", 256), ok, time.Hour, ErrInvalidName},
		"control in subject": {"ta", "a\nb", ok, time.Hour, ErrInvalidName},
		"zero ttl":           {"ta", "a", ok, 0, ErrInvalidTTL},
		"negative ttl":       {"ta", "a", ok, -time.Second, ErrInvalidTTL},
		"ttl too long":       {"ta", "a", ok, MaxTokenTTL + time.Second, ErrInvalidTTL},
	} {
		if _, err := f.issuer.Issue(c.tenant, c.subject, c.perms, c.ttl); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// Item 5: a token of tenant A cannot publish, subscribe, read or write in tenant B.
func TestTenantIsolation(t *testing.T) {
	f := newFixture(t)
	tokenA := f.issue(t, "ta", AdminPermissions("ta")...)
	if _, err := Authenticate(f.verifier, "tb", tokenA); err != ErrTenantMismatch {
		t.Fatalf("auth frame for tb with ta's token: %v", err)
	}
	p, err := Authenticate(f.verifier, "ta", tokenA)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []Action{ActionStreamPublish, ActionStreamSubscribe, ActionCacheRead, ActionCacheWrite} {
		if err := p.Allow(a, "ta", "ns", "x"); err != nil {
			t.Errorf("%v in own tenant: %v", a, err)
		}
		if err := p.Allow(a, "tb", "ns", "x"); err != ErrTenantMismatch {
			t.Errorf("%v in tb: %v", a, err)
		}
	}

	// A token claiming tb but signed with ta's key names a kid tb does not have.
	kidA, keyA := f.signingKey(t, "ta")
	c := f.rawClaims("tb")
	wantRefused(t, f.verifier, sign(t, jwt.SigningMethodEdDSA, keyA, kidA, c), "unknown key")

	// Even a (hand-signed) token of ta whose perms name tb objects cannot act in tb.
	c = f.rawClaims("ta")
	c.Permissions = []string{"stream.publish:stream:tb/ns/*", "stream.publish:stream:*"}
	p, err = f.verifier.Verify(sign(t, jwt.SigningMethodEdDSA, keyA, kidA, c))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Allow(ActionStreamPublish, "tb", "ns", "x"); err != ErrTenantMismatch {
		t.Fatalf("cross-tenant perm honoured: %v", err)
	}
}

// Item 5: a missing permission is refused.
func TestMissingPermissionRefused(t *testing.T) {
	f := newFixture(t)
	p, err := f.verifier.Verify(f.issue(t, "ta", "stream.subscribe:stream:ta/ns/*", "cache.read:cache:ta/ns/c"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a   Action
		obj string
	}{{ActionStreamPublish, "s"}, {ActionCacheWrite, "c"}, {ActionCacheRead, "other"}, {ActionStreamManage, "s"}} {
		if err := p.Allow(c.a, "ta", "ns", c.obj); err != ErrForbidden || WireText(err) != "forbidden" {
			t.Errorf("%v on %s: %v", c.a, c.obj, err)
		}
	}
}

// Item 5: expired, not-yet-valid, wrong-audience, forged, alg none, HS256-with-the-public-key
// and unknown-kid tokens are refused.
func TestRefusedTokens(t *testing.T) {
	f := newFixture(t)
	kid, key := f.signingKey(t, "ta")
	pub := key.Public().(ed25519.PublicKey)
	_, otherKey, _ := ed25519.GenerateKey(seededRand(t, 9))
	now := f.clock.Now()

	expired := f.rawClaims("ta")
	expired.ExpiresAt = jwt.NewNumericDate(now.Add(-Leeway - time.Second))
	notYet := f.rawClaims("ta")
	notYet.NotBefore = jwt.NewNumericDate(now.Add(Leeway + time.Second))
	wrongAud := f.rawClaims("ta")
	wrongAud.Audience = jwt.ClaimStrings{"someone-else"}
	wrongIss := f.rawClaims("ta")
	wrongIss.Issuer = "felix-auth-impostor"
	noExp := f.rawClaims("ta")
	noExp.ExpiresAt = nil
	noSub := f.rawClaims("ta")
	noSub.Subject = ""

	valid := sign(t, jwt.SigningMethodEdDSA, key, kid, f.rawClaims("ta"))
	parts := strings.Split(valid, ".")
	tamperedClaims := f.rawClaims("ta")
	tamperedClaims.Subject = "root"
	tampered := strings.Split(sign(t, jwt.SigningMethodEdDSA, key, kid, tamperedClaims), ".")

	cases := map[string]struct{ token, reason string }{
		"expired":           {sign(t, jwt.SigningMethodEdDSA, key, kid, expired), "token expired"},
		"not yet valid":     {sign(t, jwt.SigningMethodEdDSA, key, kid, notYet), "token not yet valid"},
		"wrong audience":    {sign(t, jwt.SigningMethodEdDSA, key, kid, wrongAud), "wrong audience"},
		"wrong issuer":      {sign(t, jwt.SigningMethodEdDSA, key, kid, wrongIss), "wrong issuer"},
		"no exp":            {sign(t, jwt.SigningMethodEdDSA, key, kid, noExp), "missing claim"},
		"no sub":            {sign(t, jwt.SigningMethodEdDSA, key, kid, noSub), "missing sub, tid or iat"},
		"forged signature":  {sign(t, jwt.SigningMethodEdDSA, otherKey, kid, f.rawClaims("ta")), "signature invalid"},
		"swapped payload":   {parts[0] + "." + tampered[1] + "." + parts[2], "signature invalid"},
		"alg none":          {sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, f.rawClaims("ta")), "signature invalid"},
		"HS256 public key":  {sign(t, jwt.SigningMethodHS256, []byte(pub), kid, f.rawClaims("ta")), "signature invalid"},
		"HS256 b64 pub key": {sign(t, jwt.SigningMethodHS256, []byte(base64.RawURLEncoding.EncodeToString(pub)), kid, f.rawClaims("ta")), "signature invalid"},
		"unknown kid":       {sign(t, jwt.SigningMethodEdDSA, key, "00112233445566778899aabbccddeeff", f.rawClaims("ta")), "unknown key"},
		"no kid":            {sign(t, jwt.SigningMethodEdDSA, key, "", f.rawClaims("ta")), "missing kid"},
		"unknown tenant":    {sign(t, jwt.SigningMethodEdDSA, key, kid, f.rawClaims("tz")), "unknown key"},
		"empty":             {"", "missing token"},
		"garbage":           {"not.a.jwt", "malformed token"},
		"two segments":      {parts[0] + "." + parts[1], "malformed token"},
		"too large":         {strings.Repeat("a", MaxTokenBytes+1), "token too large"},
		"padded base64":     {parts[0] + "=." + parts[1] + "." + parts[2], "malformed token"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) { wantRefused(t, f.verifier, c.token, c.reason) })
	}
	if _, err := f.verifier.Verify(valid); err != nil {
		t.Fatalf("the untouched token must verify: %v", err)
	}
}

func TestExpiryLeewayWithFakeClock(t *testing.T) {
	f := newFixture(t)
	token := f.issue(t, "ta", "stream.publish:stream:ta/ns/s")
	uncached := NewVerifier(VerifierOptions{Keys: f.keys, Clock: f.clock, CacheEntries: -1})
	for _, v := range []*TokenVerifier{f.verifier, uncached} {
		if _, err := v.Verify(token); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Advance(time.Hour + Leeway - time.Second) // inside the 60 s leeway
	for _, v := range []*TokenVerifier{f.verifier, uncached} {
		if _, err := v.Verify(token); err != nil {
			t.Fatalf("within leeway: %v", err)
		}
	}
	f.clock.Advance(2 * time.Second)
	for _, v := range []*TokenVerifier{f.verifier, uncached} {
		wantRefused(t, v, token, "token expired")
	}
	if n := f.verifier.CachedEntries(); n != 0 {
		t.Fatalf("expired token still cached: %d entries", n)
	}
}

// Item 5: rotation keeps old tokens valid until their key is removed.
func TestRotationKeepsOldTokensUntilRemoved(t *testing.T) {
	f := newFixture(t)
	oldKid, _, _ := f.keys.signingKey("ta")
	oldToken := f.issue(t, "ta", "stream.publish:stream:ta/ns/s")
	if _, err := f.verifier.Verify(oldToken); err != nil { // now cached
		t.Fatal(err)
	}
	newKid, err := f.keys.Rotate("ta")
	if err != nil {
		t.Fatal(err)
	}
	newToken := f.issue(t, "ta", "stream.publish:stream:ta/ns/s")
	fresh := NewVerifier(VerifierOptions{Keys: f.keys, Clock: f.clock})
	for _, v := range []*TokenVerifier{f.verifier, fresh} {
		for _, tok := range []string{oldToken, newToken} {
			if _, err := v.Verify(tok); err != nil {
				t.Fatalf("after rotate: %v", err)
			}
		}
	}
	if err := f.keys.RemoveKey(newKid); !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("removing the active key: %v", err)
	}
	if err := f.keys.RemoveKey(oldKid); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*TokenVerifier{f.verifier, fresh} { // f.verifier had it cached
		wantRefused(t, v, oldToken, "unknown key")
		if _, err := v.Verify(newToken); err != nil {
			t.Fatalf("new token after removal: %v", err)
		}
	}
	if err := f.keys.RemoveKey(oldKid); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("second removal: %v", err)
	}
}

func TestCacheHitIsSharedAndBounded(t *testing.T) {
	f := newFixture(t)
	f.verifier = NewVerifier(VerifierOptions{Keys: f.keys, Clock: f.clock, CacheEntries: 4})
	token := f.issue(t, "ta", "stream.publish:stream:ta/ns/s")
	p1, err := f.verifier.Verify(token)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := f.verifier.Verify(token)
	if p1 != p2 {
		t.Fatal("second Verify did not come from the cache")
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.verifier.Verify(token); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("cached Verify allocates %.1f times", allocs)
	}
	for i := 0; i < 20; i++ {
		f.clock.Advance(time.Second) // distinct iat/exp ⇒ distinct tokens
		if _, err := f.verifier.Verify(f.issue(t, "ta", "stream.publish:stream:ta/ns/s")); err != nil {
			t.Fatal(err)
		}
		if n := f.verifier.CachedEntries(); n > 4 {
			t.Fatalf("cache grew to %d entries, bound 4", n)
		}
	}
}

func TestDisabledVerifierAllowsEverything(t *testing.T) {
	for _, token := range []string{"", "garbage"} {
		p, err := Authenticate(DisabledVerifier{}, "any-tenant", token)
		if err != nil || !p.AllowsAll() || p.Tenant != "any-tenant" {
			t.Fatalf("disabled: %v %v", p, err)
		}
		if err := p.Allow(ActionCacheWrite, "other-tenant", "ns", "c"); err != nil {
			t.Fatalf("disabled Allow: %v", err)
		}
	}
}

// A v1-shaped token (aud as a plain string, no jti) verifies too: RFC 7519 §4.1.3 allows both.
func TestAudienceAsPlainString(t *testing.T) {
	f := newFixture(t)
	kid, key := f.signingKey(t, "ta")
	now := f.clock.Now().Unix()
	token := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{
		"iss": Issuer, "aud": Audience, "sub": strings.Repeat("ab", 32), "tid": "ta",
		"iat": now, "exp": now + 900, "perms": []string{"stream.publish:stream:ta/payments/*"},
	})
	token.Header["kid"] = kid
	signed, err := token.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Authenticate(f.verifier, "ta", signed)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Allow(ActionStreamPublish, "ta", "payments", "orders"); err != nil {
		t.Fatal(err)
	}
}

// Concurrent verification, rotation and removal: run under -race; every outcome is either a
// principal or a typed refusal.
func TestConcurrentVerifyAndRotate(t *testing.T) {
	f := newFixture(t)
	tokens := []string{f.issue(t, "ta", "cache.read:cache:ta/ns/*"), f.issue(t, "tb", "cache.read:cache:tb/ns/*")}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 5; i++ {
			old, _, _ := f.keys.signingKey("ta")
			if _, err := f.keys.Rotate("ta"); err != nil {
				t.Error(err)
				return
			}
			if err := f.keys.RemoveKey(old); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				p, err := f.verifier.Verify(tokens[i%2])
				if err != nil && !errors.Is(err, ErrUnauthorized) {
					t.Errorf("untyped %v", err)
				}
				if err == nil && p.Allow(ActionCacheRead, p.Tenant, "ns", "c") != nil {
					t.Error("verified principal lost its grant")
				}
			}
		}()
	}
	wg.Wait()
	<-done
	wantRefused(t, f.verifier, tokens[0], "unknown key") // its key was removed
	if _, err := f.verifier.Verify(tokens[1]); err != nil {
		t.Fatal(err)
	}
}

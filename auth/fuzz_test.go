package auth

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
)

// FuzzVerify: no token string makes Verify panic, and whatever verifies is a real token of
// a known tenant (only the seeds issued below can).
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	kid, key := fx.signingKey(f, "ta")
	good := fx.issue(f, "ta", "stream.publish:stream:ta/ns/*")
	f.Add(good)
	f.Add(fx.issue(f, "tb", AdminPermissions("tb")...))
	f.Add(sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, fx.rawClaims("ta")))
	f.Add(sign(f, jwt.SigningMethodHS256, []byte(key.Public().(ed25519.PublicKey)), kid, fx.rawClaims("ta")))
	f.Add("")
	f.Add("..")
	f.Add("eyJhbGciOiJFZERTQSJ9..")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Fuzz(func(t *testing.T, token string) {
		p, err := fx.verifier.Verify(token)
		if err != nil {
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if p.Tenant != "ta" && p.Tenant != "tb" {
			t.Fatalf("verified a token of tenant %q", p.Tenant)
		}
		_ = p.Allow(ActionStreamPublish, p.Tenant, "ns", "s")
	})
}

// FuzzParsePermission: no string panics the strict parser, and every accepted permission
// allows at least one concrete object of its own tenant and nothing in another tenant.
func FuzzParsePermission(f *testing.F) {
	for _, s := range append(AdminPermissions("t1"),
		"stream.publish:stream:t1/ns/*", "cache.read:cache:t1/ns/c", "ns.manage:namespace:t1/*",
		"stream.publish:stream:*", "tenant.manage:tenant:*", "cache.write:cache:t1/ns/a*b") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, perm string) {
		p, err := ParsePermission("t1", perm)
		if err != nil {
			if !errors.Is(err, ErrInvalidPermission) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		principal := newPrincipal("t1", "fuzz", time.Unix(0, 0), time.Unix(1, 0), []string{perm})
		rest := strings.TrimPrefix(p.Pattern, kindPrefixes[p.Action.kind()])
		segments := append(strings.Split(strings.ReplaceAll(rest, "*", "concrete"), "/"), "", "")
		if err := principal.Allow(p.Action, segments[0], segments[1], segments[2]); err != nil {
			t.Fatalf("%q does not allow its own object %v: %v", perm, segments[:3], err)
		}
		if err := principal.Allow(p.Action, "t2", segments[1], segments[2]); err != ErrTenantMismatch {
			t.Fatalf("%q reached tenant t2: %v", perm, err)
		}
	})
}

// FuzzGlobMatch compares the matcher with an anchored regular expression.
func FuzzGlobMatch(f *testing.F) {
	f.Add("stream:t/*", "stream:t/ns/s")
	f.Add("a*b*c", "abcabc")
	f.Add("**", "")
	f.Add("x*", "y")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 64 || len(s) > 256 || !utf8.ValidString(pattern) || !utf8.ValidString(s) {
			return
		}
		parts := strings.Split(pattern, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile(`^(?s:` + strings.Join(parts, ".*") + `)$`)
		if got, want := globMatch(pattern, []byte(s)), re.MatchString(s); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, regexp says %v", pattern, s, got, want)
		}
	})
}

// FuzzDecodeStoreFile: keys.json contents never panic the decoder, and an accepted file
// installs and re-encodes to an accepted file.
func FuzzDecodeStoreFile(f *testing.F) {
	fx := newFixture(f)
	if _, err := fx.keys.Rotate("ta"); err != nil {
		f.Fatal(err)
	}
	seed, _ := json.Marshal(fx.keys.file)
	f.Add(seed)
	f.Add([]byte(`{"version":1,"tenants":[]}`))
	f.Add([]byte(`{"version":1,"tenants":[{"id":"t","keys":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := decodeStoreFile(data)
		if err != nil {
			if !errors.Is(err, ErrCorruptKeyStore) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		ks := &KeyStore{}
		ks.install(file)
		again, _ := json.Marshal(ks.file)
		if _, err := decodeStoreFile(again); err != nil {
			t.Fatalf("re-encoded file refused: %v", err)
		}
	})
}

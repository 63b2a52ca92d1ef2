package auth

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func jwksBytes(t testing.TB, ks *KeyStore, tenant string) []byte {
	t.Helper()
	doc, err := ks.JWKS(tenant)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestJWKSKeySourceVerifiesStoreTokens(t *testing.T) {
	f := newFixture(t)
	source := NewJWKSKeySource()
	verifier := NewVerifier(VerifierOptions{Keys: source, Clock: f.clock})
	token := f.issue(t, "ta", "stream.publish:stream:ta/ns/*")
	wantRefused(t, verifier, token, "unknown key") // nothing fetched yet

	doc, err := ParseJWKS(jwksBytes(t, f.keys, "ta"))
	if err != nil {
		t.Fatal(err)
	}
	if err := source.Set("ta", doc); err != nil {
		t.Fatal(err)
	}
	if _, err := Authenticate(verifier, "ta", token); err != nil {
		t.Fatal(err)
	}

	// Rotate: the refetched document keeps the old key, so the cached token stays valid.
	oldKid, _, _ := f.keys.signingKey("ta")
	if _, err := f.keys.Rotate("ta"); err != nil {
		t.Fatal(err)
	}
	generation := source.Generation()
	doc, _ = ParseJWKS(jwksBytes(t, f.keys, "ta"))
	if err := source.Set("ta", doc); err != nil || source.Generation() != generation {
		t.Fatalf("adding a key moved the generation or failed: %v", err)
	}
	if _, err := verifier.Verify(token); err != nil {
		t.Fatal(err)
	}
	// Remove: the next document lacks the kid; the cached token is refused at once.
	if err := f.keys.RemoveKey(oldKid); err != nil {
		t.Fatal(err)
	}
	doc, _ = ParseJWKS(jwksBytes(t, f.keys, "ta"))
	if err := source.Set("ta", doc); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, verifier, token, "unknown key")
	// Tenant tb's token does not verify with ta's document.
	wantRefused(t, verifier, f.issue(t, "tb", "cache.read:cache:tb/ns/*"), "unknown key")
}

func TestParseJWKSRejects(t *testing.T) {
	good := `{"kty":"OKP","kid":"k1","alg":"EdDSA","use":"sig","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `"}`
	if _, err := ParseJWKS([]byte(`{"keys":[` + good + `]}`)); err != nil {
		t.Fatalf("good document: %v", err)
	}
	for name, doc := range map[string]string{
		"not json":     `{"keys":`,
		"no keys":      `{"keys":[]}`,
		"rsa":          `{"keys":[{"kty":"RSA","kid":"k","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `"}]}`,
		"x25519":       `{"keys":[{"kty":"OKP","kid":"k","crv":"X25519","x":"` + strings.Repeat("A", 43) + `"}]}`,
		"alg HS256":    `{"keys":[{"kty":"OKP","kid":"k","alg":"HS256","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `"}]}`,
		"use enc":      `{"keys":[{"kty":"OKP","kid":"k","use":"enc","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `"}]}`,
		"short x":      `{"keys":[{"kty":"OKP","kid":"k","crv":"Ed25519","x":"AAAA"}]}`,
		"padded x":     `{"keys":[{"kty":"OKP","kid":"k","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `="}]}`,
		"empty kid":    `{"keys":[{"kty":"OKP","kid":"","crv":"Ed25519","x":"` + strings.Repeat("A", 43) + `"}]}`,
		"repeated kid": `{"keys":[` + good + `,` + good + `]}`,
		"too large":    `{"keys":[` + strings.Repeat(" ", MaxJWKSBytes) + `]}`,
	} {
		if _, err := ParseJWKS([]byte(doc)); !errors.Is(err, ErrInvalidJWKS) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := NewJWKSKeySource().Set("a/b", JWKS{}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad tenant: %v", err)
	}
	if err := NewJWKSKeySource().Set("t", JWKS{}); !errors.Is(err, ErrInvalidJWKS) {
		t.Errorf("empty doc: %v", err)
	}
}

// FuzzParseJWKS: no document panics the decoder, and an accepted one is accepted by Set.
func FuzzParseJWKS(f *testing.F) {
	fx := newFixture(f)
	if _, err := fx.keys.Rotate("ta"); err != nil {
		f.Fatal(err)
	}
	f.Add(jwksBytes(f, fx.keys, "ta"))
	f.Add([]byte(`{"keys":[]}`))
	f.Add([]byte(`{"keys":[{"kty":"OKP"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := ParseJWKS(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidJWKS) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if err := NewJWKSKeySource().Set("t", doc); err != nil {
			t.Fatalf("parsed document refused by Set: %v", err)
		}
	})
}

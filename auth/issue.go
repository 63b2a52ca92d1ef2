package auth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"felix/clock"
)

// Token claim values of spec/auth.md §3.1.
const (
	// Issuer is the iss of every Felix token.
	Issuer = "felix-auth"
	// Audience is the aud of every Felix token.
	Audience = "felix-broker"
	// MaxTokenTTL bounds a token's lifetime at issue (docs/auth.md).
	MaxTokenTTL = 366 * 24 * time.Hour
	// ExchangeTTL is the v1 lifetime of an exchanged token (spec/auth.md §3.1, 900 s).
	ExchangeTTL = 900 * time.Second
)

// claims is the JSON payload of a Felix token (spec/auth.md §3.1): iss, aud, sub, iat, exp,
// jti from RegisteredClaims, plus tid and perms.
type claims struct {
	jwt.RegisteredClaims
	Tenant      string   `json:"tid"`
	Permissions []string `json:"perms"`
}

// TokenIssuer mints Felix tokens with a tenant's active key from a KeyStore. Safe for
// concurrent use.
type TokenIssuer struct {
	keys *KeyStore
	now  func() time.Time
	rand io.Reader
}

// NewIssuer returns an issuer signing with keys. clk and random may be nil (clock.Real(),
// crypto/rand.Reader); tests pass clock/clocktest.Fake.
func NewIssuer(keys *KeyStore, clk clock.Clock, random io.Reader) *TokenIssuer {
	now := time.Now
	if clk != nil {
		now = clk.Now
	}
	if random == nil {
		random = rand.Reader
	}
	return &TokenIssuer{keys: keys, now: now, rand: random}
}

// Issue signs a token for subject in tenant carrying perms, valid for ttl from now (second
// precision): header {"alg":"EdDSA","kid":<active kid>,"typ":"JWT"}, claims iss=felix-auth,
// aud=felix-broker, sub, tid, iat, exp, jti (16 random bytes, hex), perms.
//
// Every permission is validated with ParsePermissions for tenant (spec/auth.md §1) and
// stored exactly as given. Errors: ErrInvalidName (subject empty, over MaxNameBytes bytes,
// not UTF-8 or with control bytes), ErrInvalidTTL (ttl ≤ 0 or > MaxTokenTTL),
// *PermissionError, ErrUnknownTenant, random-source errors.
func (is *TokenIssuer) Issue(tenant, subject string, perms []string, ttl time.Duration) (string, error) {
	if !validSubject(subject) {
		return "", fmt.Errorf("auth: subject %q: %w", subject, ErrInvalidName)
	}
	if ttl <= 0 || ttl > MaxTokenTTL {
		return "", fmt.Errorf("auth: ttl %v: %w", ttl, ErrInvalidTTL)
	}
	if _, err := ParsePermissions(tenant, perms); err != nil {
		return "", err
	}
	kid, private, err := is.keys.signingKey(tenant)
	if err != nil {
		return "", err
	}
	var jti [16]byte
	if _, err := io.ReadFull(is.rand, jti[:]); err != nil {
		return "", fmt.Errorf("auth: random jti: %w", err)
	}
	now := is.now().Truncate(time.Second)
	token := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Audience:  jwt.ClaimStrings{Audience},
			Subject:   subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			ID:        hex.EncodeToString(jti[:]),
		},
		Tenant:      tenant,
		Permissions: append([]string(nil), perms...),
	})
	token.Header["kid"] = kid
	signed, err := token.SignedString(private)
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	return signed, nil
}

// validSubject: 1..MaxNameBytes bytes of UTF-8 without control bytes (spaces allowed).
func validSubject(s string) bool {
	if len(s) == 0 || len(s) > MaxNameBytes || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

package auth

import (
	"encoding/base64"
	"fmt"
)

// JWK is one key of a JWKS document (spec/auth.md §3.3): an Ed25519 public key.
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Kid string `json:"kid"`
	Alg string `json:"alg"` // "EdDSA"
	Use string `json:"use"` // "sig"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // base64url without padding, 32 bytes
}

// JWKS is the document served at GET /v1/tenants/{tenant_id}/.well-known/jwks.json
// (spec/auth.md §3.3). Marshal it with encoding/json.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWKS renders tenant's verifying keys (active and verify-only; removed keys are left out),
// oldest first. Errors: ErrUnknownTenant.
func (ks *KeyStore) JWKS(tenant string) (JWKS, error) {
	infos, err := ks.Keys(tenant)
	if err != nil {
		return JWKS{}, err
	}
	doc := JWKS{Keys: []JWK{}}
	for _, info := range infos {
		if info.State == KeyRemoved {
			continue
		}
		doc.Keys = append(doc.Keys, JWK{
			Kty: "OKP", Kid: info.Kid, Alg: "EdDSA", Use: "sig", Crv: "Ed25519",
			X: base64.RawURLEncoding.EncodeToString(info.Public),
		})
	}
	if len(doc.Keys) == 0 {
		return JWKS{}, fmt.Errorf("auth: tenant %q has no verifying key: %w", tenant, ErrCorruptKeyStore)
	}
	return doc, nil
}

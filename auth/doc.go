// Package auth holds Felix's tenants, their Ed25519 signing keys, the JWT tokens those keys
// sign, and the permission checks the broker runs on every operation.
//
// Specification: shared/spec/auth.md (resource model §1, actions and inheritance §2, tokens
// §3.1, keys and JWKS §3.3, broker verification §4, forwarded credentials §5) and
// seeds/internal-protocol.txt, "Authorization across a forward". Decisions this package
// makes where the spec says PROPOSED are written down in docs/auth.md.
//
// The pieces:
//
//   - KeyStore: tenants → Ed25519 keys by kid, persisted as <dataDir>/auth/keys.json (mode
//     0600, written temp+fsync+rename through the FS seam). Several keys verify at once, one
//     signs, so Rotate never invalidates a live token; RemoveKey does.
//   - Issuer: mints EdDSA JWTs (iss=felix-auth, aud=felix-broker, sub, tid, iat, exp, jti,
//     perms) after validating every permission string against spec §1.
//   - TokenVerifier: checks a token (EdDSA only, kid lookup, iss/aud/exp with 60 s leeway,
//     nbf when present) and caches the verified Principal until the token expires, so a
//     repeated Verify is one map lookup.
//   - JWKSKeySource: a KeySource fed with JWKS documents (ParseJWKS) from the control plane.
//   - Principal.Allow: the per-operation check, spec §4 glob plus §2 inheritance.
//   - Bootstrap: the single-node day-0 path (tenant "default", admin token file) and the
//     FELIX_AUTH=off mode.
//
// Every refusal is one of three sentinels, ErrUnauthorized, ErrForbidden and
// ErrTenantMismatch, whose texts are the v1 wire texts; WireText maps any error of this
// package to the text the broker sends.
package auth

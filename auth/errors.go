package auth

import "errors"

// Refusal sentinels. Their Error() texts are the v1 wire texts of spec/client-protocol.md §1.2,
// so the broker may send err.Error() of a sentinel (or WireText(err) of any wrapped error)
// as the "message" of an error frame. All three map to the client code "unauthorized"
// (spec/client-protocol.md §8.7). None of them says whether the object exists.
var (
	// ErrUnauthorized: no credential, or one that does not verify (bad signature, expired,
	// wrong issuer/audience/algorithm, unknown kid). Returned wrapped in *TokenError.
	ErrUnauthorized = errors.New("auth required")
	// ErrForbidden: the token verified but grants no permission for this action on this
	// object (spec/auth.md §4, "denied").
	ErrForbidden = errors.New("forbidden")
	// ErrTenantMismatch: the operation names a tenant other than the token's tid, or the
	// auth frame's tenant_id differs from the token's tid (spec/auth.md §4 steps 4 and the
	// "message tenant ≠ auth tenant" row).
	ErrTenantMismatch = errors.New("tenant mismatch")
)

// Administrative errors (key store, issuance). They are never sent to a data-plane client.
var (
	// ErrInvalidPermission: a permission string breaks spec/auth.md §1–§2 (unknown action,
	// malformed or cross-tenant object, a wildcard form the spec rejects). Wrapped in
	// *PermissionError.
	ErrInvalidPermission = errors.New("invalid permission")
	// ErrInvalidName: a tenant, namespace or subject is empty, too long or contains a byte
	// names may not contain (see ValidName).
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidTTL: a token lifetime outside (0, MaxTokenTTL].
	ErrInvalidTTL = errors.New("invalid token lifetime")
	// ErrUnknownTenant: the key store has no such tenant.
	ErrUnknownTenant = errors.New("unknown tenant")
	// ErrTenantExists: CreateTenant for a tenant the store already holds.
	ErrTenantExists = errors.New("tenant exists")
	// ErrUnknownKey: no key with that kid, or the key was removed.
	ErrUnknownKey = errors.New("unknown key")
	// ErrKeyInUse: RemoveKey of a tenant's active signing key (Rotate first).
	ErrKeyInUse = errors.New("key is the active signing key")
	// ErrCorruptKeyStore: keys.json does not parse or breaks its invariants.
	ErrCorruptKeyStore = errors.New("corrupt key store")
	// ErrInvalidSetting: a FELIX_AUTH value other than "", "on" or "off".
	ErrInvalidSetting = errors.New("invalid FELIX_AUTH value")
)

// TokenError is a credential that failed verification. It matches ErrUnauthorized with
// errors.Is; Cause (which may be nil) is the underlying library error, also reachable
// through errors.Is/As. Reason is a short fixed phrase ("token expired", "unknown key",
// "signature invalid", ...) that names the check, never a resource.
type TokenError struct {
	Reason string
	Cause  error
}

// Error formats as "auth required: <reason>".
func (e *TokenError) Error() string { return ErrUnauthorized.Error() + ": " + e.Reason }

// Unwrap returns ErrUnauthorized and, when present, the cause.
func (e *TokenError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrUnauthorized}
	}
	return []error{ErrUnauthorized, e.Cause}
}

func tokenErr(reason string, cause error) error { return &TokenError{Reason: reason, Cause: cause} }

// PermissionError names the permission string that was refused and why. It matches
// ErrInvalidPermission with errors.Is.
type PermissionError struct {
	Permission string
	Reason     string
}

// Error formats as `invalid permission "<perm>": <reason>`.
func (e *PermissionError) Error() string {
	return ErrInvalidPermission.Error() + " " + quote(e.Permission) + ": " + e.Reason
}

// Unwrap returns ErrInvalidPermission.
func (e *PermissionError) Unwrap() error { return ErrInvalidPermission }

func permErr(perm, reason string) error { return &PermissionError{Permission: perm, Reason: reason} }

// WireText returns the v1 wire text for an error of this package: "auth required",
// "forbidden" or "tenant mismatch" (spec/client-protocol.md §1.2), or "" when err is not an
// authorization refusal. Code for all three is "unauthorized" (§8.7).
func WireText(err error) string {
	switch {
	case errors.Is(err, ErrTenantMismatch):
		return ErrTenantMismatch.Error()
	case errors.Is(err, ErrForbidden):
		return ErrForbidden.Error()
	case errors.Is(err, ErrUnauthorized):
		return ErrUnauthorized.Error()
	}
	return ""
}

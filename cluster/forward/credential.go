package forward

import (
	"errors"

	"felix/auth"
	"felix/proto"
)

// Credential is the result of verifying a forward's credential for the action it needs
// (seed, "Authorization across a forward"). The zero value is not CredentialOK: a check
// that forgets to answer refuses.
type Credential uint8

// Credential results.
const (
	CredentialOK           Credential = iota + 1 // verifies, same tenant, grants the action
	CredentialMissing                            // no credential (empty)
	CredentialBadSignature                       // does not verify: signature, expiry, issuer, unknown kid
	CredentialOtherTenant                        // verifies, but for another tenant than the shard's
	CredentialLacksAction                        // verifies, same tenant, no grant for the action here
)

var credentialNames = [...]string{"invalid", "ok", "missing", "bad-signature", "other-tenant", "lacks-action"}

// String names the result ("ok", "missing", "bad-signature", "other-tenant", "lacks-action").
func (c Credential) String() string {
	if int(c) < len(credentialNames) {
		return credentialNames[c]
	}
	return "Credential(?)"
}

// CredentialCheck verifies credential for action on the shard of the forward being
// decided; Decide calls it at most once. AuthCheck builds the one a broker uses.
type CredentialCheck func(credential []byte, action auth.Action) Credential

// CredentialOf maps the error of the direct-request check (auth.Authenticate, then
// Principal.Allow) to a Credential: nil is CredentialOK, auth.ErrTenantMismatch
// CredentialOtherTenant, auth.ErrForbidden CredentialLacksAction, and anything else
// (auth.ErrUnauthorized and its *auth.TokenError included) CredentialBadSignature, so an
// unexpected error refuses.
func CredentialOf(err error) Credential {
	switch {
	case err == nil:
		return CredentialOK
	case errors.Is(err, auth.ErrTenantMismatch):
		return CredentialOtherTenant
	case errors.Is(err, auth.ErrForbidden):
		return CredentialLacksAction
	}
	return CredentialBadSignature
}

// AuthCheck returns the CredentialCheck for a forward naming ref: exactly the check a
// direct request gets (broker/publish.go): auth.Authenticate(v, tenant, credential), then
// Principal.Allow(action, tenant, namespace, name) with the names of ref, mapped by
// CredentialOf. An empty credential is CredentialMissing without calling v; a nil v is
// CredentialBadSignature. The check is as pure as v (a *auth.TokenVerifier reads its clock
// to check expiry). The names are copied, so the check outlives ref's frame buffer.
func AuthCheck(v auth.Verifier, ref proto.ShardRef) CredentialCheck {
	tenant, namespace, name := string(ref.Tenant), string(ref.Namespace), string(ref.Name)
	return func(credential []byte, action auth.Action) Credential {
		if len(credential) == 0 {
			return CredentialMissing
		}
		if v == nil {
			return CredentialBadSignature
		}
		p, err := auth.Authenticate(v, tenant, string(credential))
		if err == nil {
			err = p.Allow(action, tenant, namespace, name)
		}
		return CredentialOf(err)
	}
}

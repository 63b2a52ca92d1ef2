package auth

import (
	"strings"
	"time"
)

// Leeway is the clock skew tolerated on exp (and nbf when present), spec/auth.md §4 step 3.
const Leeway = 60 * time.Second

// Principal is a verified token: who (Subject) acting in which tenant, until when, with which
// permissions. A Principal is immutable once returned and safe for concurrent use; the
// verifier shares one Principal between every stream presenting the same token.
type Principal struct {
	// Tenant is the token's tid (spec/auth.md §3.1).
	Tenant string
	// Subject is the token's sub, the principal id (spec §3.1; at most MaxNameBytes bytes).
	Subject string
	// IssuedAt and Expires are the token's iat and exp (second precision). Expires is zero
	// for the allow-all principal of FELIX_AUTH=off.
	IssuedAt time.Time
	Expires  time.Time
	// Permissions are the perms strings as the token carried them, for display.
	Permissions []string

	grants   grants
	allowAll bool
}

// newPrincipal builds a principal and expands the perms once (spec/auth.md §4 step 5).
func newPrincipal(tenant, subject string, issuedAt, expires time.Time, perms []string) *Principal {
	p := &Principal{Tenant: tenant, Subject: subject, IssuedAt: issuedAt, Expires: expires, Permissions: perms}
	for _, perm := range perms {
		p.grants.add(perm)
	}
	return p
}

// allowAllPrincipal is what the FELIX_AUTH=off verifier hands out.
var allowAllPrincipal = &Principal{Subject: "anonymous", allowAll: true}

// AllowsAll reports whether p is the FELIX_AUTH=off principal that every check passes.
func (p *Principal) AllowsAll() bool { return p != nil && p.allowAll }

// Allow checks one operation (spec/auth.md §4): action on the object built from tenant,
// namespace and object —
//
//	stream actions   stream:{tenant}/{namespace}/{object}
//	cache actions    cache:{tenant}/{namespace}/{object}
//	ns.manage        namespace:{tenant}/{namespace}        (object must be "")
//	tenant.manage, rbac.*  tenant:{tenant}                 (namespace and object must be "")
//
// It returns nil, ErrUnauthorized (p is nil: no auth yet), ErrTenantMismatch (tenant is not
// the token's tid) or ErrForbidden (no grant matches, the action is invalid, or a name is
// empty or contains '/' — such a name could otherwise cross a namespace boundary).
//
// Call it BEFORE looking the object up: a refusal then says nothing about whether the object
// exists, and "not_found" is only ever shown to a principal allowed to act on the name.
// Allow does not allocate for objects up to 192 bytes and is safe for concurrent use.
func (p *Principal) Allow(action Action, tenant, namespace, object string) error {
	if p == nil {
		return ErrUnauthorized
	}
	if p.allowAll {
		return nil
	}
	if tenant != p.Tenant {
		return ErrTenantMismatch
	}
	var buf [192]byte
	target, ok := appendObject(buf[:0], action.kind(), tenant, namespace, object)
	if !ok {
		return ErrForbidden
	}
	for _, pattern := range p.grants[action] {
		if globMatch(pattern, target) {
			return nil
		}
	}
	return ErrForbidden
}

// appendObject appends the canonical object string (spec/auth.md §1) and reports whether the
// parts are well formed for the kind.
func appendObject(dst []byte, kind objectKind, tenant, namespace, object string) ([]byte, bool) {
	if kind == kindNone || !segmentOK(tenant) {
		return dst, false
	}
	dst = append(dst, kindPrefixes[kind]...)
	dst = append(dst, tenant...)
	switch kind {
	case kindTenant:
		return dst, namespace == "" && object == ""
	case kindNamespace:
		if !segmentOK(namespace) || object != "" {
			return dst, false
		}
		dst = append(dst, '/')
		return append(dst, namespace...), true
	}
	if !segmentOK(namespace) || !segmentOK(object) {
		return dst, false
	}
	dst = append(dst, '/')
	dst = append(dst, namespace...)
	dst = append(dst, '/')
	return append(dst, object...), true
}

// segmentOK is the check Allow needs on a name: non-empty and no '/', the only byte that
// could shift a name into another segment. ('*' and ':' in an object are matched literally:
// only patterns carry wildcards.) Names are validated fully (ValidName) when created.
func segmentOK(s string) bool { return s != "" && strings.IndexByte(s, '/') < 0 }

// CheckExpiry returns a *TokenError ("token expired", errors.Is ErrUnauthorized) once now is
// past Expires plus Leeway, and nil before that or for the allow-all principal. The broker
// calls it before serving an operation on a stream that may outlive its token (spec/auth.md
// §4, PROPOSED re-check, adopted: see docs/auth.md).
func (p *Principal) CheckExpiry(now time.Time) error {
	if p == nil {
		return ErrUnauthorized
	}
	if p.allowAll || !now.After(p.Expires.Add(Leeway)) {
		return nil
	}
	return tokenErr("token expired", nil)
}

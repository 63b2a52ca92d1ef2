package broker

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"felix/auth"
)

// KeyRotator is what the signing-key routes need of Admin.Keys (*auth.KeyStore): list a
// tenant's keys, rotate (a new active key; the old one verifies until removed) and remove
// a verify-only key (every token it signed is refused from then on, cached ones too).
type KeyRotator interface {
	Keys(tenant string) ([]auth.KeyInfo, error)
	Rotate(tenant string) (kid string, err error)
	RemoveKey(kid string) error
}

// keyJSON is one signing key as the key routes show it (never the private seed).
type keyJSON struct {
	Kid     string    `json:"kid"`
	State   string    `json:"state"` // active, verify-only or removed
	Created time.Time `json:"created"`
}

// registerKeys adds the signing-key routes (issue 23 item 10; `felix token keys`,
// `rotate-key`, `revoke-key`), each needing tenant.manage on tenant:{t}:
//
//	GET    /v1/tenants/{t}/keys          200 [{"kid","state","created"}]
//	POST   /v1/tenants/{t}/keys/rotate   201 {"kid","state":"active",...}: new tokens are signed by it
//	DELETE /v1/tenants/{t}/keys/{kid}    204: tokens signed by kid are refused from now on
//
// Errors: 404 not_found (tenant, or a kid that is not the tenant's or already removed), 409
// conflict (DELETE of the active key: rotate first), 404 when auth is off (no key store).
func (a *Admin) registerKeys(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/tenants/{t}/keys", a.listKeys)
	mux.HandleFunc("POST /v1/tenants/{t}/keys/rotate", a.rotateKey)
	mux.HandleFunc("DELETE /v1/tenants/{t}/keys/{kid}", a.removeKey)
}

// rotator checks the name and the permission and returns the key store (answering and
// returning nil when there is none or the request is refused).
func (a *Admin) rotator(w http.ResponseWriter, r *http.Request) (KeyRotator, string) {
	t := r.PathValue("t")
	if !a.checkRequestNames(w, t) || !a.allow(w, r, auth.ActionTenantManage, t, "", "") {
		return nil, ""
	}
	kr, ok := a.Keys.(KeyRotator)
	if !ok || a.Keys == nil {
		a.fail(w, fmt.Errorf("%w: no signing keys on this broker (FELIX_AUTH=off)", ErrNotFound))
		return nil, ""
	}
	return kr, t
}

func (a *Admin) listKeys(w http.ResponseWriter, r *http.Request) {
	kr, t := a.rotator(w, r)
	if kr == nil {
		return
	}
	keys, err := kr.Keys(t)
	if err != nil {
		a.fail(w, keyErr(err))
		return
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyJSON{Kid: k.Kid, State: string(k.State), Created: k.Created})
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *Admin) rotateKey(w http.ResponseWriter, r *http.Request) {
	kr, t := a.rotator(w, r)
	if kr == nil {
		return
	}
	kid, err := kr.Rotate(t)
	if err != nil {
		a.fail(w, keyErr(err))
		return
	}
	if a.Logger != nil {
		a.Logger.Info("signing key rotated", "tenant", t, "kid", kid)
	}
	writeJSON(w, http.StatusCreated, keyJSON{Kid: kid, State: string(auth.KeyActive), Created: time.Now().UTC()})
}

func (a *Admin) removeKey(w http.ResponseWriter, r *http.Request) {
	kr, t := a.rotator(w, r)
	if kr == nil {
		return
	}
	kid := r.PathValue("kid")
	keys, err := kr.Keys(t)
	if err != nil {
		a.fail(w, keyErr(err))
		return
	}
	owned := false
	for _, k := range keys {
		owned = owned || (k.Kid == kid && k.State != auth.KeyRemoved)
	}
	if !owned { // another tenant's kid is not found here: a tenant admin never touches others' keys
		a.fail(w, fmt.Errorf("%w: no signing key %s in tenant %s", ErrNotFound, kid, t))
		return
	}
	if err := kr.RemoveKey(kid); err != nil {
		a.fail(w, keyErr(err))
		return
	}
	if a.Logger != nil {
		a.Logger.Warn("signing key removed: tokens it signed are refused", "tenant", t, "kid", kid)
	}
	w.WriteHeader(http.StatusNoContent)
}

// keyErr maps the key store's errors to the admin API's (not found, conflict).
func keyErr(err error) error {
	switch {
	case errors.Is(err, auth.ErrUnknownTenant), errors.Is(err, auth.ErrUnknownKey):
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	case errors.Is(err, auth.ErrKeyInUse):
		return keyInUse{fmt.Errorf("%v: rotate first, then remove the previous key", err)}
	}
	return err
}

// keyInUse is the removal of a tenant's active key: HTTP 409 conflict (Admin.fail maps
// ErrExists there) with its own text.
type keyInUse struct{ error }

func (keyInUse) Is(target error) bool { return target == ErrExists }

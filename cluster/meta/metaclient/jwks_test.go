package metaclient

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"felix/auth"
	"felix/cluster/meta/metaclient/metaclienttest"
	"felix/cluster/meta/rest"
)

// TestJWKS: the JWKS call returns a held tenant's document, which verifies a token the
// member issued; a tenant the member does not hold is *APIError 404; a member down until
// the context ends is ErrUnavailable.
func TestJWKS(t *testing.T) {
	secret := make([]byte, 32)
	secret[0] = 3
	keys, err := rest.OpenTenantKeys(t.TempDir(), secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := metaclienttest.Start(t, rest.Config{Keys: keys})
	c := newClient(t, Config{URLs: []string{m.Server.URL}})
	ctx := ctxFor(t, 10*time.Second)
	if resp, err := c.Forward(ctx, http.MethodPost, "/v1/tenants", []byte(`{"tenant_id":"acme"}`)); err != nil || resp.Status != 201 {
		t.Fatalf("create tenant: %+v %v", resp, err)
	}
	doc, err := c.JWKS(ctx, "acme")
	if err != nil || len(doc.Keys) != 1 {
		t.Fatalf("JWKS: %+v %v", doc, err)
	}
	resp, err := c.Forward(ctx, http.MethodPost, "/v1/tenants/acme/tokens", []byte(`{"subject":"svc","perms":["stream.publish:stream:acme/prod/*"]}`))
	if err != nil || resp.Status != 200 {
		t.Fatalf("issue: %+v %v", resp, err)
	}
	var tb rest.TokenBody
	if err := json.Unmarshal(resp.Body, &tb); err != nil {
		t.Fatal(err)
	}
	src := auth.NewJWKSKeySource()
	if err := src.Set("acme", doc); err != nil {
		t.Fatal(err)
	}
	if p, err := auth.NewVerifier(auth.VerifierOptions{Keys: src}).Verify(tb.Token); err != nil || p.Tenant != "acme" {
		t.Fatalf("verify with the fetched JWKS: %+v %v", p, err)
	}
	var api *APIError
	if _, err := c.JWKS(ctx, "nobody"); !errors.As(err, &api) || api.Status != 404 {
		t.Fatalf("JWKS of an unknown tenant: %v", err)
	}
	m.Down.Store(true)
	short := ctxFor(t, 300*time.Millisecond)
	if _, err := c.JWKS(short, "acme"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("JWKS with the member down: %v", err)
	}
}

package rest

import (
	"fmt"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"felix/auth"
	"felix/cluster/meta"
)

// keyed starts a one-member group whose handler holds tenant keys derived
// from secret, with tenant acme in its catalog.
func keyed(t *testing.T, secret []byte) *httptest.Server {
	t.Helper()
	n, _ := member(t, meta.Config{}, false)
	keys, err := OpenTenantKeys(t.TempDir(), secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Config{Node: n, Token: testToken, Keys: keys}))
	t.Cleanup(srv.Close)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"acme"}`, 201)
	return srv
}

func jwksOf(t *testing.T, srv *httptest.Server, path string) auth.JWKS {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	doc, err := auth.ParseJWKS(data)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v %s", path, resp.StatusCode, err, data)
	}
	return doc
}

// TestTenantJWKSAndTokens: two members with the same secret publish the same
// JWKS for a tenant (both paths), another secret a different one; a token
// issued through one member verifies against the other's JWKS with the
// broker's verifier; unknown tenants are 404, bad requests 400, issue needs
// the admin token.
func TestTenantJWKSAndTokens(t *testing.T) {
	secret := make([]byte, 32)
	secret[0] = 7
	a, b := keyed(t, secret), keyed(t, secret)
	ja, jb := jwksOf(t, a, "/v1/tenants/acme/.well-known/jwks.json"), jwksOf(t, b, "/v1/tenants/acme/jwks")
	if len(ja.Keys) != 1 || fmt.Sprint(ja) != fmt.Sprint(jb) || ja.Keys[0].Alg != "EdDSA" || ja.Keys[0].Crv != "Ed25519" {
		t.Fatalf("JWKS differ or are malformed: %+v %+v", ja, jb)
	}
	other := make([]byte, 32)
	if jc := jwksOf(t, keyed(t, other), "/v1/tenants/acme/jwks"); jc.Keys[0].Kid == ja.Keys[0].Kid || jc.Keys[0].X == ja.Keys[0].X {
		t.Fatal("another secret gave the same key")
	}
	var tb TokenBody
	if st, _ := call(t, a, "POST", "/v1/tenants/acme/tokens",
		`{"subject":"svc","perms":["stream.publish:stream:acme/prod/*"],"ttl_seconds":60}`, &tb); st != 200 || tb.ExpiresIn != 60 {
		t.Fatalf("issue: %d %+v", st, tb)
	}
	src := auth.NewJWKSKeySource()
	if err := src.Set("acme", jb); err != nil {
		t.Fatal(err)
	}
	p, err := auth.NewVerifier(auth.VerifierOptions{Keys: src}).Verify(tb.Token)
	if err != nil || p.Tenant != "acme" || p.Subject != "svc" || !p.Expires.After(time.Now()) {
		t.Fatalf("verify against the other member's JWKS: %+v %v", p, err)
	}
	expect(t, a, "GET", "/v1/tenants/nobody/jwks", "", 404)
	expect(t, a, "POST", "/v1/tenants/nobody/tokens", `{"subject":"svc","perms":[]}`, 404)
	expect(t, a, "POST", "/v1/tenants/acme/tokens", `{"subject":"","perms":[]}`, 400)
	expect(t, a, "POST", "/v1/tenants/acme/tokens", `{"subject":"svc","perms":["nonsense"]}`, 400)
	if st, _ := call(t, a, "POST", "/v1/tenants/acme/tokens", `{"subject":"svc","perms":[]}`, nil, true); st != 401 {
		t.Fatalf("issue without the admin token: %d", st)
	}
	n, _ := member(t, meta.Config{}, false)
	srv := httptest.NewServer(New(Config{Node: n, Token: testToken}))
	t.Cleanup(srv.Close)
	expect(t, srv, "POST", "/v1/tenants", `{"tenant_id":"acme"}`, 201)
	expect(t, srv, "GET", "/v1/tenants/acme/jwks", "", 404)
}

func TestKeySecretFile(t *testing.T) {
	dir := t.TempDir()
	s, created, err := LoadOrCreateKeySecret(dir)
	if err != nil || !created || len(s) != 32 {
		t.Fatalf("first start: %v %v", created, err)
	}
	again, created, err := LoadOrCreateKeySecret(dir)
	if err != nil || created || fmt.Sprint(again) != fmt.Sprint(s) {
		t.Fatalf("second start: %v %v", created, err)
	}
}

package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"felix/auth"
)

// fakeApplier records engine calls and can refuse them.
type fakeApplier struct {
	created, deleted []string
	refuse           error
}

func (f *fakeApplier) ApplyCreate(s Stream) error {
	if f.refuse != nil {
		return f.refuse
	}
	f.created = append(f.created, s.Stream)
	return nil
}
func (f *fakeApplier) ApplyDelete(s Stream) error {
	f.deleted = append(f.deleted, s.Stream)
	return nil
}
func (f *fakeApplier) ApplyCreateCache(c Cache) error {
	f.created = append(f.created, "cache:"+c.Cache)
	return nil
}
func (f *fakeApplier) ApplyDeleteCache(c Cache) error {
	f.deleted = append(f.deleted, "cache:"+c.Cache)
	return nil
}

type adminFixture struct {
	t      *testing.T
	srv    *httptest.Server
	admin  string // bootstrap admin token (tenant default)
	issuer *auth.TokenIssuer
	apply  *fakeApplier
	cat    *Catalog
}

func newAdminFixture(t *testing.T) *adminFixture {
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	res, err := auth.Bootstrap(auth.BootstrapOptions{DataDir: dir, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := OpenCatalog(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat.EnsureNamespace(Namespace{TenantID: "default", Namespace: "default"})
	tok, err := res.Issuer.Issue("default", "admin", auth.AdminPermissions("default"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	f := &adminFixture{t: t, admin: tok, issuer: res.Issuer, apply: &fakeApplier{}, cat: cat}
	mux := http.NewServeMux()
	(&Admin{Catalog: cat, Verifier: res.Verifier, Keys: res.Keys, Streams: f.apply, Logger: logger}).Register(mux)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *adminFixture) do(method, path, token string, body any) (int, apiError, []byte) {
	f.t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, f.srv.URL+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var e apiError
	json.Unmarshal(out, &e)
	return resp.StatusCode, e, out
}

func TestAdminStreamLifecycle(t *testing.T) {
	f := newAdminFixture(t)
	base := "/v1/tenants/default/namespaces/default/streams"
	code, _, out := f.do("POST", base, f.admin, map[string]any{"stream": "orders", "shards": 3, "durable": true, "routing": "jump_hash"})
	if code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	if code, e, _ := f.do("POST", base, f.admin, map[string]any{"stream": "orders"}); code != http.StatusConflict || e.Code != "conflict" {
		t.Fatalf("duplicate: %d %+v", code, e)
	}
	if code, e, _ := f.do("POST", base, f.admin, map[string]any{"stream": "bad", "kind": "Weird"}); code != http.StatusBadRequest || e.Code != "malformed" {
		t.Fatalf("bad kind: %d %+v", code, e)
	}
	if code, _, _ := f.do("POST", base, f.admin, "{not an object"); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	// Delivery changes; retention and consistency may only repeat their current values
	// (a single node fixes them when the stream's logs open).
	code, _, out = f.do("PATCH", base+"/orders", f.admin, map[string]any{"retention": Retention{}, "consistency": "Leader", "delivery": "AtLeastOnce"})
	var s Stream
	if code != http.StatusOK || json.Unmarshal(out, &s) != nil || s.Delivery != "AtLeastOnce" || s.Retention.MaxAgeSeconds != nil || s.Shards != 3 {
		t.Fatalf("patch: %d %s", code, out)
	}
	age := int64(3600)
	if code, e, _ := f.do("PATCH", base+"/orders", f.admin, map[string]any{"retention": Retention{MaxAgeSeconds: &age}}); code != http.StatusBadRequest || !strings.Contains(e.Message, "retention cannot change") {
		t.Fatalf("patch retention: %d %+v", code, e)
	}
	if code, _, _ := f.do("PATCH", base+"/orders", f.admin, map[string]any{"durable": false}); code != http.StatusBadRequest {
		t.Fatalf("patch durable: %d", code)
	}
	code, _, out = f.do("GET", base, f.admin, nil)
	var list []Stream
	if code != http.StatusOK || json.Unmarshal(out, &list) != nil || len(list) != 1 {
		t.Fatalf("list: %d %s", code, out)
	}
	if code, _, _ := f.do("DELETE", base+"/orders", f.admin, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code, e, _ := f.do("GET", base+"/orders", f.admin, nil); code != http.StatusNotFound || e.Code != "not_found" {
		t.Fatalf("get deleted: %d %+v", code, e)
	}
	if len(f.apply.created) != 1 || len(f.apply.deleted) != 1 {
		t.Fatalf("engine calls: %+v", f.apply)
	}
	f.apply.refuse = errors.New("engine refused")
	if code, _, _ := f.do("POST", base, f.admin, map[string]any{"stream": "x"}); code != http.StatusInternalServerError {
		t.Fatalf("engine refusal: %d", code)
	}
	if _, err := f.cat.Stream("default", "default", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatal("a stream the engine refused entered the catalog")
	}
}

func TestAdminPermissionsBeforeExistence(t *testing.T) {
	f := newAdminFixture(t)
	publisher, err := f.issuer.Issue("default", "app", []string{"stream.publish:stream:default/default/*"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		"/v1/tenants/default/namespaces/default/streams/exists-or-not",
		"/v1/tenants/default/namespaces/nowhere/streams/x",
		"/v1/tenants/default/namespaces/default/caches/c",
	} {
		if code, e, _ := f.do("GET", path, publisher, nil); code != http.StatusForbidden || e.Message != "forbidden" {
			t.Errorf("%s: %d %+v", path, code, e)
		}
	}
	if code, _, _ := f.do("GET", "/v1/tenants", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _, _ := f.do("GET", "/v1/tenants", "not-a-jwt", nil); code != http.StatusUnauthorized {
		t.Fatalf("garbage token: %d", code)
	}
}

func TestAdminTenantsNamespacesCachesJWKS(t *testing.T) {
	f := newAdminFixture(t)
	if code, _, out := f.do("POST", "/v1/tenants", f.admin, Tenant{TenantID: "acme"}); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %s", code, out)
	}
	acme, err := f.issuer.Issue("acme", "ops", auth.AdminPermissions("acme"), time.Hour)
	if err != nil {
		t.Fatalf("token for the new tenant (its key must exist): %v", err)
	}
	if code, _, out := f.do("POST", "/v1/tenants/acme/namespaces", acme, Namespace{Namespace: "payments"}); code != http.StatusCreated {
		t.Fatalf("namespace: %d %s", code, out)
	}
	if code, _, out := f.do("POST", "/v1/tenants/acme/namespaces/payments/caches", acme, Cache{Cache: "sessions"}); code != http.StatusCreated {
		t.Fatalf("cache: %d %s", code, out)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/acme/namespaces/payments", acme, nil); code != http.StatusConflict {
		t.Fatalf("delete non-empty namespace: %d", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/acme/namespaces/payments/caches/sessions", acme, nil); code != http.StatusNoContent {
		t.Fatalf("delete cache: %d", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/acme/namespaces/payments", acme, nil); code != http.StatusNoContent {
		t.Fatalf("delete namespace: %d", code)
	}
	// acme's admin cannot touch default, nor delete tenants (system tenant only).
	if code, _, _ := f.do("GET", "/v1/tenants/default/namespaces", acme, nil); code != http.StatusForbidden {
		t.Fatalf("cross-tenant list: %d", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/acme", acme, nil); code != http.StatusForbidden {
		t.Fatalf("tenant self-delete: %d", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/acme", f.admin, nil); code != http.StatusNoContent {
		t.Fatalf("system delete of an empty tenant: %d", code)
	}
	code, _, out := f.do("GET", "/v1/tenants/default/.well-known/jwks.json", "", nil)
	var set auth.JWKS
	if code != http.StatusOK || json.Unmarshal(out, &set) != nil || len(set.Keys) != 1 || set.Keys[0].Kty != "OKP" {
		t.Fatalf("jwks: %d %s", code, out)
	}
	if code, _, _ := f.do("GET", "/v1/tenants/ghost/.well-known/jwks.json", "", nil); code != http.StatusNotFound {
		t.Fatalf("jwks of unknown tenant: %d", code)
	}
}

// FuzzDecodeCatalog: any bytes in catalog.json decode or give ErrInvalid, never a panic;
// what decodes re-encodes and decodes to the same catalog.
func FuzzDecodeCatalog(f *testing.F) {
	c, _ := OpenCatalog(f.TempDir(), nil)
	c.EnsureNamespace(Namespace{TenantID: "t", Namespace: "n"})
	c.CreateStream(Stream{TenantID: "t", Namespace: "n", Stream: "s"}, nil)
	c.CreateCache(Cache{TenantID: "t", Namespace: "n", Cache: "c"}, nil)
	seed, _ := json.Marshal(&c.file)
	f.Add(seed)
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := decodeCatalog(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		again, _ := json.Marshal(&file)
		if _, err := decodeCatalog(again); err != nil {
			t.Fatalf("re-encoded catalog does not decode: %v", err)
		}
	})
}

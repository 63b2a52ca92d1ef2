package broker

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"felix/auth"
)

// The signing-key routes: list, rotate (the old key still verifies), remove a previous key
// (its tokens are refused at once), never the active key (409), never another tenant's
// kid (404), and only with tenant.manage on the tenant.
func TestAdminSigningKeyRotationAndRemoval(t *testing.T) {
	f := newAdminFixture(t)
	if code, e, _ := f.do("POST", "/v1/tenants", f.admin, map[string]any{"tenant_id": "other"}); code != http.StatusCreated {
		t.Fatalf("create tenant: %d %+v", code, e)
	}
	keysOf := func(tenant, token string) []keyJSON {
		t.Helper()
		code, e, body := f.do("GET", "/v1/tenants/"+tenant+"/keys", token, nil)
		var ks []keyJSON
		if code != http.StatusOK || json.Unmarshal(body, &ks) != nil {
			t.Fatalf("keys of %s: %d %+v", tenant, code, e)
		}
		return ks
	}
	first := keysOf("default", f.admin)
	if len(first) != 1 || first[0].State != string(auth.KeyActive) {
		t.Fatalf("keys at start: %+v", first)
	}
	if code, e, _ := f.do("DELETE", "/v1/tenants/default/keys/"+first[0].Kid, f.admin, nil); code != http.StatusConflict {
		t.Fatalf("remove the active key: %d %+v, want 409", code, e)
	}
	if code, _, _ := f.do("GET", "/v1/tenants/other/keys", f.admin, nil); code != http.StatusForbidden {
		t.Fatalf("the system admin on another tenant's keys: %d, want 403 (tenant mismatch)", code)
	}
	otherTok, err := f.issuer.Issue("other", "ops", auth.AdminPermissions("other"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	otherKid := keysOf("other", otherTok)[0].Kid
	code, e, body := f.do("POST", "/v1/tenants/default/keys/rotate", f.admin, nil)
	var rotated keyJSON
	if code != http.StatusCreated || json.Unmarshal(body, &rotated) != nil || rotated.Kid == first[0].Kid {
		t.Fatalf("rotate: %d %+v %s", code, e, body)
	}
	fresh, err := f.issuer.Issue("default", "admin2", auth.AdminPermissions("default"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if ks := keysOf("default", f.admin); len(ks) != 2 { // the old token still verifies
		t.Fatalf("after rotation: %+v", ks)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/default/keys/"+otherKid, fresh, nil); code != http.StatusNotFound {
		t.Fatalf("another tenant's kid under default: %d, want 404", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/default/keys/"+first[0].Kid, fresh, nil); code != http.StatusNoContent {
		t.Fatalf("remove the previous key: %d", code)
	}
	if code, _, _ := f.do("GET", "/v1/tenants/default/keys", f.admin, nil); code != http.StatusUnauthorized {
		t.Fatalf("a token of the removed key: %d, want 401", code)
	}
	if code, _, _ := f.do("DELETE", "/v1/tenants/default/keys/"+first[0].Kid, fresh, nil); code != http.StatusNotFound {
		t.Fatalf("remove it again: %d, want 404", code)
	}
	if code, _, _ := f.do("POST", "/v1/tenants/default/keys/rotate", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("rotate without a token: %d", code)
	}
}

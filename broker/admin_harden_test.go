package broker

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// raw sends body as is (not JSON-encoded) and decodes the JSON error shape.
func (f *adminFixture) raw(method, path, body string) (int, apiError, http.Header) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.admin)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var e apiError
	if err := json.Unmarshal(out, &e); err != nil {
		f.t.Fatalf("%s %s: answer %d is not JSON: %q", method, path, resp.StatusCode, out)
	}
	return resp.StatusCode, e, resp.Header
}

func TestAdminCreateStreamDefaultsToDurable(t *testing.T) {
	f := newAdminFixture(t)
	base := "/v1/tenants/default/namespaces/default/streams"
	code, _, out := f.do("POST", base, f.admin, map[string]any{"stream": "d"})
	var s Stream
	if code != http.StatusCreated || json.Unmarshal(out, &s) != nil || !s.Durable {
		t.Fatalf("create without durable: %d %s", code, out)
	}
	code, _, out = f.do("POST", base, f.admin, map[string]any{"stream": "m", "durable": false})
	if code != http.StatusCreated || json.Unmarshal(out, &s) != nil || s.Durable {
		t.Fatalf("explicit durable false: %d %s", code, out)
	}
}

func TestAdminRefusesBadBodiesAndNames(t *testing.T) {
	f := newAdminFixture(t)
	streams := "/v1/tenants/default/namespaces/default/streams"
	if code, _, out := f.do("POST", streams, f.admin, map[string]any{"stream": "orders", "shards": 2}); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, out)
	}
	cases := []struct{ method, path, body, text string }{
		{"PATCH", streams + "/orders", `{"shards":4}`, "shards"},
		{"PATCH", streams + "/orders", `{"durable":true}`, "durable"},
		{"PATCH", streams + "/orders", `{"retension":{}}`, "unknown field"},
		{"PATCH", streams + "/orders", `null`, "JSON object"},
		{"POST", streams, `null`, "JSON object"},
		{"POST", streams, `[1]`, "JSON object"},
		{"POST", streams, `{"stream":"x"} garbage`, "after the JSON object"},
		{"POST", streams, `{"stream":"y"}{"stream":"z"}`, "after the JSON object"},
		{"POST", streams, `{"stream":"x","tenant_id":"other"}`, "differs"},
		{"POST", streams, `{"stream":"x","namespace":"other"}`, "differs"},
		{"POST", "/v1/tenants/default/namespaces/default/caches", `{"cache":"c","tenant_id":"other"}`, "differs"},
		{"POST", "/v1/tenants/default/namespaces", `{"namespace":"n","tenant_id":"other"}`, "differs"},
		{"POST", streams, `{"stream":"a/b"}`, "invalid name"},
		{"POST", streams, `{"stream":""}`, "invalid name"},
		{"POST", streams, `{}`, "invalid name"},
		{"POST", "/v1/tenants", `{"tenant_id":"x/y"}`, "invalid name"},
		{"GET", streams + "/a%2Fb", ``, "invalid name"},
	}
	for _, c := range cases {
		code, e, _ := f.raw(c.method, c.path, c.body)
		if code != http.StatusBadRequest || e.Code != "malformed" || !strings.Contains(e.Message, c.text) {
			t.Errorf("%s %s %s: %d %+v, want 400 malformed mentioning %q", c.method, c.path, c.body, code, e, c.text)
		}
	}
	code, _, out := f.do("GET", streams+"/orders", f.admin, nil)
	var s Stream
	if code != http.StatusOK || json.Unmarshal(out, &s) != nil || s.Shards != 2 || !s.Durable {
		t.Fatalf("stream changed by refused requests: %d %s", code, out)
	}
}

func TestAdminMethodNotAllowedIsJSON(t *testing.T) {
	f := newAdminFixture(t)
	code, e, h := f.raw("PUT", "/v1/tenants/default/namespaces/default/streams/orders", `{}`)
	if code != http.StatusMethodNotAllowed || e.Code != "method_not_allowed" || !strings.Contains(h.Get("Allow"), "PATCH") {
		t.Fatalf("PUT: %d %+v allow=%q", code, e, h.Get("Allow"))
	}
	if code, e, _ := f.raw("GET", "/v1/nothing-here", ``); code != http.StatusNotFound || e.Code != "not_found" {
		t.Fatalf("unknown path: %d %+v", code, e)
	}
}

func TestAdminUnauthorizedNamesTheReason(t *testing.T) {
	f := newAdminFixture(t)
	code, e, _ := f.do("GET", "/v1/tenants", "garbage", nil)
	if code != http.StatusUnauthorized || e.Code != "unauthorized" || !strings.HasPrefix(e.Message, "auth required: ") || strings.Contains(e.Message, "garbage") {
		t.Fatalf("garbage token: %d %+v", code, e)
	}
}

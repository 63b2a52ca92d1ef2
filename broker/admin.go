package broker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"felix/auth"
)

// StreamApplier creates and deletes streams in the engine on behalf of the catalog (the
// broker's adapter over core.Engine; a fake in tests).
type StreamApplier interface {
	ApplyCreate(Stream) error
	ApplyDelete(Stream) error
	ApplyCreateCache(Cache) error
	ApplyDeleteCache(Cache) error
}

// TenantKeys creates signing keys for new tenants and serves their JWKS (*auth.KeyStore;
// nil when FELIX_AUTH=off).
type TenantKeys interface {
	CreateTenant(tenant string) (kid string, err error)
	HasTenant(tenant string) bool
	JWKS(tenant string) (auth.JWKS, error)
}

// Admin serves the single-node catalog with the control plane's REST paths and JSON
// shapes (spec/auth.md §1), so tools see a single node and a cluster alike:
//
//	GET|POST        /v1/tenants                       tenant.manage on tenant:default (the system tenant)
//	GET|DELETE      /v1/tenants/{t}                   tenant.manage on tenant:{t} (DELETE: on tenant:default)
//	GET|POST        /v1/tenants/{t}/namespaces        ns.manage on namespace:{t}/{ns} (list: tenant.manage)
//	GET|DELETE      /v1/tenants/{t}/namespaces/{ns}
//	GET|POST        /v1/tenants/{t}/namespaces/{ns}/streams           stream.manage on stream:{t}/{ns}/{s}
//	GET|PATCH|DELETE /v1/tenants/{t}/namespaces/{ns}/streams/{s}
//	GET|POST        /v1/tenants/{t}/namespaces/{ns}/caches            cache.manage on cache:{t}/{ns}/{c}
//	GET|DELETE      /v1/tenants/{t}/namespaces/{ns}/caches/{c}
//	GET             /v1/tenants/{t}/.well-known/jwks.json             no auth (public keys)
//
// Requests carry "Authorization: Bearer <felix token>". Permission is checked before the
// object is looked up, so a refusal never reveals existence. Errors are JSON
// {"code","message"}: 400 malformed (bodies that are not exactly one JSON object, names
// that are not ValidName — "invalid name" — checked before permission, a body tenant_id /
// namespace that differs from the path, a PATCH of an immutable or unknown field or of
// retention or consistency to another value, stream options a single node cannot honour:
// checkStreamOptions),
// 401 unauthorized, 403 forbidden / tenant mismatch, 404 not_found, 405 method_not_allowed,
// 409 exists / not_empty, 500 storage_failed. A POSTed stream without "durable" is durable
// unless NoDurableStorage (docs/operations.md, "Admin API").
type Admin struct {
	Catalog  CatalogStore // reads through CatalogView, changes through CatalogWriter
	Verifier auth.Verifier
	Keys     TenantKeys // nil when auth is off
	Streams  StreamApplier
	Logger   *slog.Logger
	// NoDurableStorage makes a stream created without "durable" in-memory; false (the
	// single-node broker, which always has FELIX_DURABLE_STORAGE_DIR) makes it durable.
	NoDurableStorage bool
	// Writes, in cluster mode, serves the catalog writes it has a route for instead
	// (forwarded to the control plane, controlplane_admin.go); nil on a single node.
	Writes *http.ServeMux
	// Damage lists the damage found in a stream's shards on this broker (ops.go
	// streamDamage, issue 23), shown by GET .../streams/{s} as "damaged"; nil = none.
	Damage func(tenant, namespace, stream string) []ShardDamage
}

// Register adds the admin routes under /v1/ to mux. Unknown paths and wrong methods
// answer the JSON error shape too (404 not_found, 405 method_not_allowed with Allow).
func (a *Admin) Register(mux *http.ServeMux) {
	inner := http.NewServeMux()
	a.register(inner)
	mux.Handle("/v1/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p := a.writes(r); p != "" {
			a.Writes.ServeHTTP(w, r)
			return
		}
		h, pattern := inner.Handler(r)
		if pattern != "" {
			inner.ServeHTTP(w, r) // sets the path values
			return
		}
		// The mux's own 404/405 answer: keep its status and Allow header, send JSON.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if allow := rec.header.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		if rec.status == http.StatusMethodNotAllowed {
			writeJSON(w, rec.status, apiError{Code: "method_not_allowed", Message: r.Method + " not allowed on " + r.URL.Path})
			return
		}
		writeJSON(w, http.StatusNotFound, apiError{Code: "not_found", Message: "no such admin path " + r.URL.Path})
	}))
}

// writes is the Writes route of r ("" without one, or without Writes).
func (a *Admin) writes(r *http.Request) (http.Handler, string) {
	if a.Writes == nil {
		return nil, ""
	}
	return a.Writes.Handler(r)
}

// statusRecorder captures the status and headers of the mux's default handlers.
type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(p []byte) (int, error) { return len(p), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.status = code }

func (a *Admin) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/tenants", a.listTenants)
	mux.HandleFunc("POST /v1/tenants", a.createTenant)
	mux.HandleFunc("GET /v1/tenants/{t}", a.getTenant)
	mux.HandleFunc("DELETE /v1/tenants/{t}", a.deleteTenant)
	mux.HandleFunc("GET /v1/tenants/{t}/.well-known/jwks.json", a.jwks)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces", a.listNamespaces)
	mux.HandleFunc("POST /v1/tenants/{t}/namespaces", a.createNamespace)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}", a.getNamespace)
	mux.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}", a.deleteNamespace)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/streams", a.listStreams)
	mux.HandleFunc("POST /v1/tenants/{t}/namespaces/{ns}/streams", a.createStream)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/streams/{s}", a.getStream)
	mux.HandleFunc("PATCH /v1/tenants/{t}/namespaces/{ns}/streams/{s}", a.patchStream)
	mux.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}/streams/{s}", a.deleteStream)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/caches", a.listCaches)
	mux.HandleFunc("POST /v1/tenants/{t}/namespaces/{ns}/caches", a.createCache)
	mux.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/caches/{c}", a.getCache)
	mux.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}/caches/{c}", a.deleteCache)
	a.registerKeys(mux) // admin_keys.go: signing-key list, rotation, removal
}

// apiError is the JSON error body of the admin API.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *Admin) fail(w http.ResponseWriter, err error) {
	status, code := http.StatusInternalServerError, "storage_failed"
	switch {
	case errors.Is(err, auth.ErrTenantMismatch), errors.Is(err, auth.ErrForbidden):
		status, code = http.StatusForbidden, "unauthorized"
	case errors.Is(err, auth.ErrUnauthorized):
		status, code = http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, ErrNotFound):
		status, code = http.StatusNotFound, "not_found"
	case errors.Is(err, ErrExists), errors.Is(err, ErrNotEmpty):
		status, code = http.StatusConflict, "conflict"
	case errors.Is(err, ErrLimit):
		status, code = http.StatusConflict, "overloaded"
	case errors.Is(err, ErrInvalid):
		status, code = http.StatusBadRequest, "malformed"
	}
	msg := err.Error()
	if t := auth.WireText(err); t != "" {
		msg = t // never echo token details beyond the verifier's fixed reason
		var te *auth.TokenError
		if errors.As(err, &te) {
			msg = te.Error() // "auth required: token expired"
		}
	}
	if status == http.StatusInternalServerError && a.Logger != nil {
		a.Logger.Error("admin API failure", "err", err)
	}
	writeJSON(w, status, apiError{Code: code, Message: msg})
}

// principal verifies the bearer token. Errors wrap auth.ErrUnauthorized.
func (a *Admin) principal(r *http.Request) (*auth.Principal, error) {
	h := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		if _, disabled := a.Verifier.(auth.DisabledVerifier); disabled {
			return a.Verifier.Verify("")
		}
		return nil, fmt.Errorf("%w: missing bearer token", auth.ErrUnauthorized)
	}
	return a.Verifier.Verify(strings.TrimSpace(token))
}

// allow authenticates and checks one action; on failure it answers and returns false.
func (a *Admin) allow(w http.ResponseWriter, r *http.Request, action auth.Action, tenant, ns, object string) bool {
	p, err := a.principal(r)
	if err == nil {
		err = p.Allow(action, tenant, ns, object)
	}
	if err != nil {
		a.fail(w, err)
		return false
	}
	return true
}

// decode reads a body of at most 1 MiB that is exactly one JSON object (not null, not an
// array or scalar, nothing after it but white space) into v. Errors wrap ErrInvalid.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if len(data) > 1<<20 {
		return fmt.Errorf("%w: request body larger than 1 MiB", ErrInvalid)
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: request body must be a JSON object", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: request body: data after the JSON object", ErrInvalid)
	}
	return nil
}

// checkRequestNames answers 400 "invalid name" when a name is not ValidName (before any
// permission check: a syntax error reveals nothing about existence).
func (a *Admin) checkRequestNames(w http.ResponseWriter, names ...string) bool {
	for _, n := range names {
		if !ValidName(n) {
			writeJSON(w, http.StatusBadRequest, apiError{Code: "malformed", Message: fmt.Sprintf("invalid name %q (non-empty UTF-8, not . or .., no '/', '*' or control bytes, at most 255 bytes)", n)})
			return false
		}
	}
	return true
}

// samePath answers 400 when a body field names another tenant or namespace than the path.
func samePath(w http.ResponseWriter, field, body, path string) bool {
	if body != "" && body != path {
		writeJSON(w, http.StatusBadRequest, apiError{Code: "malformed", Message: fmt.Sprintf("%s %q in the body differs from %q in the path", field, body, path)})
		return false
	}
	return true
}

func (a *Admin) listTenants(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, auth.ActionTenantManage, auth.DefaultTenant, "", "") {
		return
	}
	writeJSON(w, http.StatusOK, a.Catalog.Tenants())
}

func (a *Admin) createTenant(w http.ResponseWriter, r *http.Request) {
	if !a.allow(w, r, auth.ActionTenantManage, auth.DefaultTenant, "", "") {
		return
	}
	var t Tenant
	if err := decode(r, &t); err != nil {
		a.fail(w, err)
		return
	}
	if !a.checkRequestNames(w, t.TenantID) {
		return
	}
	if t.DisplayName == "" {
		t.DisplayName = t.TenantID
	}
	if err := a.Catalog.CreateTenant(t); err != nil {
		a.fail(w, err)
		return
	}
	if a.Keys != nil && !a.Keys.HasTenant(t.TenantID) {
		if _, err := a.Keys.CreateTenant(t.TenantID); err != nil {
			a.fail(w, err)
			return
		}
	}
	writeJSON(w, http.StatusCreated, t)
}

func (a *Admin) getTenant(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !a.checkRequestNames(w, t) {
		return
	}
	if !a.allow(w, r, auth.ActionTenantManage, t, "", "") {
		return
	}
	got, err := a.Catalog.Tenant(t)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func (a *Admin) deleteTenant(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !a.checkRequestNames(w, t) {
		return
	}
	if !a.allow(w, r, auth.ActionTenantManage, auth.DefaultTenant, "", "") {
		return
	}
	if err := a.Catalog.DeleteTenant(t); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Admin) jwks(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if a.Keys == nil || !a.Keys.HasTenant(t) {
		a.fail(w, fmt.Errorf("%w: tenant %s has no keys", ErrNotFound, t))
		return
	}
	set, err := a.Keys.JWKS(t)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, set)
}

func (a *Admin) listNamespaces(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !a.checkRequestNames(w, t) {
		return
	}
	if !a.allow(w, r, auth.ActionTenantManage, t, "", "") {
		return
	}
	if _, err := a.Catalog.Tenant(t); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, nonNil(a.Catalog.Namespaces(t)))
}

func (a *Admin) createNamespace(w http.ResponseWriter, r *http.Request) {
	var n Namespace
	if err := decode(r, &n); err != nil {
		a.fail(w, err)
		return
	}
	if !samePath(w, "tenant_id", n.TenantID, r.PathValue("t")) {
		return
	}
	n.TenantID = r.PathValue("t")
	if !a.checkRequestNames(w, n.TenantID, n.Namespace) {
		return
	}
	if !a.allow(w, r, auth.ActionNamespaceManage, n.TenantID, n.Namespace, "") {
		return
	}
	if n.DisplayName == "" {
		n.DisplayName = n.Namespace
	}
	if err := a.Catalog.CreateNamespace(n); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, n)
}

func (a *Admin) getNamespace(w http.ResponseWriter, r *http.Request) {
	t, ns := r.PathValue("t"), r.PathValue("ns")
	if !a.checkRequestNames(w, t, ns) {
		return
	}
	if !a.allow(w, r, auth.ActionNamespaceManage, t, ns, "") {
		return
	}
	got, err := a.Catalog.Namespace(t, ns)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func (a *Admin) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	t, ns := r.PathValue("t"), r.PathValue("ns")
	if !a.checkRequestNames(w, t, ns) {
		return
	}
	if !a.allow(w, r, auth.ActionNamespaceManage, t, ns, "") {
		return
	}
	if err := a.Catalog.DeleteNamespace(t, ns); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Admin) listStreams(w http.ResponseWriter, r *http.Request) {
	if t, ns, ok := a.listScope(w, r, auth.ActionStreamManage); ok {
		writeJSON(w, http.StatusOK, nonNil(a.Catalog.Streams(t, ns)))
	}
}

func (a *Admin) createStream(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Stream
		Durable *bool `json:"durable"` // absent = durable unless NoDurableStorage
	}
	if err := decode(r, &body); err != nil {
		a.fail(w, err)
		return
	}
	s := body.Stream
	s.Durable = !a.NoDurableStorage
	if body.Durable != nil {
		s.Durable = *body.Durable
	}
	if !samePath(w, "tenant_id", s.TenantID, r.PathValue("t")) || !samePath(w, "namespace", s.Namespace, r.PathValue("ns")) {
		return
	}
	s.TenantID, s.Namespace = r.PathValue("t"), r.PathValue("ns")
	if !a.checkRequestNames(w, s.TenantID, s.Namespace, s.Stream) {
		return
	}
	if !a.allow(w, r, auth.ActionStreamManage, s.TenantID, s.Namespace, s.Stream) {
		return
	}
	created, err := a.Catalog.CreateStream(s, a.applyCreate)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

func (a *Admin) applyCreate(s Stream) error {
	if a.Streams == nil {
		return nil
	}
	return a.Streams.ApplyCreate(s)
}

func (a *Admin) getStream(w http.ResponseWriter, r *http.Request) {
	t, ns, name := r.PathValue("t"), r.PathValue("ns"), r.PathValue("s")
	if !a.checkRequestNames(w, t, ns, name) {
		return
	}
	if !a.allow(w, r, auth.ActionStreamManage, t, ns, name) {
		return
	}
	got, err := a.Catalog.Stream(t, ns, name)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a.describe(got)) // admin_describe.go
}

// streamPatch holds the fields PATCH may name (spec/auth.md §1): delivery, and retention
// and consistency with their current values (apply). Every other field is refused with
// 400: the fixed ones (shards, durable, routing, kind: a live log cannot change them on a
// single node; the names: they are the path) and unknown ones (a typo must not answer 200
// having changed nothing).
type streamPatch struct {
	Retention   *Retention `json:"retention"`
	Consistency *string    `json:"consistency"`
	Delivery    *string    `json:"delivery"`
}

// apply lays the patch over s. Delivery changes at once (sessions read it again when the
// catalog changes); retention and consistency are fixed while the stream's logs are open,
// as they are on a single node from creation on (core takes them when the logs open), so a
// PATCH may only repeat their current values: another value is refused, naming the field,
// rather than stored and left without effect. Errors wrap ErrInvalid.
func (p *streamPatch) apply(s *Stream) error {
	was := *s
	if p.Retention != nil {
		s.Retention = *p.Retention
	}
	if p.Consistency != nil {
		s.Consistency = *p.Consistency
	}
	if p.Delivery != nil {
		s.Delivery = *p.Delivery
	}
	if err := NormalizeStream(s); err != nil {
		return err
	}
	switch {
	case s.Retention.ageSeconds() != was.Retention.ageSeconds() || s.Retention.sizeBytes() != was.Retention.sizeBytes():
		return fmt.Errorf("%w: retention cannot change on an open stream yet: a single node fixes it when the stream's logs open (create a new stream with the retention wanted)", ErrInvalid)
	case s.Consistency != was.Consistency:
		return fmt.Errorf("%w: consistency cannot change on an open stream yet: a single node fixes it when the stream's logs open (create a new stream with the consistency wanted)", ErrInvalid)
	}
	return nil
}

// immutableStreamFields are the Stream fields fixed at creation.
var immutableStreamFields = map[string]bool{"shards": true, "durable": true, "routing": true, "kind": true, "tenant_id": true, "namespace": true, "stream": true}

// checkPatchFields refuses fields that PATCH cannot change. Errors wrap ErrInvalid.
func checkPatchFields(fields map[string]json.RawMessage) error {
	for f := range fields {
		switch {
		case f == "retention" || f == "consistency" || f == "delivery":
		case immutableStreamFields[f]:
			return fmt.Errorf("%w: %q is fixed at creation and cannot be changed by PATCH (delete and re-create the stream)", ErrInvalid, f)
		default:
			return fmt.Errorf("%w: unknown field %q (PATCH changes retention, consistency, delivery)", ErrInvalid, f)
		}
	}
	return nil
}

func (a *Admin) patchStream(w http.ResponseWriter, r *http.Request) {
	t, ns, name := r.PathValue("t"), r.PathValue("ns"), r.PathValue("s")
	if !a.checkRequestNames(w, t, ns, name) {
		return
	}
	if !a.allow(w, r, auth.ActionStreamManage, t, ns, name) {
		return
	}
	var fields map[string]json.RawMessage
	if err := decode(r, &fields); err != nil {
		a.fail(w, err)
		return
	}
	if err := checkPatchFields(fields); err != nil {
		a.fail(w, err)
		return
	}
	var p streamPatch
	if err := remarshal(fields, &p); err != nil {
		a.fail(w, err)
		return
	}
	got, err := a.Catalog.UpdateStream(t, ns, name, p.apply)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func (a *Admin) deleteStream(w http.ResponseWriter, r *http.Request) {
	t, ns, name := r.PathValue("t"), r.PathValue("ns"), r.PathValue("s")
	if !a.checkRequestNames(w, t, ns, name) {
		return
	}
	if !a.allow(w, r, auth.ActionStreamManage, t, ns, name) {
		return
	}
	err := a.Catalog.DeleteStream(t, ns, name, func(s Stream) error {
		if a.Streams == nil {
			return nil
		}
		return a.Streams.ApplyDelete(s)
	})
	if err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *Admin) listCaches(w http.ResponseWriter, r *http.Request) {
	if t, ns, ok := a.listScope(w, r, auth.ActionCacheManage); ok {
		writeJSON(w, http.StatusOK, nonNil(a.Catalog.Caches(t, ns)))
	}
}

func (a *Admin) createCache(w http.ResponseWriter, r *http.Request) {
	var c Cache
	if err := decode(r, &c); err != nil {
		a.fail(w, err)
		return
	}
	if !samePath(w, "tenant_id", c.TenantID, r.PathValue("t")) || !samePath(w, "namespace", c.Namespace, r.PathValue("ns")) {
		return
	}
	c.TenantID, c.Namespace = r.PathValue("t"), r.PathValue("ns")
	if !a.checkRequestNames(w, c.TenantID, c.Namespace, c.Cache) {
		return
	}
	if !a.allow(w, r, auth.ActionCacheManage, c.TenantID, c.Namespace, c.Cache) {
		return
	}
	var apply func(Cache) error
	if a.Streams != nil {
		apply = a.Streams.ApplyCreateCache
	}
	created, err := a.Catalog.CreateCache(c, apply)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, created)
}

func (a *Admin) getCache(w http.ResponseWriter, r *http.Request) {
	t, ns, name := r.PathValue("t"), r.PathValue("ns"), r.PathValue("c")
	if !a.checkRequestNames(w, t, ns, name) {
		return
	}
	if !a.allow(w, r, auth.ActionCacheManage, t, ns, name) {
		return
	}
	got, err := a.Catalog.Cache(t, ns, name)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func (a *Admin) deleteCache(w http.ResponseWriter, r *http.Request) {
	t, ns, name := r.PathValue("t"), r.PathValue("ns"), r.PathValue("c")
	if !a.checkRequestNames(w, t, ns, name) {
		return
	}
	if !a.allow(w, r, auth.ActionCacheManage, t, ns, name) {
		return
	}
	var apply func(Cache) error
	if a.Streams != nil {
		apply = a.Streams.ApplyDeleteCache
	}
	if err := a.Catalog.DeleteCache(t, ns, name, apply); err != nil {
		a.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// remarshal decodes the checked PATCH fields into p. Errors wrap ErrInvalid.
func remarshal(fields map[string]json.RawMessage, p *streamPatch) error {
	data, err := json.Marshal(fields)
	if err == nil {
		err = json.Unmarshal(data, p)
	}
	if err != nil {
		return fmt.Errorf("%w: request body: %v", ErrInvalid, err)
	}
	return nil
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// listScope checks a namespace listing request: valid names, the manage
// action on every object of the namespace (checked before existence, so a
// refusal reveals nothing), then the namespace itself. It answers the request
// and returns ok=false on any failure.
func (a *Admin) listScope(w http.ResponseWriter, r *http.Request, action auth.Action) (t, ns string, ok bool) {
	t, ns = r.PathValue("t"), r.PathValue("ns")
	if !a.checkRequestNames(w, t, ns) || !a.allow(w, r, action, t, ns, "*") {
		return "", "", false
	}
	if _, err := a.Catalog.Namespace(t, ns); err != nil {
		a.fail(w, err)
		return "", "", false
	}
	return t, ns, true
}

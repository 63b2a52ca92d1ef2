package rest

import (
	"fmt"
	"net/http"

	"felix/cluster/meta"
)

// catalogRoutes are the broker admin API's catalog paths (broker/admin.go)
// over the state machine: list and get are linearizable reads, create answers
// 201 with the created row (streams and caches with replication_factor,
// incarnation and created_index), delete answers 204. PATCH of a stream is not
// served here (405): the state machine has no command for it yet.
func (h *Handler) catalogRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/tenants", h.leaderOnly(h.listTenants))
	m.HandleFunc("POST /v1/tenants", h.write(h.createTenant))
	m.HandleFunc("GET /v1/tenants/{t}", h.leaderOnly(h.getTenant))
	m.HandleFunc("DELETE /v1/tenants/{t}", h.write(h.deleteTenant))
	m.HandleFunc("GET /v1/tenants/{t}/namespaces", h.leaderOnly(h.listNamespaces))
	m.HandleFunc("POST /v1/tenants/{t}/namespaces", h.write(h.createNamespace))
	m.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}", h.leaderOnly(h.getNamespace))
	m.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}", h.write(h.deleteNamespace))
	m.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/streams", h.leaderOnly(h.listStreams))
	m.HandleFunc("POST /v1/tenants/{t}/namespaces/{ns}/streams", h.write(h.createStream))
	m.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/streams/{s}", h.leaderOnly(h.getStream))
	m.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}/streams/{s}", h.write(h.deleteStream))
	m.HandleFunc("PATCH /v1/tenants/{t}/namespaces/{ns}/streams/{s}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, DELETE")
		writeError(w, http.StatusMethodNotAllowed, "malformed", "PATCH of a stream is not served by the control plane yet")
	})
	m.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/caches", h.leaderOnly(h.listCaches))
	m.HandleFunc("POST /v1/tenants/{t}/namespaces/{ns}/caches", h.write(h.createCache))
	m.HandleFunc("GET /v1/tenants/{t}/namespaces/{ns}/caches/{c}", h.leaderOnly(h.getCache))
	m.HandleFunc("DELETE /v1/tenants/{t}/namespaces/{ns}/caches/{c}", h.write(h.deleteCache))
}

// names checks path and body names (meta.ValidName) and that a body field
// naming the tenant or namespace agrees with the path; 400 otherwise.
func (h *Handler) names(w http.ResponseWriter, names ...string) bool {
	for _, n := range names {
		if !meta.ValidName(n) {
			h.fail(w, badRequest("invalid name %q (non-empty UTF-8, not . or .., no '/', '*' or control bytes, at most 255 bytes)", n))
			return false
		}
	}
	return true
}

func (h *Handler) samePath(w http.ResponseWriter, field, body, path string) bool {
	if body != "" && body != path {
		h.fail(w, badRequest("%s %q in the body differs from %q in the path", field, body, path))
		return false
	}
	return true
}

func notFound(what string) error {
	return &meta.Refusal{Status: http.StatusNotFound, Code: "not_found", Message: what + " not found"}
}

// created answers 201 with the command's value (or fallback when it has none).
func created(w http.ResponseWriter, res meta.Result, fallback any) {
	if res.Value != nil {
		fallback = res.Value
	}
	writeJSON(w, http.StatusCreated, fallback)
}

func (h *Handler) listTenants(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, nonNil(h.cfg.Node.FSM.State().Tenants()))
}

func (h *Handler) createTenant(w http.ResponseWriter, r *http.Request) {
	var c meta.CreateTenant
	if err := decode(r, &c); err != nil {
		h.fail(w, err)
		return
	}
	if !h.names(w, c.TenantID) {
		return
	}
	if c.DisplayName == "" {
		c.DisplayName = c.TenantID
	}
	if res, ok := h.propose(w, &c); ok {
		created(w, res, meta.Tenant(c))
	}
}

func (h *Handler) getTenant(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !h.names(w, t) {
		return
	}
	for _, x := range h.cfg.Node.FSM.State().Tenants() {
		if x.TenantID == t {
			writeJSON(w, http.StatusOK, x)
			return
		}
	}
	h.fail(w, notFound(fmt.Sprintf("tenant %q", t)))
}

func (h *Handler) deleteTenant(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !h.names(w, t) {
		return
	}
	if _, ok := h.propose(w, &meta.DeleteTenant{TenantID: t}); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *Handler) listNamespaces(w http.ResponseWriter, r *http.Request) {
	t := r.PathValue("t")
	if !h.names(w, t) {
		return
	}
	st := h.cfg.Node.FSM.State()
	found := false
	out := []meta.Namespace{}
	for _, x := range st.Tenants() {
		found = found || x.TenantID == t
	}
	for _, n := range st.Namespaces() {
		if n.TenantID == t {
			out = append(out, n)
		}
	}
	if !found {
		h.fail(w, notFound(fmt.Sprintf("tenant %q", t)))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) createNamespace(w http.ResponseWriter, r *http.Request) {
	var c meta.CreateNamespace
	if err := decode(r, &c); err != nil {
		h.fail(w, err)
		return
	}
	if !h.samePath(w, "tenant_id", c.TenantID, r.PathValue("t")) {
		return
	}
	c.TenantID = r.PathValue("t")
	if !h.names(w, c.TenantID, c.Namespace) {
		return
	}
	if c.DisplayName == "" {
		c.DisplayName = c.Namespace
	}
	if res, ok := h.propose(w, &c); ok {
		created(w, res, meta.Namespace(c))
	}
}

// namespace gives the namespace of the path, or answers 400/404.
func (h *Handler) namespace(w http.ResponseWriter, r *http.Request) (*meta.State, string, string, bool) {
	t, ns := r.PathValue("t"), r.PathValue("ns")
	if !h.names(w, t, ns) {
		return nil, "", "", false
	}
	st := h.cfg.Node.FSM.State()
	for _, n := range st.Namespaces() {
		if n.TenantID == t && n.Namespace == ns {
			return st, t, ns, true
		}
	}
	h.fail(w, notFound(fmt.Sprintf("namespace %q/%q", t, ns)))
	return nil, "", "", false
}

func (h *Handler) getNamespace(w http.ResponseWriter, r *http.Request) {
	st, t, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	for _, n := range st.Namespaces() {
		if n.TenantID == t && n.Namespace == ns {
			writeJSON(w, http.StatusOK, n)
		}
	}
}

func (h *Handler) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	t, ns := r.PathValue("t"), r.PathValue("ns")
	if !h.names(w, t, ns) {
		return
	}
	if _, ok := h.propose(w, &meta.DeleteNamespace{TenantID: t, Namespace: ns}); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *Handler) listStreams(w http.ResponseWriter, r *http.Request) {
	st, t, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	out := []meta.Stream{}
	for _, s := range st.Streams() {
		if s.TenantID == t && s.Namespace == ns {
			out = append(out, s)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// createStream takes the admin API's stream body plus replication_factor;
// durable absent means durable (the broker's default with storage).
func (h *Handler) createStream(w http.ResponseWriter, r *http.Request) {
	var body struct {
		meta.CreateStream
		Durable *bool `json:"durable"`
	}
	if err := decode(r, &body); err != nil {
		h.fail(w, err)
		return
	}
	c := body.CreateStream
	c.Durable = body.Durable == nil || *body.Durable
	if !h.samePath(w, "tenant_id", c.TenantID, r.PathValue("t")) || !h.samePath(w, "namespace", c.Namespace, r.PathValue("ns")) {
		return
	}
	c.TenantID, c.Namespace = r.PathValue("t"), r.PathValue("ns")
	if !h.names(w, c.TenantID, c.Namespace, c.Stream) {
		return
	}
	c.AtMs = h.nowMs()
	if res, ok := h.propose(w, &c); ok {
		created(w, res, nil)
	}
}

func (h *Handler) getStream(w http.ResponseWriter, r *http.Request) {
	st, t, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	name := r.PathValue("s")
	for _, s := range st.Streams() {
		if s.TenantID == t && s.Namespace == ns && s.Stream == name {
			writeJSON(w, http.StatusOK, s)
			return
		}
	}
	h.fail(w, notFound(fmt.Sprintf("stream %q/%q/%q", t, ns, name)))
}

func (h *Handler) deleteStream(w http.ResponseWriter, r *http.Request) {
	t, ns, s := r.PathValue("t"), r.PathValue("ns"), r.PathValue("s")
	if !h.names(w, t, ns, s) {
		return
	}
	if _, ok := h.propose(w, &meta.DeleteStream{TenantID: t, Namespace: ns, Stream: s}); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (h *Handler) listCaches(w http.ResponseWriter, r *http.Request) {
	st, t, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	out := []meta.Cache{}
	for _, c := range st.Caches() {
		if c.TenantID == t && c.Namespace == ns {
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) createCache(w http.ResponseWriter, r *http.Request) {
	var c meta.CreateCache
	if err := decode(r, &c); err != nil {
		h.fail(w, err)
		return
	}
	if !h.samePath(w, "tenant_id", c.TenantID, r.PathValue("t")) || !h.samePath(w, "namespace", c.Namespace, r.PathValue("ns")) {
		return
	}
	c.TenantID, c.Namespace = r.PathValue("t"), r.PathValue("ns")
	if !h.names(w, c.TenantID, c.Namespace, c.Cache) {
		return
	}
	if c.DisplayName == "" {
		c.DisplayName = c.Cache
	}
	c.AtMs = h.nowMs()
	if res, ok := h.propose(w, &c); ok {
		created(w, res, nil)
	}
}

func (h *Handler) getCache(w http.ResponseWriter, r *http.Request) {
	st, t, ns, ok := h.namespace(w, r)
	if !ok {
		return
	}
	name := r.PathValue("c")
	for _, c := range st.Caches() {
		if c.TenantID == t && c.Namespace == ns && c.Cache == name {
			writeJSON(w, http.StatusOK, c)
			return
		}
	}
	h.fail(w, notFound(fmt.Sprintf("cache %q/%q/%q", t, ns, name)))
}

func (h *Handler) deleteCache(w http.ResponseWriter, r *http.Request) {
	t, ns, c := r.PathValue("t"), r.PathValue("ns"), r.PathValue("c")
	if !h.names(w, t, ns, c) {
		return
	}
	if _, ok := h.propose(w, &meta.DeleteCache{TenantID: t, Namespace: ns, Cache: c}); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

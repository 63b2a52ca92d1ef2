package broker

// Cluster mode's admin writes and ops endpoint (controlplane.go). Every catalog write the
// admin API receives (POST, PATCH, DELETE under /v1/tenants) is checked here as the admin
// API checks it (names, then the caller's permission, with the broker's verifier) and then
// forwarded to the control plane with its admin token; the broker answers with the control
// plane's answer (status, body, Retry-After), so replication_factor and the control
// plane's refusals (409, 503 with fewer live brokers than the factor) reach the caller
// unchanged. A create answered 2xx waits (at most writeCatchUp) until this broker's feed
// reached the row's created_index, so a read through the same broker sees it. No member
// answering: 503 unavailable, Retry-After 1.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"felix/auth"
	"felix/core"
	"felix/proto"
)

// Bounds of a forwarded admin write.
const (
	writeForwardTimeout = 5 * time.Second // a leader election takes about a second or two
	writeCatchUp        = 5 * time.Second
)

// writesMux is the cluster-mode admin write routes (Admin.Writes).
func (cp *controlPlane) writesMux(a *Admin) *http.ServeMux {
	mux := http.NewServeMux()
	tenantAdmin := func(*http.Request, names) (auth.Action, string, string, string) {
		return auth.ActionTenantManage, auth.DefaultTenant, "", ""
	}
	namespace := func(r *http.Request, n names) (auth.Action, string, string, string) {
		return auth.ActionNamespaceManage, r.PathValue("t"), orPath(n.Namespace, r.PathValue("ns")), ""
	}
	stream := func(r *http.Request, n names) (auth.Action, string, string, string) {
		return auth.ActionStreamManage, r.PathValue("t"), r.PathValue("ns"), orPath(n.Stream, r.PathValue("s"))
	}
	cache := func(r *http.Request, n names) (auth.Action, string, string, string) {
		return auth.ActionCacheManage, r.PathValue("t"), r.PathValue("ns"), orPath(n.Cache, r.PathValue("c"))
	}
	for pattern, perm := range map[string]permission{
		"POST /v1/tenants": tenantAdmin, "DELETE /v1/tenants/{t}": tenantAdmin,
		"POST /v1/tenants/{t}/namespaces": namespace, "DELETE /v1/tenants/{t}/namespaces/{ns}": namespace,
		"POST /v1/tenants/{t}/namespaces/{ns}/streams":       stream,
		"PATCH /v1/tenants/{t}/namespaces/{ns}/streams/{s}":  stream,
		"DELETE /v1/tenants/{t}/namespaces/{ns}/streams/{s}": stream,
		"POST /v1/tenants/{t}/namespaces/{ns}/caches":        cache,
		"DELETE /v1/tenants/{t}/namespaces/{ns}/caches/{c}":  cache,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { cp.forwardWrite(a, perm, w, r) })
	}
	return mux
}

// names are the names a write's body may carry.
type names struct {
	TenantID  string `json:"tenant_id"`
	Namespace string `json:"namespace"`
	Stream    string `json:"stream"`
	Cache     string `json:"cache"`
}

// permission gives the action and resource a write needs (the admin API's, admin.go).
type permission func(r *http.Request, n names) (action auth.Action, tenant, ns, object string)

func orPath(body, path string) string {
	if path != "" {
		return path
	}
	return body
}

// forwardWrite checks one admin write and forwards it (the file comment).
func (cp *controlPlane) forwardWrite(a *Admin, perm permission, w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20+1))
	if err != nil || len(body) > 1<<20 {
		a.fail(w, errors.Join(ErrInvalid, errors.New("request body unreadable or larger than 1 MiB"), err))
		return
	}
	var n names
	if len(body) > 0 {
		_ = json.Unmarshal(body, &n) // the control plane validates the body; names only for the check
	}
	action, t, ns, obj := perm(r, n)
	var check []string
	for _, v := range []string{t, ns, obj} {
		if v != "" {
			check = append(check, v)
		}
	}
	if !a.checkRequestNames(w, check...) || !a.allow(w, r, action, t, ns, obj) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), writeForwardTimeout)
	defer cancel()
	resp, err := cp.client.Forward(ctx, r.Method, r.URL.RequestURI(), body)
	if err != nil {
		cp.unreachable(err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "control plane: " + err.Error()})
		return
	}
	cp.reachable()
	if resp.Status >= 200 && resp.Status < 300 {
		var created struct {
			CreatedIndex uint64 `json:"created_index"`
		}
		if json.Unmarshal(resp.Body, &created) == nil && created.CreatedIndex > 0 {
			wctx, wcancel := context.WithTimeout(r.Context(), writeCatchUp)
			cp.waitCursor(wctx, created.CreatedIndex)
			wcancel()
		}
	}
	for _, h := range []string{"Content-Type", "Retry-After", "Allow"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// ClusterView is GET /cluster/ownership on the ops port in cluster mode: this broker's
// node id, feed position (epoch, seq: the Raft index its catalog and table are at),
// whether the control plane answered last, the enabled fleet features, the ownership
// table, and the shards open here with their stream log's offsets (Tail, Committed,
// Durable: the durable_offset a follower acknowledges).
type ClusterView struct {
	NodeID    string          `json:"node_id"`
	Epoch     uint64          `json:"epoch"`
	Seq       uint64          `json:"seq"`
	Reachable bool            `json:"reachable"`
	Features  []string        `json:"features"`
	Ownership []OwnershipRow  `json:"ownership"`
	Open      []OpenShardView `json:"open"`
}

// OwnershipRow is one shard's assignment in ClusterView (ShardKey is the control plane's
// "kind/tenant/namespace/name/shard").
type OwnershipRow struct {
	ShardKey   string   `json:"shard"`
	Leader     string   `json:"leader"`
	ReplicaSet []string `json:"replica_set"`
	Generation uint64   `json:"generation"`
}

// OpenShardView is one shard open here: role ("leader", "follower"), generation and its
// stream log's offsets (0 for a cache or a log not readable).
type OpenShardView struct {
	ShardKey   string `json:"shard"`
	Role       string `json:"role"`
	Generation uint64 `json:"generation"`
	Tail       uint64 `json:"tail"`
	Committed  uint64 `json:"committed"`
	Durable    uint64 `json:"durable_offset"`
}

// registerOps adds GET /cluster/ownership[?min_seq=N&wait=DURATION]: ClusterView, after
// waiting (at most wait, ≤ 60 s) for the feed to reach N.
func (cp *controlPlane) registerOps(mux *http.ServeMux) {
	mux.HandleFunc("GET /cluster/ownership", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if n, err := strconv.ParseUint(q.Get("min_seq"), 10, 64); err == nil {
			wait, _ := time.ParseDuration(q.Get("wait"))
			ctx, cancel := context.WithTimeout(r.Context(), min(max(wait, 0), time.Minute))
			cp.waitCursor(ctx, n)
			cancel()
		}
		writeJSON(w, http.StatusOK, cp.view())
	})
}

func (cp *controlPlane) view() ClusterView {
	cp.mu.Lock()
	v := ClusterView{NodeID: cp.s.cfg.NodeID, Epoch: cp.mirror.epoch, Seq: cp.cursor.Load(), Reachable: !cp.away.Load(),
		Features: []string{}, Ownership: []OwnershipRow{}, Open: []OpenShardView{}}
	for f := range cp.mirror.features {
		v.Features = append(v.Features, f)
	}
	cp.mu.Unlock()
	for ref, a := range *cp.owners.Load() {
		v.Ownership = append(v.Ownership, OwnershipRow{ShardKey: metaShardKey(ref), Leader: a.Leader,
			ReplicaSet: append([]string{}, a.ReplicaSet...), Generation: a.Generation})
	}
	for _, st := range cp.s.engine.Shards() {
		o := OpenShardView{ShardKey: metaShardKey(st.Ref), Role: "follower", Generation: st.Generation}
		if st.Role == core.RoleLeader {
			o.Role = "leader"
		}
		if st.Ref.Kind == core.ShardStream {
			rs, err := cp.s.engine.ReplicaState(core.LogAddr{Kind: st.Ref.Kind, Name: st.Ref.Name, Shard: st.Ref.Shard, Log: proto.LogStream})
			if err == nil {
				o.Tail, o.Committed, o.Durable = rs.Tail, rs.Committed, rs.Durable
			}
		}
		v.Open = append(v.Open, o)
	}
	slices.Sort(v.Features)
	slices.SortFunc(v.Ownership, func(a, b OwnershipRow) int { return strings.Compare(a.ShardKey, b.ShardKey) })
	slices.SortFunc(v.Open, func(a, b OpenShardView) int { return strings.Compare(a.ShardKey, b.ShardKey) })
	return v
}

package metaclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"felix/auth"
	"felix/cluster/meta"
)

// Snapshot is GET /v1/snapshot (cluster/meta/rest.SnapshotBody's JSON): the
// member's catalog, placement, brokers and enabled features at Seq, the Raft
// index to follow the feed after, and the feed Epoch.
type Snapshot struct {
	Seq         uint64              `json:"seq"`
	Epoch       uint64              `json:"epoch"`
	Tenants     []meta.Tenant       `json:"tenants"`
	Namespaces  []meta.Namespace    `json:"namespaces"`
	Streams     []meta.Stream       `json:"streams"`
	Caches      []meta.Cache        `json:"caches"`
	Tombstones  []meta.Tombstone    `json:"tombstones"`
	Assignments []meta.Assignment   `json:"assignments"`
	Brokers     []meta.Broker       `json:"brokers"`
	Features    []meta.FeatureState `json:"features"`
}

// Change is one feed row (meta.Change) with its value kept as raw JSON: the
// row's entity (tenant, namespace, stream, cache, tombstone, broker,
// assignment, feature, member) decides its shape; absent on a delete.
type Change struct {
	Seq    uint64          `json:"seq"`
	Entity string          `json:"entity"`
	Op     string          `json:"op"`
	Key    string          `json:"key"`
	Value  json.RawMessage `json:"value,omitempty"`
}

// Page is one GET /v1/changes answer (meta.Page): the feed epoch, the rows
// after the cursor, and Last, the cursor to ask after next.
type Page struct {
	Epoch   uint64   `json:"epoch"`
	Changes []Change `json:"changes"`
	Last    uint64   `json:"last"`
}

// Registration is a broker's POST /v1/brokers body: meta.RegisterBroker (node
// id, storage identity, client and internal advertised addresses, the fleet
// features it implements, per shard the highest generation it has seen, its
// settings) and its feed cursor (the Raft index it has applied the catalog
// through; additive: today's control plane ignores it).
type Registration struct {
	meta.RegisterBroker
	FeedCursor uint64 `json:"feed_cursor,omitempty"`
}

// HeartbeatBody is a broker's heartbeat body: meta.Heartbeat (draining, the
// generations it holds) and its feed cursor (additive, as in Registration).
type HeartbeatBody struct {
	meta.Heartbeat
	FeedCursor uint64 `json:"feed_cursor,omitempty"`
}

// Register is POST /v1/brokers with r. Returns the registered meta.Broker; a
// refusal is *RefusedError carrying the control plane's reason (seed, "A new
// cluster: the first broker's configuration wins").
func (c *Client) Register(ctx context.Context, r Registration) (meta.Broker, error) {
	body, err := jsonBody(r)
	if err != nil {
		return meta.Broker{}, err
	}
	var b meta.Broker
	err = c.call(ctx, request{method: http.MethodPost, path: "/v1/brokers", body: body}, &b)
	return b, err
}

// Heartbeat is POST /v1/brokers/{id}/heartbeat with {draining, generations,
// feed_cursor}: nil on 204, *APIError 404 for a broker the control plane does
// not know (register again).
func (c *Client) Heartbeat(ctx context.Context, h HeartbeatBody) error {
	body, err := jsonBody(h)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/brokers/" + url.PathEscape(h.NodeID) + "/heartbeat", body: body}, nil)
}

// Report is POST /v1/reports: one shard's replica report (204); 404 an
// unknown shard or leader, *RefusedError a stale generation.
func (c *Client) Report(ctx context.Context, r meta.ReplicaReport) error {
	body, err := jsonBody(r)
	if err != nil {
		return err
	}
	return c.call(ctx, request{method: http.MethodPost, path: "/v1/reports", body: body}, nil)
}

// Snapshot is GET /v1/snapshot.
func (c *Client) Snapshot(ctx context.Context) (Snapshot, error) {
	var s Snapshot
	err := c.call(ctx, request{method: http.MethodGet, path: "/v1/snapshot"}, &s)
	return s, err
}

// Changes is the long poll GET /v1/changes?after=AFTER&wait=WAIT: the rows
// after the cursor, waiting up to wait (the control plane caps it at 60 s)
// for one. A cursor the feed cannot serve is *GoneError (ErrGone).
func (c *Client) Changes(ctx context.Context, after uint64, wait time.Duration) (Page, error) {
	var p Page
	path := "/v1/changes?after=" + strconv.FormatUint(after, 10) + "&wait=" + wait.String()
	err := c.call(ctx, request{method: http.MethodGet, path: path, timeout: wait + c.cfg.RequestTimeout}, &p)
	return p, err
}

// Forward sends one admin request (a catalog write a broker received: method,
// path with query, body) to the control plane and returns its answer as
// received, whatever the status, so the broker answers its client with the
// control plane's answer. Only a request no member answered (other than a 503
// with Retry-After) before ctx ended is an error (ErrUnavailable).
func (c *Client) Forward(ctx context.Context, method, pathQuery string, body []byte) (*Response, error) {
	if len(pathQuery) == 0 || pathQuery[0] != '/' {
		return nil, fmt.Errorf("metaclient: forward path %q: want an absolute path", pathQuery)
	}
	return c.do(ctx, request{method: method, path: pathQuery, body: body})
}

// JWKS is GET /v1/tenants/{tenant}/.well-known/jwks.json: the tenant's verifying keys
// (spec/auth.md §3.3 and §4 step 1; docs/controlplane.md, "Tenant keys and JWKS"), checked
// by auth.ParseJWKS. Errors: *APIError 404 for a tenant the member does not hold (or a
// member without tenant keys), auth.ErrInvalidJWKS for a document that does not parse,
// ErrUnavailable when no member answered before ctx ended.
func (c *Client) JWKS(ctx context.Context, tenant string) (auth.JWKS, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tenants/" + url.PathEscape(tenant) + "/.well-known/jwks.json"})
	if err != nil {
		return auth.JWKS{}, err
	}
	if resp.Status < 200 || resp.Status > 299 {
		return auth.JWKS{}, answerError(resp)
	}
	doc, err := auth.ParseJWKS(resp.Body)
	if err != nil {
		return auth.JWKS{}, fmt.Errorf("metaclient: JWKS of tenant %s: %w", tenant, err)
	}
	return doc, nil
}

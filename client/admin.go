package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// ErrExists: the admin API refused to create an object that exists, or to delete one that
// is not empty (HTTP 409).
var ErrExists = errors.New("felix: already exists or not empty")

// Admin calls the broker's admin HTTP API (docs/operations.md, "Admin API"; the control
// plane's REST paths and JSON shapes, spec/auth.md §1) with a Bearer token, in one tenant
// and namespace. It is safe for concurrent use.
type Admin struct {
	base      string // scheme://host:port, no trailing slash
	token     string
	tenant    string
	namespace string
	hc        *http.Client
}

// AdminOption configures NewAdmin.
type AdminOption func(*Admin)

// AdminToken sets the bearer token (default FELIX_AUTH_TOKEN).
func AdminToken(token string) AdminOption { return func(a *Admin) { a.token = token } }

// AdminTenant sets the tenant (default FELIX_AUTH_TENANT, else "default").
func AdminTenant(t string) AdminOption { return func(a *Admin) { a.tenant = t } }

// AdminNamespace sets the namespace (default "default").
func AdminNamespace(ns string) AdminOption { return func(a *Admin) { a.namespace = ns } }

// AdminHTTPClient sets the HTTP client (default: one with a 30 s timeout).
func AdminHTTPClient(hc *http.Client) AdminOption { return func(a *Admin) { a.hc = hc } }

// NewAdmin returns an admin client for the API at addr: "host:port" (http assumed) or a
// URL with scheme http or https. Errors: ErrInvalidArgument.
func NewAdmin(addr string, opts ...AdminOption) (*Admin, error) {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: admin address %q", ErrInvalidArgument, addr)
	}
	a := &Admin{base: strings.TrimRight(u.Scheme+"://"+u.Host+u.Path, "/"), tenant: "default", namespace: "default",
		token: os.Getenv("FELIX_AUTH_TOKEN"), hc: &http.Client{Timeout: 30 * time.Second}}
	if t := os.Getenv("FELIX_AUTH_TENANT"); t != "" {
		a.tenant = t
	}
	for _, o := range opts {
		o(a)
	}
	if a.tenant == "" || a.namespace == "" {
		return nil, fmt.Errorf("%w: empty tenant or namespace", ErrInvalidArgument)
	}
	return a, nil
}

// Values of StreamInfo.Kind, Consistency and Delivery (spec/auth.md §1). What each means
// on a single-node broker is in docs/operations.md, "Stream options"; Queue, Quorum,
// AtLeastOnce and a Retention bound need a durable stream (CreateStream answers
// ErrMalformed naming the field otherwise).
const (
	// KindStream (the default): read by Subscribe and by consumer groups.
	KindStream = "Stream"
	// KindQueue: read through consumer groups only (Poll, Ack, Nack); Subscribe is
	// refused with ErrMalformed.
	KindQueue = "Queue"
	// ConsistencyLeader (the default): a publish is acknowledged at the broker's commit
	// under its fsync mode.
	ConsistencyLeader = "Leader"
	// ConsistencyQuorum: a publish is acknowledged once a majority holds it on disk; a
	// single node fsyncs the stream's log before every acknowledgement.
	ConsistencyQuorum = "Quorum"
	// DeliveryAtMostOnce (the default): acknowledged and fire-and-forget publishes alike.
	DeliveryAtMostOnce = "AtMostOnce"
	// DeliveryAtLeastOnce: only acknowledged publishes (answered after commit) are
	// accepted; an AckNone publish is refused by the broker and not stored.
	DeliveryAtLeastOnce = "AtLeastOnce"
)

// Retention bounds a durable stream's log per shard: whole sealed segments older than
// MaxAgeSeconds or beyond MaxSizeBytes are dropped from the head. A nil or zero field
// takes the broker's default (FELIX_DURABLE_RETENTION_SECONDS / _BYTES, off unless set);
// a set one wins over it. It is fixed once the stream exists.
type Retention struct {
	MaxAgeSeconds *int64 `json:"max_age_seconds,omitempty"`
	MaxSizeBytes  *int64 `json:"max_size_bytes,omitempty"`
}

// StreamInfo is a stream as the admin API shows it. For CreateStream, empty fields take
// the broker's defaults (kind Stream, 1 shard, consistency Leader, delivery AtMostOnce,
// routing modulo); Kind, Consistency and Delivery take the constants above.
type StreamInfo struct {
	Tenant      string    `json:"tenant_id"`
	Namespace   string    `json:"namespace"`
	Name        string    `json:"stream"`
	Kind        string    `json:"kind,omitempty"` // KindStream or KindQueue
	Shards      uint32    `json:"shards,omitempty"`
	Retention   Retention `json:"retention"`
	Consistency string    `json:"consistency,omitempty"` // ConsistencyLeader or ConsistencyQuorum
	Delivery    string    `json:"delivery,omitempty"`    // DeliveryAtMostOnce or DeliveryAtLeastOnce
	Durable     bool      `json:"durable"`
	Routing     string    `json:"routing,omitempty"` // modulo or jump_hash
	// Damaged lists the shards whose log holds damage on the broker answering (issue 23;
	// docs/operations.md "Storage faults"); empty when none.
	Damaged []ShardDamage `json:"damaged,omitempty"`
	// ShardStats is each shard's retained range and size on the broker answering
	// (DescribeStream only; issue 23 item 5): see ShardStats.
	ShardStats []ShardStats `json:"shard_stats,omitempty"`
}

// ShardStats is one shard of a stream as DescribeStream shows it (StreamInfo.ShardStats):
// the oldest retained offset and the last committed one (nil while the shard is empty),
// the offsets held between them (Records; generation-start records included) and the
// record log's segment bytes (what retention bounds; 0 in memory). Open is false for a
// shard not open on the broker answering.
type ShardStats struct {
	Shard       int     `json:"shard"`
	Open        bool    `json:"open"`
	FirstOffset *uint64 `json:"first_offset,omitempty"`
	LastOffset  *uint64 `json:"last_offset,omitempty"`
	Records     uint64  `json:"records"`
	Bytes       int64   `json:"bytes"`
}

// ShardDamage is one damaged shard of a stream (StreamInfo.Damaged): the segment file
// and byte position of the damage, its kind (e.g. "RecordChecksum"), the first offset it
// makes unreadable, and whether the shard still serves around it (Readable) or answers
// every request with storage_failed (its log did not open: `felix log repair`).
type ShardDamage struct {
	Shard    int    `json:"shard"`
	Segment  string `json:"segment"`
	AtByte   int64  `json:"at_byte"`
	Kind     string `json:"kind"`
	Offset   uint64 `json:"offset"`
	Readable bool   `json:"readable"`
}

// CacheInfo is a cache as the admin API shows it (Shards default 1, Durable default true).
type CacheInfo struct {
	Tenant      string `json:"tenant_id"`
	Namespace   string `json:"namespace"`
	Name        string `json:"cache"`
	DisplayName string `json:"display_name,omitempty"`
	Shards      uint32 `json:"shards,omitempty"`
	Durable     *bool  `json:"durable,omitempty"`
}

func (a *Admin) nsPath() string {
	return "/v1/tenants/" + url.PathEscape(a.tenant) + "/namespaces/" + url.PathEscape(a.namespace)
}

// CreateStream creates s (Name required; Tenant/Namespace are the Admin's). Errors:
// ErrExists, ErrNotFound (namespace), ErrUnauthorized, ErrMalformed (invalid settings).
func (a *Admin) CreateStream(ctx context.Context, s StreamInfo) (StreamInfo, error) {
	s.Tenant, s.Namespace = a.tenant, a.namespace
	var out StreamInfo
	err := a.do(ctx, http.MethodPost, a.nsPath()+"/streams", s, &out)
	return out, err
}

// ListStreams lists the namespace's streams.
func (a *Admin) ListStreams(ctx context.Context) ([]StreamInfo, error) {
	var out []StreamInfo
	err := a.do(ctx, http.MethodGet, a.nsPath()+"/streams", nil, &out)
	return out, err
}

// DescribeStream returns one stream. Errors: ErrNotFound, ErrUnauthorized.
func (a *Admin) DescribeStream(ctx context.Context, name string) (StreamInfo, error) {
	var out StreamInfo
	err := a.do(ctx, http.MethodGet, a.nsPath()+"/streams/"+url.PathEscape(name), nil, &out)
	return out, err
}

// DeleteStream deletes a stream and its data. Errors: ErrNotFound, ErrUnauthorized.
func (a *Admin) DeleteStream(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, a.nsPath()+"/streams/"+url.PathEscape(name), nil, nil)
}

// CreateCache creates c (Name required). Errors: ErrExists, ErrNotFound, ErrUnauthorized,
// ErrMalformed.
func (a *Admin) CreateCache(ctx context.Context, c CacheInfo) (CacheInfo, error) {
	c.Tenant, c.Namespace = a.tenant, a.namespace
	var out CacheInfo
	err := a.do(ctx, http.MethodPost, a.nsPath()+"/caches", c, &out)
	return out, err
}

// ListCaches lists the namespace's caches.
func (a *Admin) ListCaches(ctx context.Context) ([]CacheInfo, error) {
	var out []CacheInfo
	err := a.do(ctx, http.MethodGet, a.nsPath()+"/caches", nil, &out)
	return out, err
}

// DescribeCache returns one cache. Errors: ErrNotFound, ErrUnauthorized.
func (a *Admin) DescribeCache(ctx context.Context, name string) (CacheInfo, error) {
	var out CacheInfo
	err := a.do(ctx, http.MethodGet, a.nsPath()+"/caches/"+url.PathEscape(name), nil, &out)
	return out, err
}

// DeleteCache deletes a cache and its data. Errors: ErrNotFound, ErrUnauthorized.
func (a *Admin) DeleteCache(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, a.nsPath()+"/caches/"+url.PathEscape(name), nil, nil)
}

// AdminError is a refusal from the admin API: its HTTP status and {"code","message"} body.
// errors.Is matches ErrRefused and ErrUnauthorized (401/403), ErrNotFound (404), ErrExists
// (409), ErrMalformed (400), ErrStorageFailed (500).
type AdminError struct {
	Status  int
	Code    string
	Message string
}

// Error formats the status, code and message.
func (e *AdminError) Error() string {
	return fmt.Sprintf("felix admin: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches the sentinels listed on AdminError.
func (e *AdminError) Is(target error) bool {
	switch target {
	case ErrRefused:
		return true
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrExists:
		return e.Status == http.StatusConflict
	case ErrMalformed:
		return e.Status == http.StatusBadRequest
	case ErrStorageFailed:
		return e.Status >= 500
	}
	return false
}

// do sends one request; out (if non-nil) receives the JSON answer of a 2xx status.
func (a *Admin) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, body)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("felix admin: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("felix admin: reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &AdminError{Status: resp.StatusCode}
		var body struct{ Code, Message string }
		if json.Unmarshal(data, &body) == nil {
			e.Code, e.Message = body.Code, body.Message
		} else {
			e.Message = strings.TrimSpace(string(data))
		}
		return e
	}
	if out == nil || len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: admin answer: %v", ErrProtocol, err)
	}
	return nil
}

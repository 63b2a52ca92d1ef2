// Package rest is the control plane's REST API (issue 17 item 3;
// docs/controlplane.md, "REST"; ../shared/spec/config.md §7): an http.Handler
// over a raftnode.Node serving the catalog with the broker admin API's paths
// and JSON shapes (plus replication_factor), GET /v1/snapshot, the change feed
// GET /v1/changes, broker registration and heartbeats, replica reports, the
// members and GET/POST /v1/fleet/features (seed
// ../shared/seeds/upgrades-and-compatibility.txt, "Control-plane REST",
// "Fleet features").
//
// JSON readers ignore unknown fields (the seed: "additive, and the broker
// tolerates absence"); a missing field takes its default. A write reaching a
// follower member is forwarded to the leader once (never a chain: a
// forwarded request that reaches a non-leader is answered 503), or answered
// 503 with Retry-After when there is no leader. Catalog reads are
// linearizable: the member confirms it leads (raft VerifyLeader) after a
// barrier once per term; snapshot and feed reads are served from the member's
// own state (may be stale, never go backwards on one member).
//
// Every write (POST, PATCH, DELETE) needs "Authorization: Bearer TOKEN" with
// the admin token (LoadOrCreateToken), unless Config.AuthOff.
package rest

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
)

// ForwardedHeader marks a request a member forwarded to the leader; a member
// that is not the leader answers it 503 instead of forwarding again.
const ForwardedHeader = "X-Felix-Forwarded"

// Defaults of Config's zero fields.
const (
	DefaultProposeTimeout = 5 * time.Second
	DefaultMaxWait        = 60 * time.Second
	DefaultChangesLimit   = 1000 // FELIX_CONTROLPLANE_CHANGES_LIMIT (spec/config.md §5)
	maxBody               = 1 << 20
)

// Config configures a Handler.
type Config struct {
	// Node is the member the handler serves.
	Node *raftnode.Node
	// Token is the admin token every write must carry (Bearer); AuthOff
	// disables the check (FELIX_AUTH=off).
	Token   string
	AuthOff bool
	// MemberURL gives a member's REST base URL ("http://host:port") from its
	// Raft server id, or "" when unknown; nil knows none (a follower then
	// answers writes 503 naming the leader).
	MemberURL func(id raft.ServerID) string
	// Now is the wall clock stamped into commands as at_ms (time.Now).
	Now func() time.Time
	// ProposeTimeout bounds one Raft apply (DefaultProposeTimeout).
	ProposeTimeout time.Duration
	// MaxWait bounds the feed's long-poll wait (DefaultMaxWait).
	MaxWait time.Duration
	// ChangesLimit is the most feed rows per page (DefaultChangesLimit).
	ChangesLimit int
	// Liveness is the state machine's broker liveness timeout (meta's default).
	Liveness time.Duration
	// Client forwards writes to the leader (a client with a 30 s timeout).
	Client *http.Client
	// Logger receives failures (nil = discard).
	Logger hclog.Logger
	// OnHeartbeat, when set, is called on the leader with each accepted
	// heartbeat's broker and draining flag, as it arrives (the placement loop's
	// failure detector, cluster/meta/controller).
	OnHeartbeat func(node string, draining bool)
	// HeartbeatEntryEvery, when > 0, makes a heartbeat a Raft entry only when
	// it changes something (draining, a higher generation) or the broker's
	// last entry is that old (DefaultHeartbeatEntryEvery in the command); 0:
	// every heartbeat is an entry.
	HeartbeatEntryEvery time.Duration
	// Keys holds the tenants' signing keys (OpenTenantKeys): JWKS and token
	// issue; nil answers those paths 404.
	Keys *TenantKeys
}

// Handler is the REST API of one control-plane member (package doc).
type Handler struct {
	cfg       Config
	mux       *http.ServeMux
	readyTerm atomic.Uint64 // the term whose barrier this leader passed
	cursors   cursors       // the brokers' feed cursors reported here
}

// New builds the handler; zero Config fields take the defaults above.
func New(cfg Config) *Handler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ProposeTimeout <= 0 {
		cfg.ProposeTimeout = DefaultProposeTimeout
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.ChangesLimit <= 0 {
		cfg.ChangesLimit = DefaultChangesLimit
	}
	if cfg.Liveness <= 0 {
		cfg.Liveness = meta.DefaultLivenessTimeout
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.routes()
	return h
}

// ServeHTTP serves one request; unknown paths are 404 {code, message}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) routes() {
	h.catalogRoutes()
	m := h.mux
	m.HandleFunc("GET /v1/snapshot", h.snapshot)
	m.HandleFunc("GET /v1/changes", h.changes)
	m.HandleFunc("GET /v1/brokers", h.listBrokers)
	m.HandleFunc("POST /v1/brokers", h.write(h.register))
	m.HandleFunc("POST /v1/brokers/{id}/heartbeat", h.write(h.heartbeat))
	m.HandleFunc("POST /v1/reports", h.write(h.report))
	h.memberRoutes()
	h.keyRoutes()
	m.HandleFunc("GET /v1/fleet/features", h.features)
	m.HandleFunc("POST /v1/fleet/features/{name}/finalize", h.write(h.finalize))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no such control-plane path "+r.URL.Path)
	})
}

// apiError is the JSON error body, the broker admin API's {code, message};
// Detail carries a typed refusal's fields (a *meta.FinalizeError's lacking
// brokers, a *meta.GoneError's epoch).
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Leader  string `json:"leader,omitempty"`
	Detail  any    `json:"detail,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Code: code, Message: msg})
}

// unavailable answers 503 with Retry-After: 1 (no leader, or a forwarded
// request that reached a non-leader).
func unavailable(w http.ResponseWriter, leader, msg string) {
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: msg, Leader: leader})
}

// codeOf gives the error body's code for a status (the admin API's words).
func codeOf(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "malformed"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusGone:
		return "gone"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	return "internal"
}

// fail answers a refusal or a Raft error: meta's typed refusals with their
// status (meta.StatusOf), NotLeader and leadership loss as 503 Retry-After.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, raft.ErrRaftShutdown) {
		unavailable(w, "", "NotLeader: "+err.Error())
		return
	}
	status := meta.StatusOf(err)
	if status == http.StatusInternalServerError {
		h.cfg.Logger.Error("control-plane request failed", "err", err)
	}
	body := apiError{Code: codeOf(status), Message: err.Error()}
	var ref *meta.Refusal
	var fe *meta.FinalizeError
	var ge *meta.GoneError
	switch {
	case errors.As(err, &ref):
		body.Code = ref.Code
	case errors.As(err, &fe):
		body.Detail = map[string]any{"feature": fe.Feature, "unknown": fe.Unknown, "lacking": fe.Lacking,
			"missing_prerequisites": fe.MissingPrerequisites, "level_needed": fe.LevelNeeded,
			"low_member": fe.LowMember, "low_level": fe.LowLevel}
	case errors.As(err, &ge):
		body.Detail = map[string]any{"after": ge.After, "through": ge.Through, "ahead": ge.Ahead, "epoch": ge.Epoch}
	}
	writeJSON(w, status, body)
}

// decode reads a body of at most 1 MiB that is one JSON object into v;
// unknown fields are ignored (additive REST). Errors are 400 malformed.
func decode(r *http.Request, v any) error {
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("request body: %v", err)
	}
	if len(data) > maxBody {
		return badRequest("request body larger than 1 MiB")
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return badRequest("request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return badRequest("request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("request body: data after the JSON object")
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return &meta.Refusal{Status: http.StatusBadRequest, Code: "malformed", Message: fmt.Sprintf(format, args...)}
}

// authorized checks the admin token of a write; on failure it answers 401.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.AuthOff {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || h.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(h.cfg.Token)) != 1 {
		writeError(w, http.StatusUnauthorized, "unauthorized", "auth required: the admin token (Authorization: Bearer)")
		return false
	}
	return true
}

// write wraps a write handler: the admin token, then the leader (forwarded
// once from a follower, 503 Retry-After with no leader).
func (h *Handler) write(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(w, r) {
			return
		}
		if h.cfg.Node.Raft.State() == raft.Leader {
			next(w, r)
			return
		}
		h.forward(w, r)
	}
}

// leaderOnly is write's leader half for linearizable reads: a follower
// forwards the read once; the leader verifies it still leads after its term's
// barrier.
func (h *Handler) leaderOnly(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.cfg.Node.Raft.State() != raft.Leader {
			h.forward(w, r)
			return
		}
		if err := h.verify(); err != nil {
			h.fail(w, err)
			return
		}
		next(w, r)
	}
}

// verify makes a read linearizable: once per term the leader applies a
// barrier (every entry of earlier terms is applied), then VerifyLeader
// confirms with a quorum that it still leads.
func (h *Handler) verify() error {
	r := h.cfg.Node.Raft
	term := r.CurrentTerm()
	if h.readyTerm.Load() != term {
		if err := r.Barrier(h.cfg.ProposeTimeout).Error(); err != nil {
			return err
		}
		h.readyTerm.Store(term)
	}
	return r.VerifyLeader().Error()
}

// forward sends r to the leader once and copies its answer back; a request
// already forwarded, no leader, or a leader whose URL is unknown is 503.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request) {
	addr, id := h.cfg.Node.Raft.LeaderWithID()
	if addr == "" {
		unavailable(w, "", "NotLeader: no leader elected")
		return
	}
	if r.Header.Get(ForwardedHeader) != "" {
		unavailable(w, string(id), "NotLeader: a forwarded request reached a member that does not lead")
		return
	}
	base := ""
	if h.cfg.MemberURL != nil {
		base = h.cfg.MemberURL(id)
	}
	if base == "" {
		unavailable(w, string(id), fmt.Sprintf("NotLeader: member %s leads; its REST address is not known here", id))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		h.fail(w, badRequest("request body: %v", err))
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, strings.TrimRight(base, "/")+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		h.fail(w, err)
		return
	}
	req.Header = r.Header.Clone()
	req.Header.Set(ForwardedHeader, "1")
	resp, err := h.cfg.Client.Do(req)
	if err != nil {
		unavailable(w, string(id), "NotLeader: forwarding to the leader failed: "+err.Error())
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// propose applies cmd through Raft and answers the refusal or Raft error;
// ok is false when it answered.
func (h *Handler) propose(w http.ResponseWriter, cmd meta.Command) (meta.Result, bool) {
	res, err := h.cfg.Node.Propose(cmd, h.cfg.ProposeTimeout)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		h.fail(w, err)
		return res, false
	}
	return res, true
}

func (h *Handler) nowMs() int64 { return h.cfg.Now().UnixMilli() }

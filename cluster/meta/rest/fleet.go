package rest

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"felix/cluster/meta"
)

// SnapshotBody is GET /v1/snapshot: the member's catalog, placement, brokers
// and enabled features at Seq (the Raft index of the last applied entry; ask
// the feed after it) and the feed Epoch. Served from the member's own state:
// it may lag the leader but never goes backwards on one member.
type SnapshotBody struct {
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

func (h *Handler) snapshot(w http.ResponseWriter, r *http.Request) {
	// The feed's epoch comes with a page; an empty page after the state's
	// index costs nothing and names it.
	st := h.cfg.Node.FSM.State()
	var epoch uint64
	if p, err := h.cfg.Node.FSM.Changes(st.Index(), 1); err == nil {
		epoch = p.Epoch
	}
	writeJSON(w, http.StatusOK, SnapshotBody{Seq: st.Index(), Epoch: epoch, Tenants: nonNil(st.Tenants()),
		Namespaces: nonNil(st.Namespaces()), Streams: nonNil(st.Streams()), Caches: nonNil(st.Caches()),
		Tombstones: nonNil(st.Tombstones()), Assignments: nonNil(st.Assignments()), Brokers: nonNil(st.Brokers()),
		Features: nonNil(st.Enabled())})
}

// changes serves GET /v1/changes?after=SEQ&wait=DURATION&limit=N: a
// meta.Page of the rows after SEQ (at most limit, ChangesLimit at most).
// With no rows yet it waits up to wait (a Go duration, at most MaxWait) for
// one, checking the member's applied index every 20 ms; 410 Gone (detail the
// *meta.GoneError with the epoch) when SEQ is older than what is kept or ahead
// of the state; 400 for a bad parameter.
func (h *Handler) changes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := strconv.ParseUint(q.Get("after"), 10, 64)
	if q.Get("after") == "" {
		after, err = 0, nil
	}
	if err != nil {
		h.fail(w, badRequest("after: %v", err))
		return
	}
	limit := h.cfg.ChangesLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			h.fail(w, badRequest("limit %q: a positive integer", s))
			return
		}
		limit = min(n, limit)
	}
	var wait time.Duration
	if s := q.Get("wait"); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
			h.fail(w, badRequest("wait %q: a duration such as 30s", s))
			return
		}
	}
	page, err := h.waitChanges(r.Context(), after, limit, min(wait, h.cfg.MaxWait))
	if err != nil {
		h.fail(w, err)
		return
	}
	if page.Changes == nil {
		page.Changes = []meta.Change{}
	}
	writeJSON(w, http.StatusOK, page)
}

// waitChanges reads the feed, waiting up to wait for a row (bounded poll of
// the applied index; the FSM has no apply notification).
func (h *Handler) waitChanges(ctx context.Context, after uint64, limit int, wait time.Duration) (meta.Page, error) {
	fsm := h.cfg.Node.FSM
	page, err := fsm.Changes(after, limit)
	if err != nil || len(page.Changes) > 0 || wait <= 0 {
		return page, err
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	seen := fsm.State().Index()
	for {
		select {
		case <-ctx.Done():
			return page, nil
		case <-timer.C:
			return fsm.Changes(after, limit)
		case <-tick.C:
			if idx := fsm.State().Index(); idx != seen {
				seen = idx
				if page, err = fsm.Changes(after, limit); err != nil || len(page.Changes) > 0 {
					return page, err
				}
			}
		}
	}
}

// BrokerView is one row of GET /v1/brokers: the registered broker, its state
// at the member's clock (live, draining or down; meta.BrokerState) and the
// enabled features it does not report (Missing).
type BrokerView struct {
	meta.Broker
	State   string   `json:"state"`
	Missing []string `json:"missing"`
	// FeedCursor is the broker's feed cursor as last reported to the member
	// that answers (nil when none was: an older broker, or a member that
	// took none of its requests since it started).
	*FeedCursorSeen
}

// listBrokers serves GET /v1/brokers. A follower that knows the leader's URL
// forwards it (the leader takes the heartbeats, so it holds the feed
// cursors), else answers from its own view.
func (h *Handler) listBrokers(w http.ResponseWriter, r *http.Request) {
	if h.forwardRead(w, r) {
		return
	}
	st := h.cfg.Node.FSM.State()
	now := h.nowMs()
	out := []BrokerView{}
	for _, b := range st.Brokers() {
		v := BrokerView{Broker: b, State: meta.BrokerState(b, now, h.cfg.Liveness), Missing: []string{}}
		if c, ok := h.cursors.get(b.NodeID); ok {
			v.FeedCursorSeen = &c
		}
		for _, f := range st.Enabled() {
			if !slices.Contains(b.Features, f.Name) {
				v.Missing = append(v.Missing, f.Name)
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// register serves POST /v1/brokers: a meta.RegisterBroker body (at_ms is the
// member's clock); 200 with the meta.Broker, 409 *meta.RegistrationError
// naming the missing features. A successful registration then runs one step
// of the new-cluster rule (raftnode.Node.AutoFinalize; the command retries it
// on a timer).
func (h *Handler) register(w http.ResponseWriter, r *http.Request) {
	var body registrationBody
	if err := decode(r, &body); err != nil {
		h.fail(w, err)
		return
	}
	c := body.RegisterBroker
	c.AtMs = h.nowMs()
	res, ok := h.propose(w, &c)
	if !ok {
		return
	}
	h.cursors.note(c.NodeID, body.FeedCursor, c.AtMs)
	if _, err := h.cfg.Node.AutoFinalize(h.nowMs(), h.cfg.ProposeTimeout); err != nil {
		h.cfg.Logger.Info("new-cluster finalize after a registration did not complete", "err", err)
	}
	writeJSON(w, http.StatusOK, res.Value)
}

// heartbeat serves POST /v1/brokers/{id}/heartbeat: {draining, generations,
// feed_cursor}
// (node_id from the path; a body node_id must agree); 204, 404 unregistered.
// With Config.HeartbeatEntryEvery a steady heartbeat is not a Raft entry
// (liveness.go); every accepted one reaches Config.OnHeartbeat.
func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	var body heartbeatBody
	if err := decode(r, &body); err != nil {
		h.fail(w, err)
		return
	}
	c := body.Heartbeat
	if !h.samePath(w, "node_id", c.NodeID, r.PathValue("id")) {
		return
	}
	c.NodeID, c.AtMs = r.PathValue("id"), h.nowMs()
	if h.heartbeatSeen(w, &c) {
		h.cursors.note(c.NodeID, body.FeedCursor, c.AtMs)
		return
	}
	if _, ok := h.propose(w, &c); ok {
		h.cursors.note(c.NodeID, body.FeedCursor, c.AtMs)
		h.arrived(&c)
		w.WriteHeader(http.StatusNoContent)
	}
}

// report serves POST /v1/reports: a meta.ReplicaReport body; 204, 404
// unknown shard or leader, 409 a stale generation.
func (h *Handler) report(w http.ResponseWriter, r *http.Request) {
	var c meta.ReplicaReport
	if err := decode(r, &c); err != nil {
		h.fail(w, err)
		return
	}
	c.AtMs = h.nowMs()
	if _, ok := h.propose(w, &c); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// FeatureView is one row of GET /v1/fleet/features (spec/config.md §7: the
// fleet-feature state, supported by whom, enabled), in meta.FeatureOrder:
// the feature's metadata level and prerequisites, the registered brokers that
// report it (SupportedBy) and the live or draining ones that do not (Lacking;
// what the dry run refuses on).
type FeatureView struct {
	Name           string     `json:"name"`
	Enabled        bool       `json:"enabled"`
	FinalizedIndex uint64     `json:"finalized_index,omitempty"`
	Auto           bool       `json:"auto,omitempty"`
	Level          meta.Level `json:"level"`
	Prerequisites  []string   `json:"prerequisites"`
	SupportedBy    []string   `json:"supported_by"`
	Lacking        []string   `json:"lacking"`
}

func (h *Handler) features(w http.ResponseWriter, r *http.Request) {
	st := h.cfg.Node.FSM.State()
	now := h.nowMs()
	enabled := map[string]meta.FeatureState{}
	for _, f := range st.Enabled() {
		enabled[f.Name] = f
	}
	out := []FeatureView{}
	for _, name := range meta.FeatureOrder {
		e, on := enabled[name]
		v := FeatureView{Name: name, Enabled: on, FinalizedIndex: e.FinalizedIndex, Auto: e.Auto,
			Level: meta.FeatureLevel(name), Prerequisites: nonNil(meta.Prerequisites(name)),
			SupportedBy: []string{}, Lacking: nonNil(meta.LackingBrokers(st, name, now, h.cfg.Liveness))}
		for _, b := range st.Brokers() {
			if slices.Contains(b.Features, name) {
				v.SupportedBy = append(v.SupportedBy, b.NodeID)
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// FinalizeBody answers POST /v1/fleet/features/{name}/finalize: the feature,
// whether this was the dry run, and (not a dry run) the meta.FeatureState.
type FinalizeBody struct {
	Feature string             `json:"feature"`
	DryRun  bool               `json:"dry_run"`
	State   *meta.FeatureState `json:"state,omitempty"`
}

// finalize serves POST /v1/fleet/features/{name}/finalize[?dry_run=1]: the
// dry run is meta.CheckFinalize on the leader's state (seed, "Runbook:
// rolling out a fleet feature"); otherwise a finalize_feature. 200
// FinalizeBody; 404 unknown feature; 409 *meta.FinalizeError (detail: the
// lacking brokers, missing prerequisites, a member below the level) or a
// *meta.LevelError.
func (h *Handler) finalize(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	dry := r.URL.Query().Get("dry_run")
	if dry == "1" || dry == "true" {
		if err := meta.CheckFinalize(h.cfg.Node.FSM.State(), name, h.nowMs(), h.cfg.Liveness); err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, FinalizeBody{Feature: name, DryRun: true})
		return
	}
	res, ok := h.propose(w, &meta.FinalizeFeature{Feature: name, AtMs: h.nowMs()})
	if !ok {
		return
	}
	body := FinalizeBody{Feature: name}
	if fs, ok := res.Value.(meta.FeatureState); ok {
		body.State = &fs
	}
	writeJSON(w, http.StatusOK, body)
}

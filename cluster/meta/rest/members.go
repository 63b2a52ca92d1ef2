package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/raftnode"
)

// IdentityBody is GET /v1/identity: who this member is (docs/controlplane.md,
// "Raft"): its node id, the storage identity of its data dir, its Raft server
// id (NODE_ID/STORAGE_ID), the metadata level its build reports, its Raft
// address, and whether its data dir held Raft state (a log or snapshot), which
// a member about to bootstrap a group with FELIX_CONTROLPLANE_PEERS reads,
// and the fingerprint of its tenant-key secret.
type IdentityBody struct {
	NodeID    string     `json:"node_id"`
	StorageID string     `json:"storage_id"`
	ServerID  string     `json:"server_id"`
	Level     meta.Level `json:"level"`
	RaftAddr  string     `json:"raft_addr"`
	HasState  bool       `json:"has_state"`
	// KeyFingerprint is TenantKeys.Fingerprint ("" without tenant keys).
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
}

// IdentityHandler serves GET /v1/identity from id (cmd/felix-controlplane
// serves it before its Raft starts, while it learns its peers' identities).
func IdentityHandler(id func() IdentityBody) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, id()) }
}

// MemberView is one row of GET /v1/members: a voter's Raft server id, its
// node id and storage id, address, whether it leads, the metadata level it
// reported under this server id (0: none yet), and whether the leader holds
// it below the group's floor (felix_meta_raft_member_below_floor).
type MemberView struct {
	ID        string     `json:"id"`
	NodeID    string     `json:"node_id"`
	StorageID string     `json:"storage_id"`
	Address   string     `json:"address"`
	Leader    bool       `json:"leader"`
	Level     meta.Level `json:"level"`
	Held      bool       `json:"held"`
	// AnsweredAs is the server id that answers at Address instead of ID (a
	// member that lost its disk, under its new storage identity); "" when
	// none (the leader's view).
	AnsweredAs string `json:"answered_as,omitempty"`
}

// MembersBody is GET /v1/members: the leader's id, the group's floor, the
// member that answered (ServedBy: the leader when one is known and
// reachable; held states are only the leader's), and the voters.
type MembersBody struct {
	Leader   string       `json:"leader"`
	Floor    meta.Level   `json:"floor"`
	ServedBy string       `json:"served_by"`
	Members  []MemberView `json:"members"`
}

// AddMemberBody is POST /v1/members: the new member's server id (or its node
// id alone: the storage id is then the one the member answers), its Raft
// address (default: the one it answers), and the REST URL the leader asks its
// identity and level at (default: the member URL known for its node id).
type AddMemberBody struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	URL     string `json:"url"`
}

// LevelBody is POST /v1/members/levels: a member reporting the metadata level
// of its build under its server id.
type LevelBody struct {
	MemberID string     `json:"member_id"`
	Level    meta.Level `json:"level"`
}

// LeaderBody is POST /v1/members/leader: the member to hand leadership to
// (its server id, or a node id naming one member); the answer names it.
type LeaderBody struct {
	ID string `json:"id"`
}

func (h *Handler) memberRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/identity", IdentityHandler(h.identity))
	m.HandleFunc("GET /v1/members", h.members)
	m.HandleFunc("POST /v1/members", h.write(h.addMember))
	m.HandleFunc("POST /v1/members/levels", h.write(h.reportLevel))
	m.HandleFunc("POST /v1/members/leader", h.write(h.transferLeader))
	m.HandleFunc("DELETE /v1/members/{id...}", h.write(h.removeMember))
}

// identity is this member's IdentityBody.
func (h *Handler) identity() IdentityBody {
	n := h.cfg.Node
	node, storage := raftnode.SplitServerID(n.ID)
	cfg := n.Raft.GetConfiguration().Configuration()
	id := IdentityBody{NodeID: node, StorageID: storage, ServerID: string(n.ID), Level: n.Level(),
		RaftAddr: string(n.Hold.LocalAddr()), HasState: n.Raft.LastIndex() > 0 || len(cfg.Servers) > 0}
	if h.cfg.Keys != nil {
		id.KeyFingerprint = h.cfg.Keys.Fingerprint()
	}
	return id
}

// members serves GET /v1/members; a follower that knows the leader's URL
// forwards (the held states are the leader's), else answers from its own
// view.
func (h *Handler) members(w http.ResponseWriter, r *http.Request) {
	if h.forwardRead(w, r) {
		return
	}
	rf := h.cfg.Node.Raft
	f := rf.GetConfiguration()
	if err := f.Error(); err != nil {
		h.fail(w, err)
		return
	}
	st := h.cfg.Node.FSM.State()
	levels := map[string]meta.Level{}
	for _, m := range st.Members() {
		levels[m.ID] = m.Level
	}
	_, leader := rf.LeaderWithID()
	held, answered := h.cfg.Node.Hold.BelowFloor(), h.cfg.Node.Hold.AnsweredAs()
	body := MembersBody{Leader: string(leader), Floor: st.Floor(), ServedBy: string(h.cfg.Node.ID), Members: []MemberView{}}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		node, storage := raftnode.SplitServerID(s.ID)
		body.Members = append(body.Members, MemberView{ID: string(s.ID), NodeID: node, StorageID: storage,
			Address: string(s.Address), Leader: s.ID == leader, Level: levels[string(s.ID)], Held: held[s.ID],
			AnsweredAs: string(answered[s.ID])})
	}
	writeJSON(w, http.StatusOK, body)
}

// forwardRead forwards a read that the leader answers best (members and
// their held states, brokers and their feed cursors) when this member is a
// follower that knows the leader's URL and the request was not forwarded
// already; false: answer it here.
func (h *Handler) forwardRead(w http.ResponseWriter, r *http.Request) bool {
	rf := h.cfg.Node.Raft
	if _, id := rf.LeaderWithID(); rf.State() != raft.Leader && id != "" && r.Header.Get(ForwardedHeader) == "" &&
		h.cfg.MemberURL != nil && h.cfg.MemberURL(id) != "" {
		h.forward(w, r)
		return true
	}
	return false
}

// resolve gives the configuration's server id for id: itself, or the one
// server whose node id it is. Errors: 404 none, 409 several.
func (h *Handler) resolve(id string) (raft.ServerID, error) {
	f := h.cfg.Node.Raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return "", err
	}
	var found []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if node, _ := raftnode.SplitServerID(s.ID); string(s.ID) == id {
			return s.ID, nil
		} else if !strings.Contains(id, "/") && node == id {
			found = append(found, s.ID)
		}
	}
	switch len(found) {
	case 0:
		return "", &meta.Refusal{Status: http.StatusNotFound, Code: "not_found", Message: "no member " + id}
	case 1:
		return found[0], nil
	}
	return "", &meta.Refusal{Status: http.StatusConflict, Code: "ambiguous", Message: fmt.Sprintf(
		"node id %s names several members %v: give the server id (NODE_ID/STORAGE_ID)", id, found)}
}

// addMember serves POST /v1/members: the leader asks the candidate's
// identity and level at its URL, then raftnode.Node.AddMember (409 below the
// floor naming both levels, or when its address is held by another server id).
func (h *Handler) addMember(w http.ResponseWriter, r *http.Request) {
	var b AddMemberBody
	if err := decode(r, &b); err != nil {
		h.fail(w, err)
		return
	}
	node, _ := raftnode.SplitServerID(raft.ServerID(b.ID))
	if node == "" {
		h.fail(w, badRequest("id is empty"))
		return
	}
	url := b.URL
	if url == "" && h.cfg.MemberURL != nil {
		url = h.cfg.MemberURL(raft.ServerID(node))
	}
	id, addr, level, reported := raft.ServerID(b.ID), raft.ServerAddress(b.Address), meta.Level(0), false
	if url != "" {
		ident, err := h.askIdentity(r.Context(), url)
		if err != nil {
			h.cfg.Logger.Warn("the candidate member did not answer with its identity", "url", url, "err", err)
		} else {
			if (strings.Contains(b.ID, "/") && ident.ServerID != b.ID) || ident.NodeID != node {
				h.fail(w, &meta.Refusal{Status: http.StatusConflict, Code: "identity", Message: fmt.Sprintf(
					"the member at %s is %s, not %s (its storage identity changed: add it under its new id)", url, ident.ServerID, b.ID)})
				return
			}
			id, level, reported = raft.ServerID(ident.ServerID), ident.Level, true
			if addr == "" {
				addr = raft.ServerAddress(ident.RaftAddr)
			}
		}
	}
	if !strings.Contains(string(id), "/") {
		h.fail(w, badRequest("the member's storage id is not known: give its server id NODE_ID/STORAGE_ID or a url it answers at"))
		return
	}
	if err := h.cfg.Node.AddMember(id, addr, level, reported, h.cfg.ProposeTimeout); err != nil {
		h.fail(w, err)
		return
	}
	node, storage := raftnode.SplitServerID(id)
	writeJSON(w, http.StatusOK, MemberView{ID: string(id), NodeID: node, StorageID: storage, Address: string(addr), Level: level})
}

// askIdentity asks GET url/v1/identity (2 s bound).
func (h *Handler) askIdentity(ctx context.Context, url string) (IdentityBody, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return FetchIdentity(ctx, h.cfg.Client, url)
}

// FetchIdentity asks a member's GET url/v1/identity with client. Errors: no
// url, the request's, a status other than 200, a body that does not decode.
func FetchIdentity(ctx context.Context, client *http.Client, url string) (IdentityBody, error) {
	var ident IdentityBody
	if url == "" {
		return ident, errors.New("rest: no REST URL for the member")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(url, "/")+"/v1/identity", nil)
	if err != nil {
		return ident, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return ident, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ident, fmt.Errorf("GET /v1/identity: %s", resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&ident)
	return ident, err
}

// removeMember serves DELETE /v1/members/{id}: 204; 404 not a member.
func (h *Handler) removeMember(w http.ResponseWriter, r *http.Request) {
	id, err := h.resolve(r.PathValue("id"))
	if err == nil {
		err = h.cfg.Node.RemoveMember(id, h.cfg.ProposeTimeout)
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// transferLeader serves POST /v1/members/leader: 200 {id} once the named
// voter leads (raft LeadershipTransferToServer); 404 not a voter.
func (h *Handler) transferLeader(w http.ResponseWriter, r *http.Request) {
	var b LeaderBody
	if err := decode(r, &b); err != nil {
		h.fail(w, err)
		return
	}
	id, err := h.resolve(b.ID)
	if err == nil {
		err = h.cfg.Node.TransferLeadership(id)
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, LeaderBody{ID: string(id)})
}

// reportLevel serves POST /v1/members/levels: a member_level_report; 200
// with the member row.
func (h *Handler) reportLevel(w http.ResponseWriter, r *http.Request) {
	var b LevelBody
	if err := decode(r, &b); err != nil {
		h.fail(w, err)
		return
	}
	if res, ok := h.propose(w, &meta.MemberLevelReport{MemberID: b.MemberID, Level: b.Level}); ok {
		writeJSON(w, http.StatusOK, res.Value)
	}
}

// ReportOwnLevel reports this member's level (raftnode.Node.Level) under its
// server id through its own handler: applied on the leader, forwarded once
// from a follower. Errors: the answer's status and message (503 when no
// leader is known here: the caller tries another member).
func (h *Handler) ReportOwnLevel(ctx context.Context) error {
	body, _ := json.Marshal(LevelBody{MemberID: string(h.cfg.Node.ID), Level: h.cfg.Node.Level()})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/members/levels", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+h.cfg.Token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("member level report: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/rest"
)

// reportEvery is how long a member waits to report its level again when the
// report did not show in its own state (it may be held: it gets no entries).
const reportEvery = 10 * time.Second

// memberLoop runs every half second until drain: each member reports its own
// metadata level under its server id until its state shows it (reportLevel),
// and the leader runs the new-cluster rule (raftnode.Node.AutoFinalize) until
// it is done or gives up after meta.AutoFinalizeWindow.
func (m *member) memberLoop(h *rest.Handler) {
	defer close(m.loopDone)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	autoOver := false
	var lastReport time.Time
	for {
		select {
		case <-m.done:
			return
		case <-tick.C:
		}
		if !m.reported() && time.Since(lastReport) >= reportEvery {
			if err := m.reportLevel(h); err != nil {
				m.log.Info("metadata level report not taken yet; retrying", "err", err)
			} else {
				lastReport = time.Now()
			}
		}
		if autoOver || m.node.Raft.State() != raft.Leader {
			continue
		}
		step, err := m.node.AutoFinalize(time.Now().UnixMilli(), 5*time.Second)
		switch {
		case err != nil:
			m.log.Info("new-cluster finalize step failed; retrying", "err", err)
		case step.Action == meta.AutoDone:
			autoOver = true
		case step.Action == meta.AutoGiveUp:
			m.log.Warn("new-cluster finalize gave up: members still starting; finalize features with `felix-controlplane admin features finalize`",
				"starting", step.Starting)
			autoOver = true
		}
	}
}

// reported tells whether the member's own state holds its level under its
// server id; a member not (yet) a voter in its own configuration counts as
// reported: the leader records a new member's level when it adds it, and a
// wiped member waiting to be replaced would otherwise write an entry every
// reportEvery.
func (m *member) reported() bool {
	voters, err := m.node.Voters()
	if err != nil || !slices.Contains(voters, string(m.node.ID)) {
		return true
	}
	for _, mb := range m.node.FSM.State().Members() {
		if mb.ID == string(m.node.ID) {
			return mb.Level == m.node.Level()
		}
	}
	return false
}

// reportLevel sends the member's level report (POST /v1/members/levels)
// through its own handler (applied on the leader, forwarded once from a
// follower); when this member knows no leader (it is new, or held and fed
// nothing) it asks each peer's REST URL in turn.
func (m *member) reportLevel(h *rest.Handler) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.ReportOwnLevel(ctx)
	if err == nil {
		return nil
	}
	body, _ := json.Marshal(rest.LevelBody{MemberID: string(m.node.ID), Level: m.node.Level()})
	for _, p := range m.cfg.peerURLs {
		if p.id == m.cfg.nodeID {
			continue
		}
		req, e := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.addr, "/")+"/v1/members/levels",
			strings.NewReader(string(body)))
		if e != nil {
			return errors.Join(err, e)
		}
		req.Header.Set("Authorization", "Bearer "+m.token)
		resp, e := identityClient.Do(req)
		if e != nil {
			err = errors.Join(err, e)
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		err = errors.Join(err, fmt.Errorf("%s: %s", p.id, resp.Status))
	}
	return err
}

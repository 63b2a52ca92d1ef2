package rest

import (
	"net/http"
	"time"

	"felix/cluster/meta"
)

// DefaultHeartbeatEntryEvery is how often cmd/felix-controlplane lets a steady heartbeat
// become a Raft entry (Config.HeartbeatEntryEvery): the state's LastSeenMs only serves the
// coarse 10 s liveness of initial placement and GET /v1/brokers, so one entry a second per
// broker is plenty; failover's liveness comes from arrival times on the leader
// (Config.OnHeartbeat; docs/failover.md, "Wiring").
const DefaultHeartbeatEntryEvery = time.Second

// heartbeatSeen answers a heartbeat that needs no Raft entry (heartbeatNeedsEntry false):
// 204 after OnHeartbeat, or 404 for a broker the state does not know. ok=false: it needs
// an entry, nothing was answered.
func (h *Handler) heartbeatSeen(w http.ResponseWriter, c *meta.Heartbeat) bool {
	st := h.cfg.Node.FSM.State()
	if heartbeatNeedsEntry(st, c, h.cfg.HeartbeatEntryEvery) {
		return false
	}
	h.arrived(c)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// heartbeatNeedsEntry tells whether heartbeat c changes the state enough to be a Raft
// entry: always with every = 0 (each heartbeat is an entry); else when the broker is not
// registered (the entry's 404), its draining flag changes, it reports a generation above
// the shard's highest, or its LastSeenMs is at least every older than c.AtMs.
func heartbeatNeedsEntry(st *meta.State, c *meta.Heartbeat, every time.Duration) bool {
	if every <= 0 {
		return true
	}
	b, ok := st.Broker(c.NodeID)
	if !ok || b.Draining != c.Draining || c.AtMs-b.LastSeenMs >= every.Milliseconds() {
		return true
	}
	for _, a := range st.Assignments() {
		if g, reported := c.Generations[a.Key()]; reported {
			if hi, _ := st.HighestGeneration(a.ShardRef); g > hi {
				return true
			}
		}
	}
	return false
}

// arrived hands a registered broker's heartbeat to Config.OnHeartbeat (the placement
// loop's detector), on the leader that served it.
func (h *Handler) arrived(c *meta.Heartbeat) {
	if h.cfg.OnHeartbeat != nil {
		h.cfg.OnHeartbeat(c.NodeID, c.Draining)
	}
}

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
// registered (the entry's 404), its draining flag changes, it reports for any shard a
// generation above the highest the state knows (or one it knows none for), or its
// LastSeenMs is at least every older than c.AtMs.
func heartbeatNeedsEntry(st *meta.State, c *meta.Heartbeat, every time.Duration) bool {
	if every <= 0 {
		return true
	}
	b, ok := st.Broker(c.NodeID)
	if !ok || b.Draining != c.Draining || c.AtMs-b.LastSeenMs >= every.Milliseconds() {
		return true
	}
	for key, g := range c.Generations {
		// Every reported shard counts, assigned or not: after a restore from an older
		// snapshot a shard may have no assignment yet while a broker holds a ballot of a
		// later generation, and the next create must place above it (issue 20's gap
		// "Generations never go backwards, even after a control-plane restore").
		if hi, known := st.HighestGenerationKey(key); !known || g > hi {
			return true
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

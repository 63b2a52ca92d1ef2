package transport

// Per-peer metrics of the Pool (github.com/VictoriaMetrics/metrics, like the rest of the repo).

import (
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// peerMetrics are one peer's series, labelled peer="<node id>" (bounded by PoolOptions.MaxPeers).
type peerMetrics struct {
	connections *metrics.Counter   // dials that ended with HelloOk
	reconnects  *metrics.Counter   // dials after the first one of the peer (a lost or refused connection)
	inflight    *metrics.Gauge     // requests between acquire and release
	shed        *metrics.Counter   // requests refused at MaxInflightPerPeer, nothing sent
	timeouts    *metrics.Counter   // requests that ended ErrTimeout
	sent        *metrics.Counter   // frame bytes written, headers included
	received    *metrics.Counter   // frame bytes of answers read, headers included
	latency     *metrics.Histogram // seconds from the write of a request to its answer
}

func newPeerMetrics(set *metrics.Set, nodeID string) *peerMetrics {
	name := func(base string) string { return fmt.Sprintf("felix_internal_peer_%s{peer=%q}", base, nodeID) }
	return &peerMetrics{
		connections: set.GetOrCreateCounter(name("connections_total")),
		reconnects:  set.GetOrCreateCounter(name("reconnects_total")),
		inflight:    set.GetOrCreateGauge(name("inflight"), nil),
		shed:        set.GetOrCreateCounter(name("shed_total")),
		timeouts:    set.GetOrCreateCounter(name("timeouts_total")),
		sent:        set.GetOrCreateCounter(name("sent_bytes_total")),
		received:    set.GetOrCreateCounter(name("received_bytes_total")),
		latency:     set.GetOrCreateHistogram(name("request_duration_seconds")),
	}
}

func (m *peerMetrics) observe(start time.Time) { m.latency.UpdateDuration(start) }

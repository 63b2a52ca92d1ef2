package transport

// Per-peer metrics of the Pool and the Listener's own (github.com/VictoriaMetrics/metrics, like
// the rest of the repo).

import (
	"fmt"
	"sync/atomic"
	"time"

	"felix/proto"

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

// Refusal reasons of felix_internal_listener_connections_refused_total{reason=...}.
const (
	refusedALPN         = "alpn"         // TLS ClientHello without felix-internal/1 (a client at the internal port)
	refusedLimit        = "limit"        // Options.MaxConnections connections already served (CodeOverload)
	refusedHello        = "hello"        // no Hello within HandshakeTimeout, or a first frame that is not Hello (CodeMalformed)
	refusedVersion      = "version"      // Hello in another FLXI version (CodeProtocolVersion)
	refusedUnauthorized = "unauthorized" // claimed node id not a valid DNS name or not the certificate's (CodeUnauthorized)
)

var refusalReasons = []string{refusedALPN, refusedLimit, refusedHello, refusedVersion, refusedUnauthorized}

// listenerMetrics are the listener's series, felix_internal_listener_* (docs/internal-transport.md
// T21). Not labelled by peer: without mTLS a peer's node id is only a claim.
type listenerMetrics struct {
	set         *metrics.Set
	accepted    *metrics.Counter            // connections whose Hello was answered HelloOk
	active      *metrics.Gauge              // connections being served
	refused     map[string]*metrics.Counter // by reason (refusalReasons)
	unsupported *metrics.Counter            // requests answered UnsupportedKind (unknown or unregistered kind)
	malformedC  *metrics.Counter            // fatal headers after Hello: the connection was closed
	malformedS  *metrics.Counter            // bodies that did not decode: answered Malformed, the stream closed
	received    *metrics.Counter            // frame bytes read, headers included (Hello too)
	sent        *metrics.Counter            // frame bytes written, headers included (HelloOk too)
	unknown     *metrics.Counter            // requests of a kind this build does not know
	requests    [256]atomic.Pointer[metrics.Counter]
}

func newListenerMetrics(set *metrics.Set) *listenerMetrics {
	m := &listenerMetrics{
		set:         set,
		accepted:    set.GetOrCreateCounter("felix_internal_listener_connections_accepted_total"),
		active:      set.GetOrCreateGauge("felix_internal_listener_connections_active", nil),
		refused:     map[string]*metrics.Counter{},
		unsupported: set.GetOrCreateCounter("felix_internal_listener_unsupported_kind_total"),
		malformedC:  set.GetOrCreateCounter(`felix_internal_listener_malformed_frames_total{closed="connection"}`),
		malformedS:  set.GetOrCreateCounter(`felix_internal_listener_malformed_frames_total{closed="stream"}`),
		received:    set.GetOrCreateCounter("felix_internal_listener_received_bytes_total"),
		sent:        set.GetOrCreateCounter("felix_internal_listener_sent_bytes_total"),
		unknown:     set.GetOrCreateCounter(`felix_internal_listener_requests_total{kind="unknown"}`),
	}
	for _, r := range refusalReasons {
		m.refused[r] = set.GetOrCreateCounter(fmt.Sprintf("felix_internal_listener_connections_refused_total{reason=%q}", r))
	}
	return m
}

// request counts one request of kind; a kind this build does not know is counted as
// kind="unknown" so a peer cannot grow the label set.
func (m *listenerMetrics) request(kind proto.Kind) {
	if !kind.Known() || int(kind) >= len(m.requests) {
		m.unknown.Inc()
		return
	}
	p := &m.requests[kind]
	c := p.Load()
	if c == nil {
		c = m.set.GetOrCreateCounter(fmt.Sprintf("felix_internal_listener_requests_total{kind=%q}", kind.String()))
		p.Store(c)
	}
	c.Inc()
}

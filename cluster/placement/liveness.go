package placement

import (
	"fmt"
	"time"
)

// Liveness is a broker's state as failure detection sees it (docs/failover.md,
// "Failure detection").
type Liveness uint8

// Liveness states; the zero value is invalid.
const (
	// Live: a heartbeat arrived within SuspectAfter and the broker is not draining.
	Live Liveness = iota + 1
	// Suspect: no heartbeat for SuspectAfter, but not yet for DownAfter. Placement does
	// not promote away from a suspect leader, nor promote a suspect follower.
	Suspect
	// Down: no heartbeat for DownAfter, or never heard from. A down leader's shards fail
	// over.
	Down
	// Draining: heartbeating (within DownAfter) and draining: leadership moves away from it
	// to a caught-up follower and is never placed on it until it is undrained.
	Draining
)

var livenessNames = [...]string{"", "live", "suspect", "down", "draining"}

// String returns "live", "suspect", "down" or "draining".
func (l Liveness) String() string {
	if l >= Live && l <= Draining {
		return livenessNames[l]
	}
	return fmt.Sprintf("Liveness(%d)", uint8(l))
}

// Default failure-detection timings (docs/failover.md, "Failure detection", says how they
// were chosen and how to measure them again): a broker heartbeats every
// DefaultHeartbeatInterval, is suspect after three missed heartbeats and down after six.
// With a 3 s p99 failover goal, detection takes at most half of it.
const (
	DefaultHeartbeatInterval = 250 * time.Millisecond
	DefaultSuspectAfter      = 750 * time.Millisecond
	DefaultDownAfter         = 1500 * time.Millisecond
)

// DetectorConfig are the failure detector's timeouts; a zero field takes its default.
// SuspectAfter must not exceed DownAfter (a larger one is cut to DownAfter).
type DetectorConfig struct {
	SuspectAfter time.Duration
	DownAfter    time.Duration
}

func (c DetectorConfig) withDefaults() DetectorConfig {
	if c.DownAfter <= 0 {
		c.DownAfter = DefaultDownAfter
	}
	if c.SuspectAfter <= 0 {
		c.SuspectAfter = min(DefaultSuspectAfter, c.DownAfter)
	}
	c.SuspectAfter = min(c.SuspectAfter, c.DownAfter)
	return c
}

// StateAt is a broker's liveness at now, given the arrival time of its newest heartbeat
// (last; both on the control plane's monotonic clock, nanoseconds, never the broker's
// clock, so skew between them does not matter) and whether that heartbeat said draining.
// Down wins over draining; draining over suspect.
func StateAt(last, now int64, draining bool, cfg DetectorConfig) Liveness {
	cfg = cfg.withDefaults()
	age := time.Duration(now - last)
	switch {
	case age > cfg.DownAfter:
		return Down
	case draining:
		return Draining
	case age > cfg.SuspectAfter:
		return Suspect
	}
	return Live
}

// Detector keeps the newest heartbeat arrival of every broker. Not safe for concurrent
// use.
type Detector struct {
	cfg     DetectorConfig
	brokers map[string]heard
}

type heard struct {
	at       int64
	draining bool
}

// NewDetector returns a detector with cfg (zero fields take the defaults).
func NewDetector(cfg DetectorConfig) *Detector {
	return &Detector{cfg: cfg.withDefaults(), brokers: map[string]heard{}}
}

// Config returns the detector's timeouts, defaults filled in.
func (d *Detector) Config() DetectorConfig { return d.cfg }

// Heartbeat records a heartbeat from node that arrived at at (the control plane's
// monotonic clock, nanoseconds) saying whether it is draining. A heartbeat older than the
// newest one recorded (reordered or duplicated) changes nothing. Errors: *InputError for
// an empty node id.
func (d *Detector) Heartbeat(node string, at int64, draining bool) error {
	if node == "" {
		return badInput("heartbeat with an empty node id")
	}
	if h, ok := d.brokers[node]; ok && at < h.at {
		return nil
	}
	d.brokers[node] = heard{at: at, draining: draining}
	return nil
}

// State returns node's liveness at now; a broker never heard from is Down.
func (d *Detector) State(node string, now int64) Liveness {
	h, ok := d.brokers[node]
	if !ok {
		return Down
	}
	return StateAt(h.at, now, h.draining, d.cfg)
}

// Forget drops node (removed from the cluster); it reads Down from then on.
func (d *Detector) Forget(node string) { delete(d.brokers, node) }

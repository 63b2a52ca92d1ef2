// Package controller is the control plane's placement loop (docs/failover.md, "Wiring";
// issue 20 item 1): on the Raft leader only, heartbeat arrivals feed a placement.Detector
// on the leader's monotonic clock, and every tick each replicated shard whose leader is
// not live goes through placement.Decide; a promotion is proposed as set_assignment at
// the decided generation (above every generation known for the shard). It is thin around
// the pure decisions of cluster/placement: the clock, the state, the leadership check and
// the proposer are injected, so tests drive it with clock/clocktest and an in-memory
// Raft group.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"felix/clock"
	"felix/cluster/meta"
	"felix/cluster/placement"
)

// DefaultTick is how often the loop decides (Config.Tick).
const DefaultTick = 100 * time.Millisecond

// Config are the controller's inputs; State, Leading and Propose are required.
type Config struct {
	// Clock gives the monotonic time heartbeats arrive at and decisions are taken at
	// (clock.Real when nil).
	Clock clock.Clock
	// State returns the member's applied metadata state.
	State func() *meta.State
	// Leading reports whether this member is the Raft leader now, and its term: a new term
	// (or a regained leadership) starts the detector afresh.
	Leading func() (leader bool, term uint64)
	// Propose applies a command through Raft (raftnode.Node.Propose with a timeout); the
	// refusal of the entry is in Result.Err.
	Propose func(meta.Command) (meta.Result, error)
	// Detector are the failure detector's timeouts (placement's defaults: suspect after
	// 750 ms, down after 1500 ms).
	Detector placement.DetectorConfig
	// Placement are Decide's parameters (the report window, 1 s by default).
	Placement placement.Config
	// Tick is the decision period (DefaultTick).
	Tick time.Duration
	// Logger receives promotions and unplaceable shards (nil = discard).
	Logger hclog.Logger
}

// Promotion is one set_assignment the controller proposed (and Raft applied): the shard,
// the decision (leader, followers, generation, reason) and the monotonic time, ns.
type Promotion struct {
	Shard    meta.ShardRef
	Decision placement.Decision
	AtNanos  int64
}

// Controller runs the placement loop. Heartbeat is safe for concurrent use with Step.
type Controller struct {
	cfg Config

	mu      sync.Mutex
	leading bool
	term    uint64
	since   int64 // when this member became the leader of term, on cfg.Clock
	det     *placement.Detector
	reports map[string]seenReport // shard key → the report's Raft index and when it was first seen
	logged  map[string]string     // shard key → the last wait/unplaceable reason logged
	// first: the term's first pass has not run yet; the reports it finds were applied
	// before this member led, at a time it does not know (they count as old: Step).
	first bool
}

// seenReport is when the controller first saw a report (by its Raft index) applied.
type seenReport struct {
	index uint64
	at    int64
}

// New returns a controller with cfg (zero fields take their defaults). Errors: a missing
// State, Leading or Propose.
func New(cfg Config) (*Controller, error) {
	if cfg.State == nil || cfg.Leading == nil || cfg.Propose == nil {
		return nil, fmt.Errorf("controller: State, Leading and Propose are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Tick <= 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.Placement.ReportWindow <= 0 {
		cfg.Placement.ReportWindow = placement.DefaultReportWindow
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	c := &Controller{cfg: cfg, det: placement.NewDetector(cfg.Detector), reports: map[string]seenReport{},
		logged: map[string]string{}}
	return c, nil
}

// Heartbeat records that node's heartbeat (draining or not) arrived now, on the
// controller's clock. Call it on arrival at the leader (the REST handler's leader half);
// on a member that does not lead it is dropped. Errors: *placement.InputError for an
// empty node id.
func (c *Controller) Heartbeat(node string, draining bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	leader, term := c.cfg.Leading()
	c.catchUp(leader, term)
	if !leader {
		return nil
	}
	return c.det.Heartbeat(node, c.cfg.Clock.MonoNanos(), draining)
}

// Liveness returns node's liveness on the detector now ("unknown" while this member has
// led for less than the down timeout, or does not lead: it has no arrival times yet).
func (c *Controller) Liveness(node string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Clock.MonoNanos()
	if !c.leading || now-c.since < int64(c.det.Config().DownAfter) {
		return "unknown"
	}
	return c.det.State(node, now).String()
}

// catchUp starts a fresh detector when this member became the leader (or a new term
// began): every broker is unknown until it heartbeats, and nothing is promoted for a full
// down timeout (Step). Called with c.mu held.
func (c *Controller) catchUp(leader bool, term uint64) {
	if !leader {
		c.leading = false
		return
	}
	if c.leading && c.term == term {
		return
	}
	c.leading, c.term, c.since, c.first = true, term, c.cfg.Clock.MonoNanos(), true
	c.det = placement.NewDetector(c.cfg.Detector)
	c.reports = map[string]seenReport{}
	c.logged = map[string]string{}
	c.cfg.Logger.Info("placement loop: leading; every broker is unknown until it heartbeats, no promotion for the down timeout",
		"term", term, "down_after", c.det.Config().DownAfter)
}

// Run calls Step every Tick until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	t := c.cfg.Clock.NewTimer(c.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if _, err := c.Step(); err != nil {
			c.cfg.Logger.Warn("placement loop: pass failed", "err", err)
		}
		t.Reset(c.cfg.Tick)
	}
}

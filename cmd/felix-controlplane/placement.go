package main

import (
	"context"

	"github.com/hashicorp/raft"

	"felix/cluster/meta"
	"felix/cluster/meta/controller"
	"felix/cluster/meta/rest"
	"felix/cluster/placement"
)

// placementLoop is the member's placement loop (cluster/meta/controller): it decides only
// while this member is the Raft leader, on heartbeat arrivals the REST handler hands it.
type placementLoop struct {
	c *controller.Controller
	m *member
}

// startPlacement builds the placement loop with the FELIX_CONTROLPLANE_SUSPECT_AFTER_MS,
// _DOWN_AFTER_MS and _PLACEMENT_TICK_MS settings and runs it until the member drains
// (m.done). Errors: controller.New's.
func (m *member) startPlacement() (*placementLoop, error) {
	n := m.node
	c, err := controller.New(controller.Config{
		State: n.FSM.State,
		Leading: func() (bool, uint64) {
			return n.Raft.State() == raft.Leader, n.Raft.CurrentTerm()
		},
		Propose:  func(cmd meta.Command) (meta.Result, error) { return n.Propose(cmd, rest.DefaultProposeTimeout) },
		Detector: placement.DetectorConfig{SuspectAfter: m.cfg.suspectAfter, DownAfter: m.cfg.downAfter},
		Tick:     m.cfg.placementTick,
		Logger:   m.log.Named("placement"),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-m.done
		cancel()
	}()
	go c.Run(ctx)
	return &placementLoop{c: c, m: m}, nil
}

// placementHook starts the placement loop when FELIX_CONTROLPLANE_AUTO_FAILOVER=on and
// returns the rest.Config.OnHeartbeat that feeds it; off (the default), nothing promotes
// and heartbeats feed nothing (nil). On logs a warning: promotion runs without a fence
// round and can lose acknowledged Quorum records (docs/failover.md, "What is unsafe,
// exactly"). Errors: startPlacement's.
func (m *member) placementHook() (func(node string, draining bool), error) {
	if !m.cfg.autoFailover {
		m.log.Info("placement loop off (FELIX_CONTROLPLANE_AUTO_FAILOVER=off): a shard whose leader dies waits for it or for an operator's move")
		return nil, nil
	}
	m.log.Warn("placement loop on (FELIX_CONTROLPLANE_AUTO_FAILOVER=on): promotion has no fence round yet and can lose acknowledged Quorum records; see docs/failover.md")
	ctl, err := m.startPlacement()
	if err != nil {
		return nil, err
	}
	return ctl.heartbeat, nil
}

// heartbeat is rest.Config.OnHeartbeat: the arrival of a registered broker's heartbeat.
func (p *placementLoop) heartbeat(node string, draining bool) {
	if err := p.c.Heartbeat(node, draining); err != nil {
		p.m.log.Warn("placement loop: heartbeat not recorded", "node", node, "err", err)
	}
}

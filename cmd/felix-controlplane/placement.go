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

// heartbeat is rest.Config.OnHeartbeat: the arrival of a registered broker's heartbeat.
func (p *placementLoop) heartbeat(node string, draining bool) {
	if err := p.c.Heartbeat(node, draining); err != nil {
		p.m.log.Warn("placement loop: heartbeat not recorded", "node", node, "err", err)
	}
}

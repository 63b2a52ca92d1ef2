package broker

import (
	"context"
	"errors"
	"fmt"

	"felix/core"
)

// singleNodeID names this node in the ownership table when FELIX_NODE_ID is not set
// (a single node without the internal transport).
const singleNodeID = "local"

// nodeID is this broker's id in the ownership table: FELIX_NODE_ID, else singleNodeID.
func (s *Server) nodeID() string {
	if s.cfg.NodeID != "" {
		return s.cfg.NodeID
	}
	return singleNodeID
}

// openShards builds a single node's seams over s.engine (docs/architecture.md, "Broker
// seams"): the ownership table, filled with SingleNode (this node leads every catalog
// shard at generation 0) before every pass, and the reconciler, woken by the catalog's and
// the table's watchers. The first pass runs here: every catalog stream and cache opens, and
// one that cannot fails the start, as before. The background loop then runs until
// stopShards.
func (s *Server) openShards() error {
	node := s.nodeID()
	s.owners = NewOwnershipTable()
	place := func(v CatalogView) { s.owners.Replace(SingleNode(node, v)) }
	if len(s.cfg.ClusterPeers) > 0 { // static cluster (static_cluster.go, forward.go)
		s.fwd = newForwarding(s)
		place = s.fwd.place
	}
	place = s.replPlace(node, place) // replicate.go: SetPlacement's table instead, when set
	s.reconciler = NewReconciler(ReconcilerConfig{Node: node, Engine: promotingEngine{s.engine, s}, Catalog: s.catalog, Owners: s.owners,
		Place: place, Logger: s.log, Applied: s.repl.changed})
	place(s.catalog)
	if err := s.reconciler.Reconcile(); err != nil {
		return fmt.Errorf("broker: open the catalog's shards: %w", engineInvalid(err))
	}
	stopCat, stopOwners := s.catalog.Watch(s.reconciler.Changed), s.owners.Watch(s.reconciler.Changed)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.reconciler.Run(ctx) }()
	s.stopReconciler = func() { stopCat(); stopOwners(); cancel(); <-done }
	return nil
}

// stopShards ends the reconciler's loop (waiting for a pass in progress) before the engine
// closes; idempotent.
func (s *Server) stopShards() {
	if s.stopReconciler != nil {
		s.stopReconciler()
		s.stopReconciler = nil
	}
}

// engineInvalid maps the engine's refusals of a spec to the catalog's ErrInvalid (HTTP 400).
func engineInvalid(err error) error {
	if errors.Is(err, core.ErrInvalid) || errors.Is(err, core.ErrNoDurableStorage) {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// ApplyCreate opens a catalog stream's shards before the catalog installs it
// (StreamApplier; "catalog changed → reconcile" for a single node): this node leads every
// shard at generation 0 (Reconciler.OpenAhead). A shard that cannot open fails the create
// (ErrInvalid for a spec the engine refuses, else the engine's error) and leaves nothing
// open or registered.
func (s *Server) ApplyCreate(st Stream) error {
	spec := streamSpec(st)
	var undo func() error
	if _, err := s.engine.StreamInfo(spec.Name); errors.Is(err, core.ErrNotFound) {
		undo = func() error { return ignoreNotFound(s.engine.DeleteStream(spec.Name)) }
	}
	return engineInvalid(s.reconciler.OpenAhead(core.ShardSpec{Stream: &spec}, s.aheadAssignment(), s.catalog.Generation()+1, undo))
}

// ApplyDelete removes a catalog stream from the engine, its logs included, before the
// catalog drops it (StreamApplier; Reconciler.RemoveAhead).
func (s *Server) ApplyDelete(st Stream) error {
	spec := streamSpec(st)
	return s.reconciler.RemoveAhead(specRefs(core.ShardSpec{Stream: &spec}), s.catalog.Generation()+1,
		func() error { return ignoreNotFound(s.engine.DeleteStream(spec.Name)) })
}

// ApplyCreateCache opens (after a restart: reopens and replays) a catalog cache's shards
// before the catalog installs it (StreamApplier), as ApplyCreate does for a stream.
func (s *Server) ApplyCreateCache(c Cache) error {
	spec := cacheSpec(c)
	var undo func() error
	if !s.engineHasCache(spec.Name) {
		undo = func() error { return ignoreNotFound(s.engine.DeleteCache(spec.Name)) }
	}
	return engineInvalid(s.reconciler.OpenAhead(core.ShardSpec{Cache: &spec}, s.aheadAssignment(), s.catalog.Generation()+1, undo))
}

// ApplyDeleteCache removes a catalog cache from the engine, its logs included
// (StreamApplier; Reconciler.RemoveAhead).
func (s *Server) ApplyDeleteCache(c Cache) error {
	spec := cacheSpec(c)
	return s.reconciler.RemoveAhead(specRefs(core.ShardSpec{Cache: &spec}), s.catalog.Generation()+1,
		func() error { return ignoreNotFound(s.engine.DeleteCache(spec.Name)) })
}

func (s *Server) engineHasCache(name core.CacheName) bool {
	for _, c := range s.engine.ListCaches() {
		if c.Name == name {
			return true
		}
	}
	return false
}

func ignoreNotFound(err error) error {
	if errors.Is(err, core.ErrNotFound) {
		return nil
	}
	return err
}

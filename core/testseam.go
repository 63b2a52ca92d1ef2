package core

import "errors"

// This file holds core's exported test seams: a manual engine, which runs no
// core goroutines and whose cores the caller steps, so a test decides every
// interleaving. felix/core/coretest wraps them with a fake clock; production
// code never calls them.

// ErrNotManual: Step was called on an engine that NewManualEngine did not make.
var ErrNotManual = errors.New("core: not a manual engine")

// NewManualEngine is a test seam: NewEngine(cfg) without core goroutines.
// Each core is initialised on the calling goroutine; afterwards a core only
// runs when the caller steps it: through Step, or inside the engine's own
// calls that wait for a core (CreateStream, Subscribe, CachePut and the
// other control calls, Close), which step that core until it answers. Use
// one goroutine for the engine and its Step calls. Set cfg.Clock to a fake
// clock (coretest.Clock) to drive timers, TTLs and leases; with
// cfg.DataDir set, the production disk runs, and Step polls its ring
// without blocking.
func NewManualEngine(cfg Config) (*Engine, error) {
	cfg.manual = true
	return NewEngine(cfg)
}

// Step is a test seam: one turn of every core of a manual engine, in core
// order (drain the inbox, apply each message, serve held shards, flush
// staged appends, poll the disk without blocking, run the timers due at
// Config.Clock's time). It reports whether any core did work (drained a
// message, served a held shard or fired a timer); completions reaped from the disk do not
// count, so a test waiting on a disk steps until its own condition holds.
// Errors: ErrNotManual, ErrClosed.
func (e *Engine) Step() (bool, error) {
	if !e.cfg.manual {
		return false, ErrNotManual
	}
	if e.closed.Load() {
		return false, ErrClosed
	}
	worked := false
	for _, c := range e.cores {
		if c.step(false) {
			worked = true
		}
	}
	return worked, nil
}

// Package coretest drives a manual core.Engine deterministically from any
// package's tests: no core goroutines, a fake clock that moves only when the
// test says so, and stepping until the engine is idle. It is built on core's
// two exported test seams, core.NewManualEngine and Engine.Step.
//
//	e := coretest.New(t, core.Config{Cores: 1})
//	_ = e.CachePut(name, shard, key, value, cache.TTLMillis(50), done) // queued (shard: e.RouteCache)
//	e.StepUntilIdle()                                           // applied, answered
//	e.Advance(time.Second)                                      // the TTL sweep runs
package coretest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"felix/clock/clocktest"
	"felix/core"
)

// MaxTurns bounds StepUntilIdle and StepUntil: past it the test fails (an
// engine that never settles is a bug, not a slow test).
const MaxTurns = 10000

// Epoch is the wall time a New engine's Clock starts at.
var Epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is the fake clock.Clock of the module (clock/clocktest.Fake): it moves only
// through Advance.
type Clock = clocktest.Fake

// NewClock returns a Clock whose wall time is start and monotonic reading 0
// (clocktest.NewFake).
func NewClock(start time.Time) *Clock { return clocktest.NewFake(start) }

// Engine is a manual core.Engine on a fake Clock. The embedded engine's
// methods queue work; Step, StepUntilIdle, StepUntil and Advance run it.
// Use it from one goroutine.
type Engine struct {
	*core.Engine
	// Clock is the engine's time (Config.Clock).
	Clock *Clock
	t     testing.TB
}

// New builds a manual engine from cfg (cfg.Clock = NewClock(Epoch) unless
// it is already a *Clock; NoPinning set) and closes it when the test ends.
// It fails t when the engine cannot be built.
func New(t testing.TB, cfg core.Config) *Engine {
	t.Helper()
	ck, ok := cfg.Clock.(*Clock)
	if !ok {
		ck = NewClock(Epoch)
		cfg.Clock = ck
	}
	cfg.NoPinning = true
	e, err := core.NewManualEngine(cfg)
	if err != nil {
		t.Fatalf("coretest: NewManualEngine: %v", err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return &Engine{Engine: e, Clock: ck, t: t}
}

// Step runs n turns of every core and reports whether any turn did work.
func (e *Engine) Step(n int) bool {
	e.t.Helper()
	worked := false
	for range n {
		w, err := e.Engine.Step()
		if err != nil {
			e.t.Fatalf("coretest: Step: %v", err)
		}
		worked = worked || w
	}
	return worked
}

// StepUntilIdle steps until a turn in which no core did work and returns
// the turns taken (the idle one included); it fails the test past MaxTurns.
func (e *Engine) StepUntilIdle() int {
	e.t.Helper()
	for n := 1; n <= MaxTurns; n++ {
		if !e.Step(1) {
			return n
		}
	}
	e.t.Fatalf("coretest: engine still busy after %d turns", MaxTurns)
	return MaxTurns
}

// DiskWait bounds how long StepUntil keeps stepping an engine that does no
// work while cond is false: the time a real disk (cfg.DataDir set) may take
// to complete the writes and fdatasyncs cond waits for, on a loaded machine.
const DiskWait = 20 * time.Second

// StepUntil steps until cond holds (checked before each turn) and returns
// the turns taken. For conditions that depend on disk completions, which
// StepUntilIdle does not wait for: turns in which no core did work (the
// engine waits on the disk) are bounded by DiskWait of wall time, not by a
// count, since a completion arrives when the disk is done, whatever the
// number of turns; turns with work are bounded by MaxTurns (an engine that
// never settles). It fails the test past either bound.
func (e *Engine) StepUntil(cond func() bool) int {
	e.t.Helper()
	deadline := time.Now().Add(DiskWait)
	for n, busy := 0, 0; ; n++ {
		if cond() {
			return n
		}
		if e.Step(1) {
			if busy++; busy > MaxTurns {
				e.t.Fatalf("coretest: condition still false after %d turns with work", MaxTurns)
			}
			continue
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("coretest: condition still false after %v of turns without work (a disk completion that never came?)", DiskWait)
		}
		runtime.Gosched()
	}
}

// Advance moves the Clock forward by d, then steps until idle, so the
// timers due by then (TTL sweeps, leases, retention) run.
func (e *Engine) Advance(d time.Duration) {
	e.t.Helper()
	e.Clock.Advance(d)
	e.StepUntilIdle()
}

// Package sim is a seeded, deterministic simulator for the cluster's pure
// state machines (replication, placement, control plane): N nodes, each a
// Machine[M] the test supplies, generic over the message type M, run on one
// goroutine against a virtual clock, a time-ordered message queue and one
// PCG generator. A run is a function of (Options, the machine code, the
// calls the test makes): print Sim.Describe with every run and failure, and
// the same seed and options replay it event for event.
//
// # Model
//
// Nodes are numbered from 1; External (0) is the outside world (clients).
// A machine handles one message at a time (Machine.Step) and is ticked every
// Options.TickInterval (Machine.Tick); both return the messages to send.
// Time is virtual (Time, nanoseconds since the start) and moves only as the
// simulator processes events: Step (one event), RunFor (a span of virtual
// time), RunTicks (n ticks), Deliver (settle the network with timers
// frozen). Queued copies are ordered by (due time, send order); a tick due
// with a delivery runs after it; nodes tick in id order.
//
// # Fault model
//
// Network, per directed link (LinkFaults, Faults): drop %, duplicate %,
// delay plus uniform jitter, reorder (a % of copies draw a further random
// delay, so they overtake and are overtaken), corrupt % or "the next
// message" (Faults.CorruptNext: the receiver gets the message with one byte
// of its encoding flipped — FlipByte for M = []byte, Config.Corrupt
// otherwise — and its decoder's checksum must reject it), and partitions
// (symmetric between groups, or one-way; Heal). A partition drops copies
// already in flight when they arrive. Links to and from External are
// reliable and only delayed.
//
// Nodes: Crash discards the machine (its volatile state) and cuts each file
// of the node's Disk at its synced length plus none, all, or a random part
// of the unsynced suffix (CutMode; random may tear a record in half).
// Restart builds a new machine from what survived (Factory, Env.Disk). A
// crashed node's incoming copies are dropped. Synced bytes are never lost
// or damaged by a crash; Sim.CorruptFile flips one stored byte on purpose
// (bit rot), which the machine's record checksums must catch.
//
// Every random choice — fates of messages, crash cuts, each node's own
// Env.Rand (forked at build), the test's workload (Sim.Rand) — is drawn
// from the one generator seeded with Options.Seed.
//
// # Purity
//
// This package is pure in the sense of tidy_test.go: no clocks, no I/O, no
// goroutines, no global randomness. Rand is math/rand/v2's PCG-DXSM
// reimplemented (bit-identical, tested) because the tidy rule forbids the
// import. Goroutine-based code uses the Network interface declared here
// and its in-memory implementation in felix/cluster/sim/memnet; seeds for
// tests come from felix/internal/testseed (FELIX_TEST_SEED).
//
// docs/cluster-testing.md, "Simulator", shows how to write a scenario and
// how to replay a failing seed.
package sim

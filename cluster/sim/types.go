package sim

import (
	"strconv"
	"time"
)

// NodeID names one node of a run. Nodes added with Sim.AddNodes are numbered
// 1, 2, 3, … in the order they are added; External (0) is the outside world.
type NodeID uint32

// External is the sender of messages injected from outside the cluster (a
// client) and the address of replies to it. A message to External is not
// delivered to a machine: it is traced and handed to Config.External.
const External NodeID = 0

// String renders the id in decimal ("0" for External), as traces print it.
func (id NodeID) String() string { return strconv.FormatUint(uint64(id), 10) }

// Time is a point on the virtual clock: nanoseconds since the start of the
// run. Nothing in this package reads a real clock; time only moves when the
// simulator processes an event.
type Time int64

// Add returns t moved by d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t - u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// String renders t as a duration since the start ("0s", "1.5ms").
func (t Time) String() string { return time.Duration(t).String() }

// Envelope is one message a machine sends: Msg addressed to To. The sender
// is the machine that returned it; the simulator fills it in.
type Envelope[M any] struct {
	To  NodeID
	Msg M
}

// Machine is one node's pure state machine, the unit the simulator runs. It
// must be deterministic: everything it reads comes in as an argument (now,
// the message, its Env), so a run replays from (seed, options).
//
// Step handles msg, sent by from (External for an injected message), at the
// virtual time now; Tick is called every Options.TickInterval. Both return
// the messages to send, in order. A machine must not keep or modify msg's
// memory after Step returns when M holds slices (the simulator may deliver
// the same value twice, as a duplicate).
type Machine[M any] interface {
	Step(now Time, from NodeID, msg M) []Envelope[M]
	Tick(now Time) []Envelope[M]
}

// Starter is optionally implemented by a machine that has messages to send
// as soon as it exists (a restarted node asking for what it missed). Start
// runs once, right after the Factory built the machine, at the current time.
type Starter[M any] interface {
	Start(now Time) []Envelope[M]
}

// Statuser is optionally implemented by a machine to describe its state in
// one line for Sim.Status and the scripted `status` command. It must be
// deterministic (no map iteration order).
type Statuser interface {
	Status() string
}

// Env is what a machine is built with.
//
// ID is the node's id. Disk is the node's durable storage: it survives
// crashes (minus what was not synced, see Disk) and is the only state a
// restarted machine gets back; everything else the machine holds is volatile.
// Rand is the node's own generator, forked from the run's generator, for
// randomized timeouts. Incarnation is 0 when the node is first added and
// counts restarts. Logf writes one line into the run's trace (Config.Trace),
// prefixed with the time and the node's id; it is never nil.
type Env struct {
	ID          NodeID
	Disk        *Disk
	Rand        *Rand
	Incarnation int
	Logf        func(format string, args ...any)
}

// Factory builds a node's machine: at Sim.AddNodes with an empty disk, and at
// Sim.Restart with the disk that survived the crash. It is the crash/restart
// hook: recovery (reading the disk, cutting a torn tail) happens here.
type Factory[M any] func(env Env) Machine[M]

package sim

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of the simulator. Misuse (crashing a crashed node) is returned;
// a failed invariant or a livelock stops the run and is kept in Sim.Err.
var (
	ErrUnknownNode = errors.New("sim: unknown node")
	ErrNodeDown    = errors.New("sim: node is down")
	ErrNodeUp      = errors.New("sim: node is up")
	ErrLivelock    = errors.New("sim: more events than Options.MaxEvents in one call")
	ErrNoCorrupt   = errors.New("sim: corruption needs Config.Corrupt for this message type")
	ErrNoFile      = errors.New("sim: no such file")
)

// Sim runs N machines on one goroutine against a virtual clock, a
// time-ordered message queue and one seeded generator. It is not safe for
// concurrent use and must not be called from inside a machine.
//
// The order of events is a function of (Config, the calls made on the Sim):
// messages are delivered in (due time, send order); a tick due at the same
// time as a delivery runs after it; within a tick, nodes tick in id order,
// and messages a machine returns are sent in the order returned.
type Sim[M any] struct {
	cfg       Config[M]
	rand      *Rand
	faults    *Faults
	now       Time
	nextTick  Time
	nodes     map[NodeID]*node[M]
	ids       []NodeID
	queue     eventQueue[M]
	seq       uint64
	events    int // events processed: deliveries and drops on arrival, ticks, adds, crashes, restarts, injected sends
	stats     Stats
	invariant func() error
	err       error
}

type node[M any] struct {
	id          NodeID
	machine     Machine[M] // nil while down
	disk        *Disk
	incarnation int
}

// Stats counts what happened in a run so far.
type Stats struct {
	Sent, Delivered, Dropped, Duplicated, Corrupted int
	Ticks, Crashes, Restarts                        int
}

// New returns a simulator with no nodes at time 0. It panics when cfg.New is
// nil or cfg.Link is invalid (a test bug, not a run outcome).
func New[M any](cfg Config[M]) *Sim[M] {
	if cfg.New == nil {
		panic("sim: Config.New is nil")
	}
	if err := cfg.Link.Validate(); err != nil {
		panic(err)
	}
	cfg.Options = cfg.Options.withDefaults()
	return &Sim[M]{
		cfg:      cfg,
		rand:     NewRand(cfg.Seed),
		faults:   NewFaults(cfg.Link),
		nextTick: Time(cfg.TickInterval),
		nodes:    map[NodeID]*node[M]{},
	}
}

// Describe returns the line to print with every run and every failure:
// "sim seed=7 tick=10ms …". Replaying needs exactly these options.
func (s *Sim[M]) Describe() string { return "sim " + s.cfg.Options.String() }

// Options returns the run's options with defaults filled in.
func (s *Sim[M]) Options() Options { return s.cfg.Options }

// Now returns the virtual time.
func (s *Sim[M]) Now() Time { return s.now }

// Faults returns the run's fault state, to change links and partitions
// between calls. Changes apply to messages sent afterwards (and a partition
// also to messages in flight, which it drops on arrival).
func (s *Sim[M]) Faults() *Faults { return s.faults }

// Rand returns the run's generator, for a test's own random choices
// (workload, which node to crash) so that they too replay from the seed.
func (s *Sim[M]) Rand() *Rand { return s.rand }

// Stats returns the counters so far.
func (s *Sim[M]) Stats() Stats { return s.stats }

// InFlight returns how many message copies are queued.
func (s *Sim[M]) InFlight() int { return len(s.queue) }

// Err returns the failure that stopped the run (an *InvariantError,
// ErrLivelock, or ErrNoCorrupt for a machine's message that a corruption
// fault could not damage), or nil.
func (s *Sim[M]) Err() error { return s.err }

// SetInvariant installs check, run after every event (delivery, tick of all
// nodes, add, crash, restart, injected send). The first error it returns
// stops the run: Err returns it as an *InvariantError and every later
// Step/Run/Deliver does nothing.
func (s *Sim[M]) SetInvariant(check func() error) { s.invariant = check }

// InvariantError is a failed invariant with where it failed.
type InvariantError struct {
	At     Time
	Event  string // the event after which the check failed
	Run    string // Describe() of the run
	Err    error
	Number int // events processed, the failing one included
}

// Error renders "invariant failed at T after event N (EVENT): ERR [RUN]".
func (e *InvariantError) Error() string {
	return fmt.Sprintf("invariant failed at %v after event %d (%s): %v [%s]", e.At, e.Number, e.Event, e.Err, e.Run)
}

// Unwrap returns the invariant's own error.
func (e *InvariantError) Unwrap() error { return e.Err }

func (s *Sim[M]) tracef(format string, args ...any) {
	if s.cfg.Trace != nil {
		s.cfg.Trace(fmt.Sprintf(format, args...))
	}
}

func (s *Sim[M]) format(msg M) string {
	if s.cfg.Format != nil {
		return s.cfg.Format(msg)
	}
	if b, ok := any(msg).([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprint(msg)
}

// check runs the invariant after event and records its failure.
func (s *Sim[M]) check(event string) {
	s.events++
	if s.invariant == nil || s.err != nil {
		return
	}
	if err := s.invariant(); err != nil {
		s.err = &InvariantError{At: s.now, Event: event, Run: s.Describe(), Err: err, Number: s.events}
		s.tracef("%v invariant failed: %v", s.now, err)
	}
}

// Nodes returns every node's id, in the order added.
func (s *Sim[M]) Nodes() []NodeID { return append([]NodeID(nil), s.ids...) }

// Up reports whether id exists and is running.
func (s *Sim[M]) Up(id NodeID) bool {
	n, ok := s.nodes[id]
	return ok && n.machine != nil
}

// Machine returns id's running machine, or nil when id is down or unknown.
// Tests use it to read state for invariants; they must not step it.
func (s *Sim[M]) Machine(id NodeID) Machine[M] {
	if n, ok := s.nodes[id]; ok {
		return n.machine
	}
	return nil
}

// Disk returns id's disk (also while the node is down), or nil when unknown.
func (s *Sim[M]) Disk(id NodeID) *Disk {
	if n, ok := s.nodes[id]; ok {
		return n.disk
	}
	return nil
}

// Status returns one line per node, in id order: "2 down inc=1
// disk=[log len=40 synced=40]" followed, for a running machine that
// implements Statuser, by its Status.
func (s *Sim[M]) Status() string {
	var b strings.Builder
	for _, id := range s.ids {
		n := s.nodes[id]
		state := "up"
		if n.machine == nil {
			state = "down"
		}
		fmt.Fprintf(&b, "%v %s inc=%d disk=[%v]", id, state, n.incarnation, n.disk)
		if st, ok := n.machine.(Statuser); ok {
			fmt.Fprintf(&b, " %s", st.Status())
		}
		b.WriteByte('\n')
	}
	return b.String()
}

package sim

import (
	"fmt"
	"time"
)

// Options are the knobs of a run that, with the seed, determine it: the same
// Options and the same machine code replay the same run event for event.
type Options struct {
	// Seed seeds the run's one generator (NewRand(Seed)); every random choice
	// of the run (fates of messages, crash cuts, node generators) derives
	// from it.
	Seed uint64
	// TickInterval is the virtual time between two Ticks of every node;
	// 0 means 10ms. Ticks fall at multiples of it: TickInterval, 2×, …
	TickInterval time.Duration
	// Link is the fault setting of every link between nodes until changed
	// (Sim.Faults().SetLink); its Delay also applies to External's links.
	Link LinkFaults
	// MaxEvents bounds the events one RunFor, RunTicks or Deliver call may
	// process (0 means 1,000,000); past it the run fails with ErrLivelock,
	// so two machines answering each other at zero delay cannot hang a test.
	MaxEvents int
}

// withDefaults returns o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.TickInterval <= 0 {
		o.TickInterval = 10 * time.Millisecond
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = 1_000_000
	}
	return o
}

// String renders every option, defaults filled in, as one line that a
// failing test prints so the run can be replayed: "seed=7 tick=10ms
// max-events=1000000 link=[delay=1ms drop=5%]".
func (o Options) String() string {
	o = o.withDefaults()
	return fmt.Sprintf("seed=%d tick=%v max-events=%d link=[%v]", o.Seed, o.TickInterval, o.MaxEvents, o.Link)
}

// Config is everything New needs: the options and the code of the run.
type Config[M any] struct {
	Options
	// New builds a node's machine (required).
	New Factory[M]
	// Format renders a message for the trace; nil means fmt's %v (%q for
	// []byte). It must be deterministic and must accept corrupted messages.
	Format func(msg M) string
	// Corrupt returns msg with its encoding damaged and a note for the trace.
	// nil means FlipByte when M is []byte; for another M without Corrupt, a
	// corruption fault is an error (ErrNoCorrupt). Draw only from r.
	Corrupt func(msg M, r *Rand) (M, string)
	// External, when set, receives every message delivered to External.
	External func(now Time, from NodeID, msg M)
	// Trace, when set, receives one line per event (sends, fates,
	// deliveries, crashes, restarts), in order, without a trailing newline.
	Trace func(line string)
}

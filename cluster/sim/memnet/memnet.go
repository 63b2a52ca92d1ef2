// Package memnet is an in-memory sim.Network for goroutine-based tests: the
// seam replication and control-plane code is written against until the
// QUIC transport (which will implement the same sim.Network interface)
// exists. It offers the simulator's network faults — drop, duplicate,
// delay with jitter, reorder, corrupt, partitions — with the same
// sim.LinkFaults and sim.Faults types.
//
// Fates are drawn from one generator per directed link, seeded from
// (Config.Seed, from, to): the k-th message sent on a link always meets the
// same fate, so a test whose goroutines send on each link in a fixed order
// replays. Scheduling across links is Go's and does not replay; run the
// test inside a testing/synctest bubble to make delays virtual (a delay is a
// time.AfterFunc, which the bubble's fake clock fires without waiting) and
// to wait for quiescence with synctest.Wait. Create the Net inside the
// bubble.
//
// Node crashes are not the network's business: a test stops and restarts
// its node's goroutines itself (and may isolate it with a partition
// meanwhile).
package memnet

import (
	"fmt"
	"sync"
	"time"

	"felix/cluster/sim"
)

// Config configures a Net.
type Config[M any] struct {
	// Seed seeds every link's generator (sim.DeriveSeed(Seed, from, to)).
	Seed uint64
	// Link is the fault setting of every link until changed (SetLink).
	// Links from or to sim.External only take its Delay.
	Link sim.LinkFaults
	// Corrupt damages a message for a corruption fault, drawing only from
	// r; nil means sim.FlipByte when M is []byte. For another M without
	// Corrupt, a corrupted copy is dropped instead and counted in
	// Stats.Uncorruptible.
	Corrupt func(msg M, r *sim.Rand) (M, string)
}

// Stats counts what a Net did. Sent counts Send calls accepted; Delivered
// counts copies handed to a receiver (read from its inbox or passed to its
// handler).
type Stats struct {
	Sent, Delivered, Dropped, Duplicated, Corrupted, Uncorruptible int
}

// Net is an in-memory network of any number of nodes. It is safe for
// concurrent use. Every node has an unbounded inbox, so Send never blocks;
// a receiver that never reads only grows memory.
type Net[M any] struct {
	cfg     Config[M]
	mu      sync.Mutex
	faults  *sim.Faults
	rands   map[sim.Link]*sim.Rand
	inboxes map[sim.NodeID]*inbox[M]
	timers  map[*time.Timer]bool
	stats   Stats
	closed  bool
	done    chan struct{}
	pumps   sync.WaitGroup
}

var _ sim.Network[[]byte] = (*Net[[]byte])(nil)

// New returns an open network. It panics when cfg.Link is invalid.
func New[M any](cfg Config[M]) *Net[M] {
	if err := cfg.Link.Validate(); err != nil {
		panic(err)
	}
	return &Net[M]{
		cfg:     cfg,
		faults:  sim.NewFaults(cfg.Link),
		rands:   map[sim.Link]*sim.Rand{},
		inboxes: map[sim.NodeID]*inbox[M]{},
		timers:  map[*time.Timer]bool{},
		done:    make(chan struct{}),
	}
}

// Describe returns the line to log with every test using the net:
// "memnet seed=7 link=[delay=1ms drop=10%]".
func (n *Net[M]) Describe() string {
	return fmt.Sprintf("memnet seed=%d link=[%v]", n.cfg.Seed, n.cfg.Link)
}

// Send draws the fate of msg on from->to and queues its copies: at once
// for a copy without delay, else from a timer. It never blocks. Errors:
// sim.ErrNetworkClosed after Close.
func (n *Net[M]) Send(from, to sim.NodeID, msg M) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return sim.ErrNetworkClosed
	}
	n.stats.Sent++
	fate := n.faults.Decide(from, to, n.linkRand(from, to))
	if fate.Drop != "" {
		n.stats.Dropped++
		return nil
	}
	for i, c := range fate.Copies {
		d := sim.Delivery[M]{From: from, To: to, Msg: msg, Corrupt: c.Corrupt}
		if i > 0 {
			n.stats.Duplicated++
		}
		if c.Corrupt && !n.corrupt(&d) {
			n.stats.Uncorruptible++
			continue
		}
		n.schedule(d, c.Delay)
	}
	return nil
}

func (n *Net[M]) linkRand(from, to sim.NodeID) *sim.Rand {
	k := sim.Link{From: from, To: to}
	r, ok := n.rands[k]
	if !ok {
		r = sim.NewRand(sim.DeriveSeed(n.cfg.Seed, uint64(from), uint64(to)))
		n.rands[k] = r
	}
	return r
}

func (n *Net[M]) corrupt(d *sim.Delivery[M]) bool {
	r := n.linkRand(d.From, d.To)
	if n.cfg.Corrupt != nil {
		d.Msg, _ = n.cfg.Corrupt(d.Msg, r)
	} else if b, ok := any(d.Msg).([]byte); ok {
		out, _ := sim.FlipByte(b, r)
		d.Msg = any(out).(M)
	} else {
		return false
	}
	n.stats.Corrupted++
	return true
}

// schedule queues d now or after delay; n.mu is held.
func (n *Net[M]) schedule(d sim.Delivery[M], delay time.Duration) {
	if delay <= 0 {
		n.enqueueLocked(d)
		return
	}
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		delete(n.timers, t)
		if !n.closed {
			n.enqueueLocked(d)
		}
	})
	n.timers[t] = true
}

// enqueueLocked puts d in its receiver's inbox unless the link got blocked
// while d was in flight; n.mu is held.
func (n *Net[M]) enqueueLocked(d sim.Delivery[M]) {
	if d.From != sim.External && d.To != sim.External && n.faults.Blocked(d.From, d.To) {
		n.stats.Dropped++
		return
	}
	n.inboxLocked(d.To).push(d)
}

package memnet

import (
	"errors"
	"sync"

	"felix/cluster/sim"
)

// ErrHandled is returned by Handle for a node whose inbox is already read
// through Recv or a handler.
var ErrHandled = errors.New("memnet: node already has a receiver")

// inbox is one node's unbounded queue and the goroutine (the pump) that
// hands its deliveries to the node's channel or handler, one at a time.
type inbox[M any] struct {
	mu      sync.Mutex
	queue   []sim.Delivery[M]
	wake    chan struct{} // capacity 1: "queue may be non-empty"
	ch      chan sim.Delivery[M]
	started bool
}

func (n *Net[M]) inboxLocked(id sim.NodeID) *inbox[M] {
	in, ok := n.inboxes[id]
	if !ok {
		in = &inbox[M]{wake: make(chan struct{}, 1)}
		n.inboxes[id] = in
	}
	return in
}

func (in *inbox[M]) push(d sim.Delivery[M]) {
	in.mu.Lock()
	in.queue = append(in.queue, d)
	in.mu.Unlock()
	select {
	case in.wake <- struct{}{}:
	default:
	}
}

func (in *inbox[M]) pop() (sim.Delivery[M], bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.queue) == 0 {
		return sim.Delivery[M]{}, false
	}
	d := in.queue[0]
	in.queue[0] = sim.Delivery[M]{}
	in.queue = in.queue[1:]
	return d, true
}

// Recv returns node id's inbox channel (unbuffered; the pump goroutine
// feeds it in delivery order). Deliveries sent before the first Recv wait
// in the queue. After Close, and for a node read through Handle, the
// channel is closed. Recv is idempotent.
func (n *Net[M]) Recv(id sim.NodeID) <-chan sim.Delivery[M] {
	n.mu.Lock()
	defer n.mu.Unlock()
	in := n.inboxLocked(id)
	if in.ch != nil {
		return in.ch
	}
	in.ch = make(chan sim.Delivery[M])
	if n.closed || in.started {
		close(in.ch)
		return in.ch
	}
	in.started = true
	n.pumps.Add(1)
	go n.pump(in, func(d sim.Delivery[M]) bool {
		select {
		case in.ch <- d:
			return true
		case <-n.done:
			return false
		}
	}, func() { close(in.ch) })
	return in.ch
}

// Handle makes the network call fn for every delivery to id, one at a time
// on a goroutine of the network's, in delivery order, instead of a channel.
// fn must return for Close to return, so fn must not call Close; it may
// call Send. Errors: ErrHandled when id already
// has a receiver; sim.ErrNetworkClosed after Close.
func (n *Net[M]) Handle(id sim.NodeID, fn func(sim.Delivery[M])) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return sim.ErrNetworkClosed
	}
	in := n.inboxLocked(id)
	if in.started || in.ch != nil {
		return ErrHandled
	}
	in.started = true
	n.pumps.Add(1)
	go n.pump(in, func(d sim.Delivery[M]) bool { fn(d); return true }, func() {})
	return nil
}

// pump hands deliveries to give until Close; give returns false when the
// network closed while it waited. finish runs on the way out.
func (n *Net[M]) pump(in *inbox[M], give func(sim.Delivery[M]) bool, finish func()) {
	defer n.pumps.Done()
	defer finish()
	for {
		d, ok := in.pop()
		if !ok {
			select {
			case <-in.wake:
				continue
			case <-n.done:
				return
			}
		}
		select {
		case <-n.done:
			return
		default:
		}
		if !give(d) {
			return
		}
		n.mu.Lock()
		n.stats.Delivered++
		n.mu.Unlock()
	}
}

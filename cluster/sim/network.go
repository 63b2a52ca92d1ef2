package sim

import "errors"

// Network carries messages of type M between nodes: the seam between a
// node's goroutine-based code (replication, the control plane) and whatever
// moves its bytes. Two implementations exist or will:
//
//   - memnet.Net (package felix/cluster/sim/memnet): in memory, with this
//     package's fault model (drop, duplicate, delay with jitter, reorder,
//     corrupt, partitions) drawn from a seed, for ordinary goroutine tests
//     and testing/synctest bubbles;
//   - the QUIC transport of the cluster (docs/internal-protocol.md, "The
//     transport"), which will implement this same interface with M the FLXI
//     frame, for one local node: Send with another from, or Recv of another
//     id, is its error.
//
// The Sim does not use a Network: it is its own, deterministic one. Machines
// written for the Sim and code written against Network share message types
// and the Faults model.
type Network[M any] interface {
	// Send hands msg to the network for delivery on from->to and returns
	// without waiting for the receiver. nil means accepted, not delivered:
	// the network may still drop, duplicate, delay or corrupt it. Errors:
	// ErrNetworkClosed; an implementation may add its own (unknown node,
	// not the local node). The network owns msg's memory from then on.
	Send(from, to NodeID, msg M) error
	// Recv returns node id's inbox: every delivery to id, in the order the
	// network delivers them. The channel is closed by Close. Calling Recv
	// twice returns the same channel.
	Recv(id NodeID) <-chan Delivery[M]
	// Close stops delivering, closes every inbox and makes Send fail.
	// Messages still in flight are dropped. It is idempotent.
	Close() error
}

// Delivery is one message as a receiver gets it. Corrupt is the network's
// own record that it damaged Msg; a receiver must not look at it (its
// decoder's checksum is what has to notice) but a test may.
type Delivery[M any] struct {
	From, To NodeID
	Msg      M
	Corrupt  bool
}

// ErrNetworkClosed is returned by Network.Send after Close.
var ErrNetworkClosed = errors.New("sim: network closed")

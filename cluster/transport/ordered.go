package transport

// Ordered replication streams: one reserved QUIC stream per (peer, shard, log), so batches
// pipelined without waiting for their answers arrive, and are handled, in the order sent.

import (
	"context"
	"errors"
	"fmt"

	"felix/proto"
)

// ErrTooManyStreams: the connection already carries PoolOptions.MaxOrderedStreams ordered
// streams (or the peer grants no more streams); nothing was sent.
var ErrTooManyStreams = errors.New("transport: ordered stream bound of the connection reached")

// OrderKey names an ordered stream of a peer: the shard (its canonical name, as the caller
// keys it) and the replicated log.
type OrderKey struct {
	Shard string           // canonical shard name, e.g. "tenant/namespace/name"
	Log   proto.ReplicaLog // the replicated log of the shard
}

// Pending is the answer of a pipelined request, available once Done is closed.
type Pending struct {
	done chan struct{}
	m    proto.InternalMessage
	err  error
}

// Done is closed when the answer or the error is known.
func (p *Pending) Done() <-chan struct{} { return p.done }

// Wait returns the answer of the request, with Request's errors (ErrConnectionLost,
// ErrTimeout: outcome unknown), or ctx's error if ctx ends first (the request stays pending).
func (p *Pending) Wait(ctx context.Context) (proto.InternalMessage, error) {
	select {
	case <-p.done:
		return p.m, p.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Pipeline writes req on the ordered stream of (to, key) and returns without waiting for the
// answer: requests pipelined on one key from one goroutine are written, and handled by the
// peer, in call order (the listener serves a stream's requests in order). The stream is opened
// at the key's first use on a connection; a new connection (after a loss) opens a new one, so
// order holds per connection: a caller resuming after ErrConnectionLost must resend from its
// last acknowledged batch. The request holds an in-flight slot of the peer until answered.
// Errors before the send: those of Request plus ErrTooManyStreams (nothing was sent).
func (p *Pool) Pipeline(ctx context.Context, to Peer, key OrderKey, req proto.InternalMessage) (*Pending, error) {
	buf, frame, ps, err := p.admit(to, req)
	if err != nil {
		return nil, err
	}
	c, err := ps.connection(ctx, to.Addr)
	if err != nil {
		ps.release()
		return nil, err
	}
	st, err := c.orderedStream(key)
	if err != nil {
		ps.release()
		return nil, err
	}
	corr, w, err := c.send(st, frame)
	if err != nil {
		ps.release()
		return nil, err
	}
	putFrame(buf, frame) // written in full: quic-go holds no reference to it
	pend := &Pending{done: make(chan struct{})}
	go func() {
		pend.m, pend.err = c.await(context.Background(), corr, w)
		ps.release() // before Done: a caller seeing the answer sees the slot back
		close(pend.done)
	}()
	return pend, nil
}

// orderedStream returns the stream reserved for key on c, opening it (and its reader) on
// first use within MaxOrderedStreams.
func (c *clientConn) orderedStream(key OrderKey) (*clientStream, error) {
	c.omu.Lock()
	defer c.omu.Unlock()
	if st := c.ordered[key]; st != nil {
		return st, nil
	}
	if len(c.ordered) >= c.pool.opts.MaxOrderedStreams {
		return nil, fmt.Errorf("%w: %d streams to %s", ErrTooManyStreams, len(c.ordered), c.peer)
	}
	s, err := c.qc.OpenStream()
	if err != nil {
		if c.qc.Context().Err() != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrConnectionLost, c.peer, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrTooManyStreams, c.peer, err)
	}
	if c.ordered == nil {
		c.ordered = map[OrderKey]*clientStream{}
	}
	st := &clientStream{s: s}
	c.ordered[key] = st
	go c.read(s)
	return st, nil
}

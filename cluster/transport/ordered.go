package transport

// Ordered replication streams: one reserved QUIC stream per (peer, shard, log), so batches
// pipelined without waiting for their answers arrive, and are handled, in the order sent.

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// Pending is the answer of a pipelined request, available once Done is closed. No goroutine
// waits for it: the stream reader, the timeout timer or the connection's end completes it,
// whichever removes it from the connection's pending map first (complete runs once).
type Pending struct {
	done  chan struct{}
	m     proto.InternalMessage
	err   error
	ps    *peerState  // its in-flight slot, released by complete
	start time.Time   // write time, for the latency histogram
	stop  func() bool // stops the timeout timer
	peer  StorageID   // the carrying connection's peer identity (PeerStorageID)
}

// complete records the outcome, returns the in-flight slot (before Done: a caller seeing the
// answer sees the slot back) and closes Done. Called once, by the remover of the map entry.
func (pd *Pending) complete(m proto.InternalMessage, err error) {
	pd.stop()
	pd.m, pd.err = m, err
	pd.ps.release()
	close(pd.done)
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
	pend := &Pending{done: make(chan struct{}), ps: ps, peer: c.peerStorage}
	if err := c.sendPending(st, frame, pend); err != nil {
		return nil, err
	}
	putFrame(buf, frame) // written in full: quic-go holds no reference to it
	return pend, nil
}

// sendPending registers pd under a fresh correlation id with its timeout, then writes frame
// on st. On an error pd's slot is returned unless pd was completed meanwhile (by the
// connection's end), which returned it.
func (c *clientConn) sendPending(st *clientStream, frame []byte, pd *Pending) error {
	corr := c.corr.Add(1)
	setCorrelation(frame, corr)
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		pd.ps.release()
		return fmt.Errorf("%w: %s", ErrConnectionLost, c.peer)
	}
	// Under c.mu: the expiry cannot look for the entry before it is there.
	pd.start = time.Now()
	c.startExpiry(corr, pd)
	if c.pending == nil {
		c.pending = map[uint64]*Pending{}
	}
	c.pending[corr] = pd
	c.mu.Unlock()
	if err := c.write(st, frame); err != nil {
		if c.takePending(corr) != nil {
			pd.stop()
			pd.ps.release()
		}
		return err
	}
	return nil
}

// startExpiry arms pd's RequestTimeout: a timer whose callback completes pd with ErrTimeout
// if it is still pending (with the test seam Pool.after, a goroutine waiting on its channel).
func (c *clientConn) startExpiry(corr uint64, pd *Pending) {
	expire := func() {
		if c.takePending(corr) != nil {
			c.m.timeouts.Inc()
			pd.complete(nil, fmt.Errorf("%w: %s after %v", ErrTimeout, c.peer, c.pool.opts.RequestTimeout))
		}
	}
	if c.pool.after == nil {
		pd.stop = time.AfterFunc(c.pool.opts.RequestTimeout, expire).Stop
		return
	}
	ch, stop := c.pool.after(c.pool.opts.RequestTimeout)
	pd.stop = stop
	go func() {
		select {
		case <-ch:
			expire()
		case <-pd.done:
		}
	}()
}

// takePending removes and returns the pending request corr, nil when someone else did.
func (c *clientConn) takePending(corr uint64) *Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	pd := c.pending[corr]
	delete(c.pending, corr)
	return pd
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

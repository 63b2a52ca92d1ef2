package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"felix/proto"
)

// Start is where a subscription begins (spec/client-protocol.md §7): Latest, Earliest or
// Offset(n).
type Start struct {
	kind   proto.StartKind
	offset uint64
}

// Latest starts with records published from now on.
var Latest = Start{kind: proto.StartLatest}

// Earliest starts at the oldest record still retained (never an error on a trimmed stream).
var Earliest = Start{kind: proto.StartEarliest}

// Offset starts exactly at offset n, the first record not yet seen (resume = last handled
// + 1). An unservable n fails with *CursorError (too_old / in_future), never a silent
// restart at the tail.
func Offset(n uint64) Start { return Start{kind: proto.StartOffset, offset: n} }

func (s Start) wire() *proto.Start {
	if s.kind == proto.StartLatest {
		return nil
	}
	return &proto.Start{Kind: s.kind, Offset: s.offset}
}

// SubscribeOptions configure Subscribe. The zero value subscribes to shard 0 without
// publishers.
type SubscribeOptions struct {
	// Shards lists the stream's shards to subscribe to (offsets are per shard); nil = [0].
	// Each shard gets its own subscription; records of different shards interleave.
	Shards []uint32
	// WithPublisher asks for each record's publishing principal (spec §8.6; broker feature
	// "publishers", else Subscribe fails with ErrUnsupported).
	WithPublisher bool
	// ReuseBuffers reads event frames into recycled buffers: a Record's Payload and
	// Publisher are then valid only until the next call to Next (copy what you keep), and
	// delivery allocates nothing per frame. Records (the channel form) copies each
	// record's Payload and Publisher once. Off by default: records stay valid indefinitely.
	ReuseBuffers bool
}

// Record is one delivered record. Payload and Publisher stay valid: each frame is read
// into its own buffer, shared by the frame's records (no per-record allocation); with
// SubscribeOptions.ReuseBuffers only until the next call to Next.
type Record struct {
	Shard uint32
	// Offset is the record's offset in its shard; valid when HasOffset (the broker
	// negotiated event offsets, flag 0x0020, and the stream is durable).
	Offset    uint64
	HasOffset bool
	Payload   []byte
	// Publisher is the publishing principal (token subject) when asked for and recorded;
	// nil otherwise.
	Publisher []byte
	// Gap is the number of offsets just before this record that were dropped for this
	// subscriber (the broker's drop_new policy under a slow consumer, or records lost
	// across a reconnect). Offsets the broker skipped on purpose (skipped_before, §8.5)
	// are not gaps.
	Gap uint64
}

// Subscription delivers the records of one stream (one or more shards). On a lost
// connection or a draining broker it re-subscribes each shard from its last delivered
// offset + 1 (with jittered backoff), so records are neither repeated nor silently lost:
// anything the broker no longer has surfaces as a *CursorError from Next. Next is for one
// goroutine; Close may be called from any.
type Subscription struct {
	c      *Client
	stream string
	opts   SubscribeOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	batches chan *eventFrame // bounded: a full queue stops the readers (QUIC flow control)
	free    chan *eventFrame // ReuseBuffers: recycled frames (subbuf.go); nil otherwise
	errOnce sync.Once
	err     error
	errc    chan struct{} // closed when err is set

	cur *eventFrame
	idx int

	chErr atomic.Pointer[error] // why the Records channel closed

	frames atomic.Uint64 // frames queued by all shards' readers (redirect chains reset on progress)

	down    atomic.Int32 // shards whose event stream is lost and not yet re-subscribed
	upSince atomic.Int64 // unix ns of the latest (re-)subscribe of any shard
}

// eventFrame is one decoded event batch of one shard; buf is its body (recycled with
// SubscribeOptions.ReuseBuffers, subbuf.go).
type eventFrame struct {
	shard uint32
	eb    proto.EventBatch
	gap   uint64
	buf   []byte
}

// Subscribe subscribes to stream (in the client's tenant and namespace) from start. It
// returns once every shard's subscription is registered on the broker (so records
// published after Subscribe returns are delivered, with Latest too). A not_leader answer
// is followed: the SDK connects to the owner's address (with the same TLS settings and
// token) and subscribes there, up to 4 hops without a record in between (a live
// subscription whose shard moves follows the same way, from its last offset + 1); the same
// (address, generation) twice is refused as a loop. A failure that is not a definite refusal (a
// connection lost or closed under the subscribe, an auth exchange cut off) is retried with
// the reconnect backoff on a new connection until ctx ends. Errors: ctx.Err() (wrapping the
// last attempt's error), *CursorError (ErrCursor),
// *RedirectError (a loop or too many hops; matches ErrNotLeader), *NotLeaderError (no
// address), ErrNotFound, ErrUnauthorized, ErrStorageFailed (a *ServerError: the broker
// found damage in the shard's log; also how Next ends a subscription reading into it),
// ErrUnsupported (Earliest or
// Offset without the broker's offset flag 0x0020, or WithPublisher without "publishers").
func (c *Client) Subscribe(ctx context.Context, stream string, start Start, opts SubscribeOptions) (*Subscription, error) {
	if stream == "" {
		return nil, fmt.Errorf("%w: empty stream name", ErrInvalidArgument)
	}
	if len(opts.Shards) == 0 {
		opts.Shards = []uint32{0}
	}
	s := &Subscription{c: c, stream: stream, opts: opts, batches: make(chan *eventFrame, c.cfg.subQueue), errc: make(chan struct{})}
	if opts.ReuseBuffers {
		s.free = newFreeFrames(c.cfg.subQueue, len(opts.Shards))
	}
	s.upSince.Store(time.Now().UnixNano())
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	type opened struct {
		es   *eventStream
		caps Capabilities
	}
	first := make([]opened, len(opts.Shards))
	addrs := make([]string, len(opts.Shards))
	for i, shard := range opts.Shards {
		es, caps, err := s.openRetrying(ctx, shard, start, &addrs[i])
		if err != nil {
			for _, o := range first[:i] {
				o.es.st.CancelRead(0)
			}
			s.cancel()
			return nil, err
		}
		first[i] = opened{es, caps}
	}
	for i, shard := range opts.Shards {
		s.wg.Add(1)
		go s.run(shard, start, addrs[i], first[i].es)
	}
	return s, nil
}

// openRetrying is openFollowing that retries, with the reconnect backoff, every failure
// that is not a definite refusal (terminal): a connection lost or closed under the
// subscribe (the SDK closes a connection it gave up on; a restarted broker drops the old
// ones) or an auth exchange cut off by it. It returns when ctx ends (ctx.Err()) or the
// client is closed.
func (s *Subscription) openRetrying(ctx context.Context, shard uint32, start Start, addr *string) (*eventStream, Capabilities, error) {
	bo := newBackoff(s.c.cfg.backoffMin, s.c.cfg.backoffMax)
	var ch redirectChain // each attempt starts a new chain at the dialled broker
	for {
		ch.reset()
		es, caps, err := s.openFollowing(ctx, shard, start, addr, &ch)
		if err == nil || terminal(err) || ctx.Err() != nil || s.c.ctx.Err() != nil {
			if err != nil {
				if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
					err = fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
				}
				err = closedOr(s.c, err)
			}
			return es, caps, err
		}
		s.c.cfg.logger.Info("felix: subscribe failed; retrying", "stream", s.stream, "shard", shard, "err", err)
		*addr = ""
		t := time.NewTimer(bo.next())
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, caps, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), err)
		case <-s.c.ctx.Done():
			t.Stop()
			return nil, caps, ErrClosed
		}
	}
}

// openFollowing is open that follows not_leader redirects (spec §8.9: the client
// reconnects to the owner's address and subscribes there) as far as ch admits them
// (redirect.go: a loop or more than maxRedirects hops is a *RedirectError); *addr is the
// broker to use ("" = the dialled one) and is updated to the owner that accepted.
func (s *Subscription) openFollowing(ctx context.Context, shard uint32, start Start, addr *string, ch *redirectChain) (*eventStream, Capabilities, error) {
	for {
		es, caps, err := s.open(ctx, shard, start, *addr)
		var nl *NotLeaderError
		if err == nil || !errors.As(err, &nl) {
			return es, caps, err
		}
		if ferr := ch.follow(nl); ferr != nil {
			return nil, caps, ferr
		}
		s.c.cfg.logger.Info("felix: subscription redirected", "stream", s.stream, "shard", shard, "owner", nl.Owner, "address", nl.Address, "generation", nl.Generation)
		*addr = nl.Address
	}
}

// open registers one shard's subscription on the broker at addr ("" = the dialled one)
// (spec §1.3): a fresh authenticated bi stream, subscribe, then subscribed /
// subscribe_cursor_error / not_leader / error, and the event stream bound by the id in its
// hello.
func (s *Subscription) open(ctx context.Context, shard uint32, start Start, addr string) (*eventStream, Capabilities, error) {
	c := s.c
	var cn *conn
	var err error
	if slot := c.slotFor(addr); slot != nil {
		cn, err = slot.get(ctx)
	} else {
		cn, err = c.conn(ctx)
	}
	if err != nil {
		return nil, Capabilities{}, closedOr(c, err)
	}
	st, fr, caps, err := cn.openStream(ctx)
	if err != nil {
		return nil, caps, err
	}
	defer func() {
		st.CancelRead(0)
		_ = st.Close()
	}()
	if start.kind != proto.StartLatest && caps.Flags&proto.FlagEventBatchOffsets == 0 {
		return nil, caps, fmt.Errorf("%w: start %v needs event offsets (flag 0x0020)", ErrUnsupported, start.kind)
	}
	if s.opts.WithPublisher && !caps.Has(proto.FeaturePublishers) {
		return nil, caps, fmt.Errorf("%w: feature %q", ErrUnsupported, proto.FeaturePublishers)
	}
	sh := shard
	m := &proto.Subscribe{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Stream: s.stream, Start: start.wire(), WithPublisher: s.opts.WithPublisher}
	if shard != 0 {
		m.Shard = &sh
	}
	stop := context.AfterFunc(ctx, func() { _ = st.SetReadDeadline(time.Now()) })
	defer stop()
	if _, err := st.Write(proto.AppendMessage(nil, m)); err != nil {
		return nil, caps, fmt.Errorf("felix: subscribe: %w", err)
	}
	for {
		hdr, body, err := fr.next()
		if err != nil {
			if ctx.Err() != nil {
				return nil, caps, ctx.Err()
			}
			return nil, caps, fmt.Errorf("felix: subscribe: %w", err)
		}
		if hdr.Flags != 0 {
			return nil, caps, fmt.Errorf("%w: binary frame %#x in answer to subscribe", ErrProtocol, hdr.Flags)
		}
		msg, err := proto.DecodeMessage(body)
		if err != nil {
			return nil, caps, fmt.Errorf("%w: subscribe answer: %v", ErrProtocol, err)
		}
		switch m := msg.(type) {
		case *proto.Subscribed:
			es, err := cn.claimEvents(ctx, m.SubscriptionID)
			return es, caps, err
		case *proto.SubscribeCursorError:
			return nil, caps, &CursorError{Stream: s.stream, Shard: shard, Reason: CursorReason(m.Reason), Requested: m.Requested, Available: m.Available}
		case *proto.NotLeader, *proto.Error:
			return nil, caps, replyError(reply{msg: m})
		default:
			c.cfg.logger.Warn("felix: unexpected answer to subscribe", "type", string(msg.Type()))
		}
	}
}

// run reads one shard's event stream, and re-subscribes after a transport failure or a
// redirect (a not_leader ending the event stream, §8.9) from the next offset.
func (s *Subscription) run(shard uint32, start Start, addr string, es *eventStream) {
	defer s.wg.Done()
	var (
		next     uint64 // next expected offset
		haveNext bool
		bo       = newBackoff(s.c.cfg.backoffMin, s.c.cfg.backoffMax)
		ch       redirectChain // redirects since the last record (redirect.go)
	)
	if start.kind == proto.StartOffset {
		next, haveNext = start.offset, true
	}
	for {
		if es == nil {
			from := start
			if haveNext {
				from = Offset(next)
			}
			octx, cancel := s.ctx, context.CancelFunc(func() {})
			if addr != "" {
				// A redirect target that does not answer is given up for the dialled broker,
				// which redirects again if it still does not own the shard.
				octx, cancel = context.WithTimeout(s.ctx, 2*s.c.cfg.dialTimeout)
			}
			var err error
			es, _, err = s.openFollowing(octx, shard, from, &addr, &ch)
			cancel()
			if err != nil {
				if s.ctx.Err() != nil {
					return
				}
				if terminal(err) {
					s.fail(err)
					return
				}
				addr = ""
				ch.reset() // starting over at the dialled broker
				s.c.cfg.logger.Info("felix: re-subscribe failed; retrying", "stream", s.stream, "shard", shard, "err", err)
				if !s.sleep(bo.next()) {
					return
				}
				continue
			}
			bo.reset()
			s.upSince.Store(time.Now().UnixNano())
			s.down.Add(-1)
		}
		before, had, frames := next, haveNext, s.frames.Load()
		err := s.read(shard, es, &next, &haveNext)
		es.st.CancelRead(0)
		es = nil
		s.down.Add(1)
		if s.ctx.Err() != nil {
			return
		}
		progressed := next != before || had != haveNext || s.frames.Load() != frames
		if owner, moved, stop := s.followMoved(shard, err, &ch, progressed, &bo); stop {
			return
		} else if moved { // the shard moved: subscribe at the owner (redirect.go)
			addr = owner
			continue
		}
		if terminal(err) {
			s.fail(err)
			return
		}
		s.c.cfg.logger.Info("felix: event stream ended; re-subscribing", "stream", s.stream, "shard", shard, "err", err)
	}
}

// terminal reports errors a re-subscribe cannot fix. ErrStorageFailed on an event
// stream is a damaged log on the broker (its message names the stream, shard, segment,
// byte and offset): subscribing again would read the same damage, so it ends the
// subscription instead of looping (issue 23 item 1).
func terminal(err error) bool {
	for _, t := range []error{ErrCursor, ErrNotLeader, ErrNotFound, ErrUnauthorized, ErrUnsupported, ErrMalformed, ErrProtocol, ErrClosed, ErrStorageFailed} {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// read delivers one event stream's frames until it ends. Each frame is read into its own
// buffer (a recycled one with ReuseBuffers); its records alias it.
func (s *Subscription) read(shard uint32, es *eventStream, next *uint64, haveNext *bool) error {
	stop := context.AfterFunc(s.ctx, func() { es.st.CancelRead(0) })
	defer stop()
	for {
		f := s.newFrame(shard)
		hdr, body, err := es.fr.nextInto(f.buf)
		f.buf = body
		if err != nil {
			return fmt.Errorf("felix: event stream: %w", err)
		}
		if hdr.Flags == 0 {
			m, err := proto.DecodeMessage(body)
			s.release(f)
			if err != nil {
				return fmt.Errorf("%w: event stream: %v", ErrProtocol, err)
			}
			switch m.(type) {
			case *proto.NotLeader, *proto.Error: // an error ends the stream (e.g. its token expired)
				return replyError(reply{msg: m})
			}
			s.c.cfg.logger.Warn("felix: unexpected JSON frame on an event stream", "type", string(m.Type()))
			continue
		}
		if err := proto.DecodeEventBatch(hdr.Flags, body, &f.eb); err != nil {
			return fmt.Errorf("%w: event batch: %v", ErrProtocol, err)
		}
		if len(f.eb.Payloads) == 0 {
			s.release(f)
			continue
		}
		if f.eb.WithOffsets && *haveNext && f.eb.BaseOffset < *next {
			// Already delivered (an overlap after a re-subscribe): never deliver twice.
			skip := *next - f.eb.BaseOffset
			if skip >= uint64(len(f.eb.Payloads)) {
				s.release(f)
				continue
			}
			f.eb.Payloads = f.eb.Payloads[skip:]
			if f.eb.WithPublishers {
				f.eb.Publishers = f.eb.Publishers[skip:]
			}
			f.eb.BaseOffset, f.eb.SkippedBefore = *next, 0
		}
		if f.eb.WithOffsets {
			expect := f.eb.BaseOffset - f.eb.SkippedBefore
			if *haveNext && expect > *next {
				f.gap = expect - *next
			}
			*next, *haveNext = f.eb.BaseOffset+uint64(len(f.eb.Payloads)), true
		}
		select {
		case s.batches <- f:
			s.frames.Add(1)
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
	}
}

func (s *Subscription) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// fail ends the subscription with err (the first error wins).
func (s *Subscription) fail(err error) {
	s.errOnce.Do(func() {
		s.err = err
		close(s.errc)
	})
}

// Next returns the next record. It blocks until one arrives, ctx ends (ctx.Err()), the
// subscription fails (*CursorError when a re-subscribe finds its offset trimmed,
// *NotLeaderError when the shard moved, ErrUnauthorized, ...) or is closed (ErrClosed).
// Records already queued are delivered before a failure is reported.
func (s *Subscription) Next(ctx context.Context) (Record, error) {
	for s.cur == nil || s.idx >= len(s.cur.eb.Payloads) {
		s.release(s.cur)
		s.cur, s.idx = nil, 0
		select {
		case f := <-s.batches:
			s.cur = f
			continue
		default:
		}
		select {
		case f := <-s.batches:
			s.cur = f
		case <-s.errc:
			select {
			case f := <-s.batches:
				s.cur = f
				continue
			default:
			}
			return Record{}, s.err
		case <-s.ctx.Done():
			return Record{}, ErrClosed
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
	}
	f, i := s.cur, s.idx
	s.idx++
	r := Record{Shard: f.shard, Payload: f.eb.Payloads[i]}
	if f.eb.WithOffsets {
		r.HasOffset, r.Offset = true, f.eb.BaseOffset+uint64(i)
	}
	if f.eb.WithPublishers && len(f.eb.Publishers[i]) > 0 {
		r.Publisher = f.eb.Publishers[i]
	}
	if i == 0 {
		r.Gap = f.gap
	}
	return r, nil
}

// Live reports whether every shard's event stream is open (false from the moment the SDK
// sees a shard's connection lost or its stream ended until that shard is re-subscribed),
// and since, when the latest shard was (re-)subscribed. A SIGKILLed broker is seen within
// the idle timeout (WithIdleTimeout). The CLI's --idle-exit counts only live time.
func (s *Subscription) Live() (live bool, since time.Time) {
	return s.down.Load() == 0, time.Unix(0, s.upSince.Load())
}

// Close ends the subscription (the broker sees its event streams cancelled) and waits for
// its readers. Next then returns ErrClosed.
func (s *Subscription) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Records delivers the subscription's records on a channel, for range loops and select:
// a goroutine calls Next until it fails (ctx ending, Close, or a subscription error), then
// closes the channel; Err reports why. Use either Records or Next, not both.
func (s *Subscription) Records(ctx context.Context) <-chan Record {
	ch := make(chan Record)
	go func() {
		defer close(ch)
		for {
			r, err := s.Next(ctx)
			if err != nil {
				s.chErr.Store(&err)
				return
			}
			if s.opts.ReuseBuffers {
				r = ownRecord(r)
			}
			select {
			case ch <- r:
			case <-ctx.Done():
				err := ctx.Err()
				s.chErr.Store(&err)
				return
			case <-s.ctx.Done():
				err := ErrClosed
				s.chErr.Store(&err)
				return
			}
		}
	}()
	return ch
}

// Err returns why the channel of Records closed (nil while it is open).
func (s *Subscription) Err() error {
	if p := s.chErr.Load(); p != nil {
		return *p
	}
	return nil
}

package client

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"felix/proto"
)

// AckMode says when, and whether, the broker acknowledges a batch (spec/client-protocol.md
// §6, §5.2). The ack is sent after the broker accepted the batch, or after its commit when
// the broker runs with ack_on_commit (or the stream is forwarded).
type AckMode int

// Ack modes.
const (
	// AckPerBatch: one acknowledgement per batch (ack_mode 2). The default.
	AckPerBatch AckMode = iota
	// AckPerMessage: ack_mode 1 (the v1 broker still answers once per request).
	AckPerMessage
	// AckNone: fire and forget (binary 0x0001, no answer). Pending.Wait returns once the
	// batch was written to the stream; the result carries no offsets, and a refusal is
	// only logged by the broker.
	AckNone
)

// PublisherOptions configure a Publisher. The zero value is usable: defaults are given per
// field.
type PublisherOptions struct {
	// Linger is how long a batch waits for more records before it is sent (default 1 ms;
	// negative = send every Publish at once).
	Linger time.Duration
	// MaxRecords seals a batch at this many records (default 1024).
	MaxRecords int
	// MaxBytes seals a batch at this many payload bytes (default 256 KiB).
	MaxBytes int
	// MaxInflightBytes bounds the payload bytes published but not yet acknowledged;
	// Publish waits (bounded by its context) while it is exceeded (default 4 MiB,
	// FELIX_PUBLISH_INFLIGHT_BYTES).
	MaxInflightBytes int64
	// Ack selects the acknowledgement (default AckPerBatch).
	Ack AckMode
	// Offsets asks for the records' offsets and the duplicate flag in each result. Acks
	// then travel as JSON publish_ok (spec §8.10); without it the SDK uses binary acked
	// batches (0x0009, §5.2) when the broker negotiated them, whose acks carry no offsets.
	Offsets bool
	// Idempotent makes the Publisher an idempotent producer (spec §8.10; broker feature
	// idempotent_publish): it gets a random producer id, every batch keeps its request
	// id across re-sends, and a batch whose answer was lost (connection or stream ended
	// before the ack) is re-sent up to WithMaxAttempts times; the broker answers a
	// duplicate with the original offsets. Without it a lost answer is ErrIndeterminate and
	// the batch is never re-sent.
	Idempotent bool
	// Direct sends each keyed batch straight to the broker that leads its key's shard
	// (docs/client-protocol.md D17; broker feature redirects and route.routing): the routes
	// come from route_lookup on the dialled broker, asked in the background, refreshed
	// every 10 s and after a not_leader answer (the batch is then re-sent to the owner it
	// names). The first keyed batch waits for the first lookup (at most 5 s); until routes
	// are known, for unkeyed batches, and for an owner that cannot be
	// reached within 2 s (skipped for 10 s), batches go to the dialled broker, which
	// forwards them. Records of one key keep their order across a route change (the
	// Publisher waits for its batches in flight first). Off by default (D17).
	Direct bool
}

func (o *PublisherOptions) defaults() {
	if o.Linger == 0 {
		o.Linger = time.Millisecond
	}
	if o.MaxRecords <= 0 {
		o.MaxRecords = 1024
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 256 << 10
	}
	if o.MaxInflightBytes <= 0 {
		o.MaxInflightBytes = 4 << 20
	}
}

// PublishResult is the outcome of an acknowledged record.
type PublishResult struct {
	// HasOffsets is true when the broker reported offsets (PublisherOptions.Offsets on a
	// durable stream).
	HasOffsets bool
	// FirstOffset and LastOffset are the record's offset in its shard (equal for one
	// record). For a whole batch see BatchResult.
	FirstOffset, LastOffset uint64
	// Duplicate is true when an idempotent re-send found the batch already stored.
	Duplicate bool
	// HasShard is true when the broker reported the shard that stored the record (feature
	// routing_keys; only JSON acks carry it, so PublisherOptions.Offsets must be set).
	HasShard bool
	// Shard is the stream shard that stored the record (valid when HasShard).
	Shard uint32
}

// Publisher batches records for one stream (PublisherOptions). It is safe for concurrent
// use. Records are grouped into batches by routing key (Publish: no key; PublishKeyed: one
// batch per key, docs/client-protocol.md D15), each batch sealed on its own linger or size
// limit. Batches are written in the order they were sealed on one request stream (chosen
// again only when it fails), so records of one key from one goroutine keep their order;
// records of different keys may be reordered against each other. An idempotent publisher
// keeps the order of one key across a lost connection too: the batches in flight on the dead
// connection are sent again, in the order they were first sent, before any later batch.
// With PublisherOptions.Direct there is one request stream per shard owner (a key always
// maps to one of them between route changes, and a route change waits for the batches in
// flight), so the same order holds per key. Close it to flush.
type Publisher struct {
	c          *Client
	stream     string
	opts       PublisherOptions
	producerID string
	ctx        context.Context
	cancel     context.CancelFunc

	mu          sync.Mutex
	open        map[string]*batch // open batch per routing key ("" = no key)
	seq         uint64            // creation order of open batches (sealing order)
	closed      bool
	outstanding map[*batch]struct{}
	inflight    int64
	released    chan struct{} // closed and replaced when budget is released

	// awaiting counts, per session, the batches sent on it whose answer (or failure) has not
	// been delivered yet (guarded by mu; answered signals answeredCond when one reaches 0).
	awaiting     map[*session]int
	answeredCond *sync.Cond
	sendSeq      uint64 // first-send order of batches (sender goroutine only)

	qmu   sync.Mutex
	ready []*batch // sealed batches in order; idempotent re-sends first, in first-send order
	kick  chan struct{}
	done  chan struct{}
	// sessions: sticky, one stream per broker address ("" = the dialled broker) keeps the
	// batches sent there in order (sender goroutine only).
	sessions  map[string]*session
	direct    *directRouter // Direct: the routes (publish_direct.go); nil otherwise
	sentEpoch uint64        // direct's epoch of the last batch sent (sender goroutine only)
	names     [3][]byte     // tenant, namespace, stream for binary frames (checked once)

	// Recycled batch buffers (payload arena, record ends, payload slices): a completed
	// batch's buffers serve the next batch, so steady publishing allocates nothing. Kept
	// while their arenas total at most MaxInflightBytes + MaxBytes (spareBytes): the
	// buffers of every batch the in-flight budget admits, so a pipeline of many batches
	// in flight reuses them too (with a fixed count of 4, 40 batches of 100 KiB in flight
	// allocated 1.4 bytes per byte published; issue 22).
	spare      []batchBufs
	spareBytes int64
	// hintBytes and hintRecords size a batch's fresh buffers: the largest batch sealed so
	// far, so a new arena is allocated once at its size instead of by doubling.
	hintBytes, hintRecords int
}

type batchBufs struct {
	arena    []byte
	ends     []int
	payloads [][]byte
}

// batch is one publish request: records, its request id (kept across idempotent re-sends)
// and its outcome.
type batch struct {
	key      string // routing key ("" = none), kept across idempotent re-sends
	seq      uint64
	arena    []byte
	ends     []int
	payloads [][]byte
	id       uint64
	sent     uint64 // first-send order (Publisher.sendSeq; 0 = never sent)
	attempts int
	timer    interface{ Stop() bool }
	writing  bool // the sender is encoding it (guarded by Publisher.mu): buffers not recyclable
	done     chan struct{}
	res      BatchResult
	err      error
}

// BatchResult is the outcome of one batch as the broker acknowledged it.
type BatchResult struct {
	HasOffsets              bool
	FirstOffset, LastOffset uint64
	Duplicate               bool
	// HasShard and Shard: the shard that stored the batch, when the broker reported it
	// (see PublishResult.HasShard).
	HasShard bool
	Shard    uint32
	Records  int
}

// Pending is the future of one published record. The zero value is invalid.
type Pending struct {
	b *batch
	i int
}

// Done is closed when the record's batch has its outcome.
func (p Pending) Done() <-chan struct{} { return p.b.done }

// Wait returns the record's outcome: a PublishResult; ErrIndeterminate when the answer was
// lost (not re-sent unless the Publisher is idempotent); a *ServerError when the broker
// refused (errors.Is ErrRefused and the code's sentinel: ErrNotFound, ErrUnauthorized,
// ErrOverloaded, ...); ErrUnsupported when the broker lacks a negotiated capability. ctx
// ending first returns ctx.Err() and leaves the record in flight.
func (p Pending) Wait(ctx context.Context) (PublishResult, error) {
	select {
	case <-p.b.done:
	case <-ctx.Done():
		return PublishResult{}, ctx.Err()
	}
	if p.b.err != nil {
		return PublishResult{}, p.b.err
	}
	r := PublishResult{HasOffsets: p.b.res.HasOffsets, Duplicate: p.b.res.Duplicate, HasShard: p.b.res.HasShard, Shard: p.b.res.Shard}
	if r.HasOffsets {
		r.FirstOffset = p.b.res.FirstOffset + uint64(p.i)
		r.LastOffset = r.FirstOffset
	}
	return r, nil
}

// Batch returns the whole batch's outcome (valid after Done).
func (p Pending) Batch() (BatchResult, error) {
	<-p.b.done
	return p.b.res, p.b.err
}

// NewPublisher returns a Publisher for stream in the client's tenant and namespace. The
// stream must exist (Admin.CreateStream) unless the broker auto-creates streams.
// Errors: ErrInvalidArgument (empty, over-long or non-UTF-8 name), ErrClosed.
func (c *Client) NewPublisher(stream string, opts PublisherOptions) (*Publisher, error) {
	if stream == "" {
		return nil, fmt.Errorf("%w: empty stream name", ErrInvalidArgument)
	}
	if c.ctx.Err() != nil {
		return nil, ErrClosed
	}
	names := [3][]byte{[]byte(c.cfg.tenant), []byte(c.cfg.namespace), []byte(stream)}
	if _, err := proto.AppendPublishBatch(nil, &proto.PublishBatch{TenantID: names[0], Namespace: names[1], Stream: names[2]}); err != nil {
		return nil, fmt.Errorf("%w: stream name: %v", ErrInvalidArgument, err)
	}
	opts.defaults()
	p := &Publisher{names: names, c: c, stream: stream, opts: opts, outstanding: map[*batch]struct{}{}, open: map[string]*batch{},
		awaiting: map[*session]int{}, sessions: map[string]*session{},
		released: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
	p.answeredCond = sync.NewCond(&p.mu)
	if opts.Idempotent {
		var b [16]byte
		_, _ = rand.Read(b[:])
		p.producerID = hex.EncodeToString(b[:])
	}
	if opts.Direct {
		p.direct = &directRouter{p: p, ready: make(chan struct{})}
	}
	p.ctx, p.cancel = context.WithCancel(c.ctx)
	go p.sender()
	return p, nil
}

// ProducerID returns the idempotent producer id ("" when not idempotent).
func (p *Publisher) ProducerID() string { return p.producerID }

// Publish adds payload (copied) to the current unkeyed batch and returns its future; the
// broker picks the shard. It waits while MaxInflightBytes are unacknowledged (bounded by
// ctx). Errors: ErrClosed, ErrInvalidArgument (payload larger than the frame limit),
// ctx.Err().
func (p *Publisher) Publish(ctx context.Context, payload []byte) (Pending, error) {
	return p.publish(ctx, nil, payload)
}

// PublishKeyed is Publish with a routing key (docs/client-protocol.md D15): records with
// equal keys land on the same shard of the stream (core.RouteKey: modulo, or jump hash when
// the stream was created with routing jump_hash). key (1..proto.MaxKeyLen opaque bytes,
// copied) selects a batch of its own: one key per wire batch. An empty key is the same as
// Publish. Idempotent re-sends keep their key. Errors: those of Publish; ErrInvalidArgument
// for a key longer than proto.MaxKeyLen; the Pending fails with ErrUnsupported when the
// broker did not negotiate routing keys (flag 0x4000 / feature routing_keys).
func (p *Publisher) PublishKeyed(ctx context.Context, key, payload []byte) (Pending, error) {
	if len(key) > proto.MaxKeyLen {
		return Pending{}, fmt.Errorf("%w: routing key of %d bytes exceeds %d", ErrInvalidArgument, len(key), proto.MaxKeyLen)
	}
	return p.publish(ctx, key, payload)
}

func (p *Publisher) publish(ctx context.Context, key, payload []byte) (Pending, error) {
	n := int64(len(payload))
	if n > int64(p.c.cfg.maxFrame)-4096 {
		return Pending{}, fmt.Errorf("%w: payload of %d bytes exceeds the frame limit", ErrInvalidArgument, n)
	}
	if err := p.acquire(ctx, n); err != nil {
		return Pending{}, err
	}
	p.mu.Lock()
	if p.closed || p.ctx.Err() != nil {
		p.mu.Unlock()
		p.releaseBytes(n)
		return Pending{}, ErrClosed
	}
	b := p.open[string(key)]
	if b == nil {
		p.seq++
		b = &batch{key: string(key), seq: p.seq, done: make(chan struct{})}
		if n := len(p.spare); n > 0 {
			bb := p.spare[n-1]
			p.spare[n-1] = batchBufs{}
			p.spare = p.spare[:n-1]
			p.spareBytes -= int64(cap(bb.arena))
			b.arena, b.ends, b.payloads = bb.arena, bb.ends, bb.payloads
		} else if p.hintRecords > 0 {
			b.arena, b.ends = make([]byte, 0, max(p.hintBytes, len(payload))), make([]int, 0, p.hintRecords)
			b.payloads = make([][]byte, 0, p.hintRecords)
		}
		p.open[b.key] = b
		p.outstanding[b] = struct{}{}
		if p.opts.Linger > 0 {
			b.timer = p.c.cfg.afterFunc(p.opts.Linger, func() { p.sealIf(b) })
		}
	}
	b.arena = append(b.arena, payload...)
	b.ends = append(b.ends, len(b.arena))
	i := len(b.ends) - 1
	if p.opts.Linger < 0 || len(b.ends) >= p.opts.MaxRecords || len(b.arena) >= p.opts.MaxBytes {
		p.sealOneLocked(b)
	}
	p.mu.Unlock()
	return Pending{b: b, i: i}, nil
}

// PublishSync publishes payload, sends its batch at once and waits for the outcome.
func (p *Publisher) PublishSync(ctx context.Context, payload []byte) (PublishResult, error) {
	return p.PublishKeyedSync(ctx, nil, payload)
}

// PublishKeyedSync is PublishKeyed that sends the key's batch at once and waits for the
// outcome.
func (p *Publisher) PublishKeyedSync(ctx context.Context, key, payload []byte) (PublishResult, error) {
	pd, err := p.PublishKeyed(ctx, key, payload)
	if err != nil {
		return PublishResult{}, err
	}
	p.sealIf(pd.b)
	return pd.Wait(ctx)
}

// Flush sends the current batch and waits until every batch published so far has its
// outcome (or ctx ends). It returns the first batch error seen, if any.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	p.sealLocked()
	waitFor := make([]*batch, 0, len(p.outstanding))
	for b := range p.outstanding {
		waitFor = append(waitFor, b)
	}
	p.mu.Unlock()
	var first error
	for _, b := range waitFor {
		select {
		case <-b.done:
			if b.err != nil && first == nil {
				first = b.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

// Close flushes (bounded by ctx), then stops the Publisher; batches still in flight when
// ctx ends fail with ErrClosed. Publish after Close returns ErrClosed.
func (p *Publisher) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	if p.direct != nil {
		p.direct.wg.Wait()
	}
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// sealIf seals b if it is still the open batch of its key (linger expiry, PublishSync).
func (p *Publisher) sealIf(b *batch) {
	p.mu.Lock()
	if p.open[b.key] == b {
		p.sealOneLocked(b)
	}
	p.mu.Unlock()
}

// sealLocked hands every open batch to the sender, oldest first. Caller holds p.mu.
func (p *Publisher) sealLocked() {
	switch len(p.open) {
	case 0:
		return
	case 1:
		for _, b := range p.open {
			p.sealOneLocked(b)
		}
		return
	}
	open := make([]*batch, 0, len(p.open))
	for _, b := range p.open {
		open = append(open, b)
	}
	slices.SortFunc(open, func(a, b *batch) int { return cmp.Compare(a.seq, b.seq) })
	for _, b := range open {
		p.sealOneLocked(b)
	}
}

// sealOneLocked hands the open batch b (the one p.open holds for b.key) to the sender.
// Caller holds p.mu.
func (p *Publisher) sealOneLocked(b *batch) {
	delete(p.open, b.key)
	p.hintBytes = min(max(p.hintBytes, len(b.arena)), p.opts.MaxBytes)
	p.hintRecords = min(max(p.hintRecords, len(b.ends)), p.opts.MaxRecords)
	if b.timer != nil {
		b.timer.Stop()
	}
	if cap(b.payloads) >= len(b.ends) {
		b.payloads = b.payloads[:len(b.ends)]
	} else {
		b.payloads = make([][]byte, len(b.ends))
	}
	start := 0
	for i, end := range b.ends {
		b.payloads[i] = b.arena[start:end:end]
		start = end
	}
	b.res.Records = len(b.ends)
	if p.closed {
		p.completeLocked(b, BatchResult{}, ErrClosed)
		return
	}
	p.enqueue(b, false)
}

// enqueue hands b to the sender without blocking (MaxInflightBytes bounds the queue).
// A batch handed back (front: a re-send, or a batch the sender took but held back for the
// re-sends) goes ahead of every batch never sent, and a re-send after the re-sends first sent
// before it: the batches of a dead connection go out again in their first-send order, and
// then the unsent ones in their sealing order.
func (p *Publisher) enqueue(b *batch, front bool) {
	p.qmu.Lock()
	if front {
		i := 0
		for i < len(p.ready) && p.ready[i].sent != 0 && (b.sent == 0 || p.ready[i].sent < b.sent) {
			i++
		}
		p.ready = append(p.ready, nil)
		copy(p.ready[i+1:], p.ready[i:])
		p.ready[i] = b
	} else {
		p.ready = append(p.ready, b)
	}
	p.qmu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// acquire charges n bytes of the in-flight budget, waiting for releases.
func (p *Publisher) acquire(ctx context.Context, n int64) error {
	for {
		p.mu.Lock()
		if p.inflight == 0 || p.inflight+n <= p.opts.MaxInflightBytes {
			p.inflight += n
			p.mu.Unlock()
			return nil
		}
		ch := p.released
		// Send what is buffered so the budget can drain.
		p.sealLocked()
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
}

func (p *Publisher) releaseBytes(n int64) {
	p.mu.Lock()
	p.inflight -= n
	close(p.released)
	p.released = make(chan struct{})
	p.mu.Unlock()
}

// complete records b's outcome and releases its budget.
func (p *Publisher) complete(b *batch, res BatchResult, err error) {
	p.mu.Lock()
	p.completeLocked(b, res, err)
	p.mu.Unlock()
}

func (p *Publisher) completeLocked(b *batch, res BatchResult, err error) {
	if _, ok := p.outstanding[b]; !ok {
		return
	}
	delete(p.outstanding, b)
	res.Records = b.res.Records
	b.res, b.err = res, err
	p.inflight -= int64(len(b.arena))
	close(p.released)
	p.released = make(chan struct{})
	close(b.done)
	if !b.writing {
		p.recycleLocked(b)
	} // else setWriting(b, false) recycles them: the answer came before the write returned
}

// recycleLocked keeps a completed batch's buffers for the next batch (up to the in-flight
// budget's worth, see Publisher.spare): the outcome never refers to the payloads. Caller
// holds p.mu; b is no longer being encoded.
func (p *Publisher) recycleLocked(b *batch) {
	if c := int64(cap(b.arena)); c <= 2*int64(p.opts.MaxBytes)+1<<16 &&
		p.spareBytes+c <= p.opts.MaxInflightBytes+int64(p.opts.MaxBytes) {
		clear(b.payloads)
		p.spare = append(p.spare, batchBufs{arena: b.arena[:0], ends: b.ends[:0], payloads: b.payloads[:0]})
		p.spareBytes += c
	}
	b.arena, b.ends, b.payloads = nil, nil, nil
}

// sender writes sealed batches in order and re-sends idempotent batches whose answer was
// lost. It is the only goroutine that writes a Publisher's batches.
func (p *Publisher) sender() {
	defer close(p.done)
	for {
		p.qmu.Lock()
		var b *batch
		if len(p.ready) > 0 {
			b = p.ready[0]
			p.ready[0] = nil
			p.ready = p.ready[1:]
		}
		p.qmu.Unlock()
		if b == nil {
			select {
			case <-p.kick:
				continue
			case <-p.ctx.Done():
				p.failAll(ErrClosed)
				return
			}
		}
		p.send(b)
	}
}

// failAll ends every batch that has no outcome yet.
func (p *Publisher) failAll(err error) {
	<-p.ctx.Done()
	p.mu.Lock()
	for b := range p.outstanding {
		p.completeLocked(b, BatchResult{}, err)
	}
	p.mu.Unlock()
}

// send writes b on a request stream; its answer arrives through the session's reader.
func (p *Publisher) send(b *batch) {
	if b.id == 0 {
		b.id = p.c.nextID()
	}
	for {
		b.attempts++
		addr := p.targetOf(b)
		if cur := p.sessions[addr]; cur == nil || cur.isDead() {
			if p.opts.Idempotent && cur != nil {
				// Let the dead session's batches queue their re-sends first, then take
				// the oldest: b goes back behind them, ahead of every later batch.
				p.drainDead(cur)
				delete(p.sessions, addr)
				b.attempts--
				p.enqueue(b, true)
				return
			}
			s, err := p.sessionAt(addr)
			if err != nil && addr != "" && p.ctx.Err() == nil {
				b.attempts-- // the owner is now marked down: through the dialled broker
				continue
			}
			if err != nil {
				p.complete(b, BatchResult{}, closedOr(p.c, err))
				return
			}
			p.sessions[addr] = s
		}
		s := p.sessions[addr]
		frame, binary, err := p.encoder(s.caps, b)
		if err != nil {
			p.complete(b, BatchResult{}, err)
			return
		}
		p.setWriting(b, true)
		if p.opts.Ack == AckNone {
			err = s.send(b.id, nil, frame)
			p.setWriting(b, false)
			if errors.Is(err, errNotSent) && b.attempts < p.c.cfg.maxAttempts {
				continue
			}
			p.complete(b, BatchResult{}, err)
			return
		}
		if b.sent == 0 {
			p.sendSeq++
			b.sent = p.sendSeq
		}
		p.mu.Lock()
		p.awaiting[s]++
		p.mu.Unlock()
		// settled after answered: a re-send is queued before drainDead can see it settled.
		c := &call{fn: func(r reply, err error) { p.answered(b, binary, r, err); p.settled(s) }}
		err = s.send(b.id, c, frame)
		if err != nil {
			p.settled(s) // session.send returns an error only when c will never be called
		}
		p.setWriting(b, false)
		if errors.Is(err, errNotSent) && b.attempts < p.c.cfg.maxAttempts {
			continue // nothing left the client: safe to send again
		}
		if err != nil {
			p.complete(b, BatchResult{}, err)
		}
		return
	}
}

// setWriting marks b as being encoded (its buffers are not recyclable meanwhile); ending
// it recycles the buffers of a batch that was completed in between.
func (p *Publisher) setWriting(b *batch, on bool) {
	p.mu.Lock()
	b.writing = on
	if _, ok := p.outstanding[b]; !on && !ok && b.arena != nil {
		p.recycleLocked(b)
	}
	p.mu.Unlock()
}

// encoder chooses the batch's encoding from the negotiated capabilities.
func (p *Publisher) encoder(caps Capabilities, b *batch) (func([]byte) []byte, bool, error) {
	o := p.opts
	if o.Idempotent && !caps.Has(proto.FeatureIdempotentPublish) {
		return nil, false, fmt.Errorf("%w: feature %q", ErrUnsupported, proto.FeatureIdempotentPublish)
	}
	keyed := b.key != ""
	useBinary := o.Ack == AckNone ||
		(!o.Offsets && caps.Flags&proto.FlagBinaryPublishAcked != 0 &&
			(!o.Idempotent || caps.Flags&proto.FlagPublishIdempotent != 0) &&
			(!keyed || caps.Flags&proto.FlagPublishKeyed != 0))
	if keyed && useBinary && caps.Flags&proto.FlagPublishKeyed == 0 {
		return nil, false, fmt.Errorf("%w: flag %#04x (routing key)", ErrUnsupported, proto.FlagPublishKeyed)
	}
	if keyed && !useBinary && !caps.Has(proto.FeatureRoutingKeys) {
		return nil, false, fmt.Errorf("%w: feature %q", ErrUnsupported, proto.FeatureRoutingKeys)
	}
	var key []byte
	if keyed {
		key = []byte(b.key)
	}
	if useBinary {
		pb := proto.PublishBatch{TenantID: p.names[0], Namespace: p.names[1], Stream: p.names[2], Key: key, Payloads: b.payloads}
		if o.Ack != AckNone {
			pb.Acked, pb.RequestID, pb.AckMode = true, b.id, proto.AckPerBatch
			if o.Ack == AckPerMessage {
				pb.AckMode = proto.AckPerMessage
			}
			if o.Idempotent {
				pb.ProducerID = []byte(p.producerID)
			}
		}
		return func(dst []byte) []byte {
			out, _ := proto.AppendPublishBatch(dst, &pb)
			return out
		}, true, nil
	}
	id := b.id
	m := &proto.JSONPublishBatch{TenantID: p.c.cfg.tenant, Namespace: p.c.cfg.namespace, Stream: p.stream, Key: key, Payloads: b.payloads, RequestID: &id, Ack: proto.JSONAckPerBatch}
	if o.Ack == AckPerMessage {
		m.Ack = proto.JSONAckPerMessage
	}
	if o.Idempotent {
		m.ProducerID, m.Idempotent = p.producerID, true
	}
	return func(dst []byte) []byte { return proto.AppendMessage(dst, m) }, false, nil
}

// answered runs on a session reader: it must not block. A lost answer of an idempotent
// batch queues a re-send with the same request id.
func (p *Publisher) answered(b *batch, binary bool, r reply, err error) {
	if err == nil {
		err = replyError(r)
	}
	if err != nil {
		if p.redirected(b, err) {
			return
		}
		if p.opts.Idempotent && errors.Is(err, ErrIndeterminate) && b.attempts < p.c.cfg.maxAttempts && p.ctx.Err() == nil {
			p.enqueue(b, true)
			return
		}
		p.complete(b, BatchResult{}, err)
		return
	}
	var res BatchResult
	switch m := r.msg.(type) {
	case *proto.PublishOK:
		res.Duplicate = m.Duplicate
		if m.FirstOffset != nil && m.LastOffset != nil {
			res.HasOffsets, res.FirstOffset, res.LastOffset = true, *m.FirstOffset, *m.LastOffset
		}
		if m.Shard != nil {
			res.HasShard, res.Shard = true, *m.Shard
		}
	case nil:
		if !binary {
			err = fmt.Errorf("%w: binary ack for a JSON publish", ErrProtocol)
		}
	default:
		err = unexpected(m, "publish_ok")
	}
	p.complete(b, res, err)
}

// settled records that a batch sent on s has had its answer or failure delivered.
func (p *Publisher) settled(s *session) {
	p.mu.Lock()
	if p.awaiting[s]--; p.awaiting[s] <= 0 {
		delete(p.awaiting, s)
		p.answeredCond.Broadcast()
	}
	p.mu.Unlock()
}

// drainDead waits until every batch sent on the dead session old has had its failure
// delivered and its re-send queued (session.fail delivers them right after marking the
// session dead), so that an idempotent publisher sends them again, in first-send order,
// before anything newer on a new session.
func (p *Publisher) drainDead(old *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.awaiting[old] > 0 {
		p.answeredCond.Wait()
	}
}

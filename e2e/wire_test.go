package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"felix/netq"
	"felix/proto"
)

// The SDK has no subscription or group calls yet, so the subscriber and the group
// consumers below speak the client protocol directly (proto + netq), exactly as the SDK
// will: auth with client_flags, subscribe per shard from an offset, read the shared event
// batches; group_poll / group_ack on a request stream.

const tenant, namespace = "default", "default"

// wireConn is one authenticated QUIC connection with one request stream.
type wireConn struct {
	conn *quic.Conn
	st   *quic.Stream
	fr   *netq.FrameReader
	buf  []byte
	out  []byte
}

// dialWire connects to addr pinning fp, opens a request stream and authenticates it.
func dialWire(ctx context.Context, addr, fp, token string) (*wireConn, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := quic.DialAddr(dctx, addr, netq.PinnedClientTLS(fp), &quic.Config{MaxIncomingUniStreams: 16, MaxIdleTimeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	st, err := conn.OpenStreamSync(dctx)
	if err != nil {
		conn.CloseWithError(0, "")
		return nil, err
	}
	w := &wireConn{conn: conn, st: st, fr: netq.NewFrameReader(st, proto.DefaultMaxFrameBytes)}
	flags := proto.KnownFlags
	if err := w.send(&proto.Auth{TenantID: tenant, Token: token, ClientFlags: &flags,
		Features: []string{proto.FeatureErrorCodes, proto.FeatureGroups}}); err != nil {
		w.close()
		return nil, err
	}
	m, err := w.recv(dctx)
	if err != nil {
		w.close()
		return nil, err
	}
	ok, isOK := m.(*proto.AuthOK)
	if !isOK || ok.ServerFlags&proto.FlagEventBatchOffsets == 0 {
		w.close()
		return nil, fmt.Errorf("auth answered %T %+v", m, m)
	}
	return w, nil
}

func (w *wireConn) close() { w.conn.CloseWithError(0, "") }

// closeOn closes w when ctx ends or when exited (the broker process this connection
// reached) is closed, until the returned stop is called. Noticing the exit stands in for
// the QUIC stateless reset a restarted broker does not send yet (docs/soak.md, "Known
// findings"): without it a connection to a killed broker lingers until its idle timeout.
func (w *wireConn) closeOn(ctx context.Context, exited <-chan struct{}) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-exited:
		case <-done:
			return
		}
		w.close()
	}()
	return func() { close(done) }
}

// procWatch returns the exit channel of the broker process currently running.
type procWatch func() <-chan struct{}

func (w *wireConn) send(m proto.Message) error {
	w.out = proto.AppendMessage(w.out[:0], m)
	_, err := w.st.Write(w.out)
	return err
}

// recv reads one JSON message, bounded by ctx's deadline (or 10 s).
func (w *wireConn) recv(ctx context.Context) (proto.Message, error) {
	dl, ok := ctx.Deadline()
	if !ok || time.Until(dl) > 10*time.Second {
		dl = time.Now().Add(10 * time.Second)
	}
	w.st.SetReadDeadline(dl)
	h, err := w.fr.ReadHeader()
	if err != nil {
		return nil, err
	}
	w.buf, err = w.fr.ReadBody(h, w.buf)
	if err != nil {
		return nil, err
	}
	if h.Flags != 0 {
		return nil, fmt.Errorf("unexpected binary frame flags %#x on the request stream", h.Flags)
	}
	return proto.DecodeMessage(w.buf)
}

// index maps a record key to its corpus entry.
type index struct {
	byPath map[string]int32
	files  []file
}

func newIndex(files []file) *index {
	ix := &index{byPath: make(map[string]int32, len(files)), files: files}
	for i, f := range files {
		ix.byPath[f.path] = int32(i)
	}
	return ix
}

// lookup returns the corpus entry of a delivered payload, or -1 when it is not a record
// some publisher sent (unknown key, or content whose SHA-256 differs).
func (ix *index) lookup(p []byte) int32 {
	key, content, err := decodeRecord(p)
	if err != nil {
		return -1
	}
	i, ok := ix.byPath[string(key)]
	if !ok || sha256.Sum256(content) != ix.files[i].sum {
		return -1
	}
	return i
}

// shardSub follows one shard from offset 0 across broker restarts, resuming each time from
// the last offset it saw + 1, and records what it saw.
type shardSub struct {
	shard   uint32
	next    atomic.Uint64 // next expected offset
	recs    []int32       // corpus index per offset (-1 = foreign)
	gaps    int           // offsets skipped (a batch starting past next)
	dups    int           // offsets delivered again (a batch starting below next)
	skipped uint64        // skipped_before reported by the broker
	resumes int           // subscribes after the first
	lastErr error
}

// run subscribes until ctx ends; transport failures redial with jittered backoff.
func (s *shardSub) run(ctx context.Context, ix *index, proc procWatch, addr, fp, token, stream string) {
	first := true
	for ctx.Err() == nil {
		err := s.once(ctx, ix, proc, addr, fp, token, stream, first)
		if ctx.Err() != nil {
			return
		}
		s.lastErr = err
		first = false
		s.resumes++
		sleepCtx(ctx, time.Duration(20+rand.IntN(80))*time.Millisecond)
	}
}

func (s *shardSub) once(ctx context.Context, ix *index, proc procWatch, addr, fp, token, stream string, first bool) error {
	exited := proc()
	w, err := dialWire(ctx, addr, fp, token)
	if err != nil {
		return err
	}
	defer w.close()
	defer w.closeOn(ctx, exited)()
	start := &proto.Start{Kind: proto.StartOffset, Offset: s.next.Load()}
	if first {
		start = &proto.Start{Kind: proto.StartEarliest}
	}
	shard := s.shard
	if err := w.send(&proto.Subscribe{TenantID: tenant, Namespace: namespace, Stream: stream, Start: start, Shard: &shard}); err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ev, err := w.conn.AcceptUniStream(actx)
	cancel()
	if err != nil {
		m, rerr := w.recv(ctx)
		return fmt.Errorf("no event stream (%v); answer %T %+v %v", err, m, m, rerr)
	}
	// The answer on the request stream must be subscribed.
	m, err := w.recv(ctx)
	if err != nil {
		return err
	}
	if _, ok := m.(*proto.Subscribed); !ok {
		return fmt.Errorf("subscribe answered %T %+v", m, m)
	}
	fr := netq.NewFrameReader(ev, proto.DefaultMaxFrameBytes)
	var buf []byte
	var b proto.EventBatch
	for {
		h, err := fr.ReadHeader()
		if err != nil {
			return err
		}
		if buf, err = fr.ReadBody(h, buf); err != nil {
			return err
		}
		if h.Flags == 0 {
			continue // event_stream_hello
		}
		if err := proto.DecodeEventBatch(h.Flags, buf, &b); err != nil {
			return err
		}
		if !b.WithOffsets {
			return errors.New("event batch without offsets")
		}
		s.skipped += b.SkippedBefore
		s.accept(ix, &b)
	}
}

// accept appends a batch's records at their offsets, counting gaps and re-deliveries.
func (s *shardSub) accept(ix *index, b *proto.EventBatch) {
	next := s.next.Load()
	off := b.BaseOffset
	if off > next {
		s.gaps += int(off - next)
		for ; next < off; next++ {
			s.recs = append(s.recs, -2) // never seen
		}
	}
	for _, p := range b.Payloads {
		if off < next {
			s.dups++
		} else {
			s.recs = append(s.recs, ix.lookup(p))
			next++
		}
		off++
	}
	s.next.Store(next)
}

// groupState is what the two consumers of the group saw, shared between them.
type groupState struct {
	mu         sync.Mutex
	deliveries []map[uint64]uint32 // per shard: offset → deliveries seen
	foreign    int                 // delivered payloads no publisher sent
	refused    int                 // acked offsets the broker refused (lease ended by a restart)
	polls      int
	resumes    int
	maxCount   uint32
}

func newGroupState(shards int) *groupState {
	g := &groupState{deliveries: make([]map[uint64]uint32, shards)}
	for i := range g.deliveries {
		g.deliveries[i] = map[uint64]uint32{}
	}
	return g
}

// distinct returns how many offsets below end[shard] the group delivered, per shard.
func (g *groupState) covered(end []uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for s, e := range end {
		for off := uint64(0); off < e; off++ {
			if g.deliveries[s][off] == 0 {
				return false
			}
		}
	}
	return true
}

// consume polls every shard in turn and acks what it got, until ctx ends.
func (g *groupState) consume(ctx context.Context, ix *index, proc procWatch, addr, fp, token, stream, group string, shards int) {
	var reqID uint64
	for ctx.Err() == nil {
		exited := proc()
		w, err := dialWire(ctx, addr, fp, token)
		if err != nil {
			sleepCtx(ctx, time.Duration(20+rand.IntN(80))*time.Millisecond)
			continue
		}
		stop := w.closeOn(ctx, exited)
		for shard := 0; ctx.Err() == nil; shard = (shard + 1) % shards {
			reqID++
			if err = w.send(&proto.GroupPoll{TenantID: tenant, Namespace: namespace, Stream: stream, Shard: uint32(shard),
				Group: group, MaxRecords: 256, MaxWaitMs: 50, RequestID: reqID}); err != nil {
				break
			}
			m, err := w.recv(ctx)
			if err != nil {
				break
			}
			recs, ok := m.(*proto.GroupRecords)
			if !ok {
				continue // error (e.g. overloaded while the shard opens): poll again
			}
			if len(recs.Records) == 0 {
				continue
			}
			offs := make([]uint64, len(recs.Records))
			g.mu.Lock()
			g.polls++
			for i, r := range recs.Records {
				offs[i] = r.Offset
				if ix.lookup(r.Payload) < 0 {
					g.foreign++
				}
				g.deliveries[shard][r.Offset]++
				g.maxCount = max(g.maxCount, r.Delivery)
			}
			g.mu.Unlock()
			reqID++
			if err = w.send(&proto.GroupAck{TenantID: tenant, Namespace: namespace, Stream: stream, Shard: uint32(shard),
				Group: group, Offsets: offs, RequestID: reqID}); err != nil {
				break
			}
			m, err = w.recv(ctx)
			if err != nil {
				break
			}
			if _, ok := m.(*proto.GroupOK); !ok {
				g.mu.Lock()
				g.refused++
				g.mu.Unlock()
			}
		}
		stop()
		w.close()
		g.mu.Lock()
		g.resumes++
		g.mu.Unlock()
		sleepCtx(ctx, time.Duration(20+rand.IntN(80))*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

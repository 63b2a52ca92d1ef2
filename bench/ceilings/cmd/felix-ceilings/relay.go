package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/quic-go/quic-go"
)

// dialStream dials the server on its own connection and opens one stream.
func dialStream(ctx context.Context, c common) (*quic.Conn, *quic.Stream, error) {
	conn, err := quic.DialAddr(ctx, c.addr, clientTLS(c.fp), clientQUIC())
	if err != nil {
		return nil, nil, err
	}
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		conn.CloseWithError(0, "")
		return nil, nil, err
	}
	return conn, s, nil
}

// openRole dials and writes the relay header (role, pair id).
func openRole(ctx context.Context, c common, role byte, id uint32) (*quic.Conn, *quic.Stream, error) {
	conn, s, err := dialStream(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	h := [relayHeader]byte{role}
	binary.LittleEndian.PutUint32(h[1:], id)
	if _, err := s.Write(h[:]); err != nil {
		conn.CloseWithError(0, "")
		return nil, nil, err
	}
	return conn, s, nil
}

// subCount is what the relay's subscriber counted.
type subCount struct {
	delivered, inWin int64
	h                *hdrhistogram.Histogram
	err              error
}

// relayClient: one publisher connection writing --batch records per stream write, one
// subscriber connection reading them through the relay; latency is send → delivery.
func relayClient(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ExitOnError)
	var c common
	c.register(fs)
	batch := fs.Int("batch", 64, "records per stream write (the publisher's batch)")
	_ = fs.Parse(args)
	if err := c.check(); err != nil {
		return err
	}
	ctx := context.Background()
	id := rand.Uint32()
	subConn, sub, err := openRole(ctx, c, roleSubscriber, id)
	if err != nil {
		return err
	}
	defer subConn.CloseWithError(0, "")
	pubConn, pub, err := openRole(ctx, c, rolePublisher, id)
	if err != nil {
		return err
	}
	defer pubConn.CloseWithError(0, "")
	w := newWindow(c)
	done := make(chan subCount, 1)
	go func() { done <- readRelayed(sub, c.size, w) }()
	sent, err := publishRecords(pub, c.size, *batch, w)
	if err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	var sc subCount
	select {
	case sc = <-done:
	case <-time.After(c.drain):
		return fmt.Errorf("unaccounted: %d sent, subscriber still short after the %v drain", sent, c.drain)
	}
	if sc.err != nil {
		return fmt.Errorf("subscriber: %w", sc.err)
	}
	if sc.delivered != sent {
		return fmt.Errorf("unaccounted: %d sent, %d delivered", sent, sc.delivered)
	}
	r := result{System: "quic-relay", Shape: shape{Name: c.name, Kind: "pubsub", Payload: c.size, Batch: *batch, Fanout: 1},
		Sent: sent, Delivered: sc.delivered, Latency: summarize(sc.h), LatencyFrom: "send time → delivery at the subscriber (two QUIC hops through the relay)",
		Settings: map[string]any{"batch": *batch, "size": c.size}}
	return emit(r, w, sc.inWin, sc.inWin*int64(c.size), c.duration)
}

// publishRecords writes batches of records until the window ends, then closes the stream.
func publishRecords(s *quic.Stream, size, batch int, w *window) (int64, error) {
	buf := make([]byte, size*batch)
	var seq uint64
	for {
		t := time.Now()
		if !t.Before(w.end) {
			return int64(seq), s.Close()
		}
		for i := 0; i < batch; i++ {
			putStamp(buf[i*size:], seq, t)
			seq++
		}
		if _, err := s.Write(buf); err != nil {
			return int64(seq), err
		}
	}
}

// readRelayed reads records until the relay closes the stream.
func readRelayed(s *quic.Stream, size int, w *window) subCount {
	sc := subCount{h: newHist()}
	br := bufio.NewReaderSize(s, 256<<10)
	rec := make([]byte, size)
	var bk books
	for {
		if _, err := io.ReadFull(br, rec); err != nil {
			if !errors.Is(err, io.EOF) {
				sc.err = err
			}
			return sc
		}
		now := time.Now()
		t, err := bk.take(rec)
		if err != nil {
			sc.err = err
			return sc
		}
		sc.delivered++
		if w.in(now) {
			sc.inWin++
		}
		if w.in(t) {
			record(sc.h, now.Sub(t))
		}
	}
}

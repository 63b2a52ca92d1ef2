package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/quic-go/quic-go"
)

// echoCount is one echo connection's books.
type echoCount struct {
	sent, answered, inWin int64
	h                     *hdrhistogram.Histogram
	err                   error
}

// echoClient: --clients connections, one stream each, --inflight requests of --size
// bytes outstanding per stream (one stream write per request); latency is send → answer.
func echoClient(args []string) error {
	fs := flag.NewFlagSet("echo", flag.ExitOnError)
	var c common
	c.register(fs)
	clients := fs.Int("clients", 50, "connections")
	inflight := fs.Int("inflight", 1, "requests in flight per connection")
	_ = fs.Parse(args)
	if err := c.check(); err != nil {
		return err
	}
	ctx := context.Background()
	streams := make([]*quic.Stream, *clients)
	for i := range streams {
		conn, s, err := dialStream(ctx, c)
		if err != nil {
			return err
		}
		defer conn.CloseWithError(0, "")
		streams[i] = s
	}
	w := newWindow(c)
	counts := make([]echoCount, *clients)
	var wg sync.WaitGroup
	for i, s := range streams {
		wg.Add(1)
		go func() { defer wg.Done(); counts[i] = echoConn(s, c.size, *inflight, w, c.drain) }()
	}
	wg.Wait()
	h := newHist()
	var sent, answered, inWin int64
	for i, ec := range counts {
		if ec.err != nil {
			return fmt.Errorf("connection %d: %w", i, ec.err)
		}
		if ec.answered != ec.sent {
			return fmt.Errorf("unaccounted: connection %d: %d sent, %d answered", i, ec.sent, ec.answered)
		}
		sent, answered, inWin = sent+ec.sent, answered+ec.answered, inWin+ec.inWin
		h.Merge(ec.h)
	}
	r := result{System: "quic-echo", Shape: shape{Name: c.name, Kind: "cache", Payload: c.size, Clients: *clients, InFlight: *inflight},
		Sent: sent, Delivered: answered, Latency: summarize(h), LatencyFrom: "send time → answer (one QUIC round trip)",
		Settings: map[string]any{"clients": *clients, "inflight": *inflight, "size": c.size}}
	return emit(r, w, inWin, inWin*int64(c.size), c.duration)
}

// echoConn drives one stream: a writer keeps inflight requests outstanding until the
// window ends, then closes its side; the reader counts answers until the server's FIN.
func echoConn(s *quic.Stream, size, inflight int, w *window, drain time.Duration) echoCount {
	ec := echoCount{h: newHist()}
	tokens := make(chan struct{}, inflight)
	for range inflight {
		tokens <- struct{}{}
	}
	read := make(chan error, 1)
	go func() { read <- readAnswers(s, size, w, tokens, &ec) }()
	req := make([]byte, size)
	var werr error
	for werr == nil {
		<-tokens
		t := time.Now()
		if !t.Before(w.end) {
			break
		}
		putStamp(req, uint64(ec.sent), t)
		if _, werr = s.Write(req); werr == nil {
			ec.sent++
		}
	}
	if werr != nil {
		ec.err = werr
		return ec
	}
	s.Close()
	select {
	case err := <-read:
		ec.err = err
	case <-time.After(drain):
		ec.err = fmt.Errorf("answers still missing after the %v drain", drain)
	}
	return ec
}

// readAnswers reads size-byte answers, checks their order and returns a token per answer.
func readAnswers(s *quic.Stream, size int, w *window, tokens chan<- struct{}, ec *echoCount) error {
	br := bufio.NewReaderSize(s, 64<<10)
	rec := make([]byte, size)
	var bk books
	for {
		if _, err := io.ReadFull(br, rec); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		now := time.Now()
		t, err := bk.take(rec)
		if err != nil {
			return err
		}
		ec.answered++
		if w.in(now) {
			ec.inWin++
		}
		if w.in(t) {
			record(ec.h, now.Sub(t))
		}
		tokens <- struct{}{}
	}
}

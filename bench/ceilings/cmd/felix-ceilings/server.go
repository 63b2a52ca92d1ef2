package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/quic-go/quic-go"
)

// Relay stream roles: the first byte a client writes on its stream, followed by a
// 4-byte little-endian pair id that matches a publisher with its subscriber.
const (
	rolePublisher  = 'P'
	roleSubscriber = 'S'
	relayHeader    = 5
)

// serve runs the echo or relay server until SIGTERM/SIGINT, after writing
// {"addr","fingerprint","pid"} to --ready.
func serve(args []string) error {
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	mode := fs.String("mode", "echo", "echo (each stream written back) or relay (publisher stream copied to its subscriber)")
	ready := fs.String("ready", "", "ready file")
	_ = fs.Parse(args)
	if *mode != "echo" && *mode != "relay" {
		return fmt.Errorf("--mode %q: want echo or relay", *mode)
	}
	cert, err := selfSigned()
	if err != nil {
		return err
	}
	tr, ln, err := listen(cert)
	if err != nil {
		return err
	}
	defer tr.Close()
	defer ln.Close()
	b, _ := json.Marshal(map[string]any{"addr": ln.Addr().String(), "fingerprint": fingerprint(cert.Certificate[0]), "pid": os.Getpid()})
	if err := os.WriteFile(*ready+".tmp", b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(*ready+".tmp", *ready); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rl := &relay{pairs: map[uint32]chan *quic.Stream{}}
	for {
		conn, err := ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go serveConn(ctx, conn, *mode, rl)
	}
}

// serveConn handles every stream the client opens on conn.
func serveConn(ctx context.Context, conn *quic.Conn, mode string, rl *relay) {
	defer conn.CloseWithError(0, "")
	for {
		s, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		if mode == "echo" {
			go echoStream(s)
		} else {
			go rl.stream(s)
		}
	}
}

// echoStream writes back every byte read, one write per read, then closes its side.
func echoStream(s *quic.Stream) {
	buf := make([]byte, 64<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			if _, werr := s.Write(buf[:n]); werr != nil {
				s.CancelRead(0)
				return
			}
		}
		if err != nil {
			s.Close()
			return
		}
	}
}

// relay matches publisher and subscriber streams by pair id.
type relay struct {
	mu    sync.Mutex
	pairs map[uint32]chan *quic.Stream
}

func (r *relay) slot(id uint32) chan *quic.Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch, ok := r.pairs[id]
	if !ok {
		ch = make(chan *quic.Stream, 1)
		r.pairs[id] = ch
	}
	return ch
}

func (r *relay) drop(id uint32) {
	r.mu.Lock()
	delete(r.pairs, id)
	r.mu.Unlock()
}

// stream reads the role header; a subscriber is parked in its pair's slot, a publisher
// waits for it and copies its stream onto the subscriber's (64 KiB reads, one write
// each), closing the subscriber's stream when the publisher's ends.
func (r *relay) stream(s *quic.Stream) {
	var h [relayHeader]byte
	if _, err := io.ReadFull(s, h[:]); err != nil {
		s.CancelRead(1)
		s.CancelWrite(1)
		return
	}
	id := binary.LittleEndian.Uint32(h[1:])
	switch h[0] {
	case roleSubscriber:
		r.slot(id) <- s
	case rolePublisher:
		sub := <-r.slot(id)
		r.drop(id)
		buf := make([]byte, 64<<10)
		_, err := io.CopyBuffer(writerOnly{sub}, readerOnly{s}, buf)
		if err != nil && !errors.Is(err, io.EOF) {
			sub.CancelWrite(1)
		} else {
			sub.Close()
		}
		s.Close()
	default:
		s.CancelRead(1)
		s.CancelWrite(1)
	}
}

// readerOnly and writerOnly hide any ReaderFrom/WriterTo so CopyBuffer uses its buffer.
type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }

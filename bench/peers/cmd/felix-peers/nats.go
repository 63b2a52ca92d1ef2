package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServer runs an embedded nats-server with JetStream on file storage on a random
// loopback port, writes {"url": ...} to --ready, and runs until SIGTERM/SIGINT.
func natsServer(args []string) error {
	fs := flag.NewFlagSet("nats-server", flag.ExitOnError)
	store := fs.String("store", "", "JetStream store directory")
	sync := fs.String("sync", "default", "default (periodic sync, acked before disk) or always (sync_interval: always)")
	ready := fs.String("ready", "", "ready file")
	_ = fs.Parse(args)
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: *store, NoSigs: true, MaxPayload: 8 << 20}
	switch *sync {
	case "always":
		opts.SyncAlways = true
	case "default":
	default:
		return fmt.Errorf("--sync %q: want default or always", *sync)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("nats-server not ready after 30 s")
	}
	b, _ := json.Marshal(map[string]any{"url": s.ClientURL(), "pid": os.Getpid()})
	tmp := *ready + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, *ready); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	s.Shutdown()
	s.WaitForShutdown()
	return nil
}

func jsStream(ctx context.Context, js jetstream.JetStream, name string) error {
	_ = js.DeleteStream(ctx, name)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage})
	return err
}

// jsPublish: N synchronous publishers (one publish in flight each, acked by JetStream).
func jsPublish(args []string) error {
	fs := flag.NewFlagSet("js-publish", flag.ExitOnError)
	var c common
	c.register(fs)
	url := fs.String("url", nats.DefaultURL, "server URL")
	pubs := fs.Int("publishers", 1, "synchronous publishers (one connection each)")
	syncLabel := fs.String("sync", "default", "the server's sync mode, for the report")
	_ = fs.Parse(args)
	ctx := context.Background()
	conns := make([]*nats.Conn, *pubs)
	for i := range conns {
		nc, err := nats.Connect(*url)
		if err != nil {
			return err
		}
		defer nc.Close()
		conns[i] = nc
	}
	js0, err := jetstream.New(conns[0])
	if err != nil {
		return err
	}
	if err := jsStream(ctx, js0, "BENCH"); err != nil {
		return err
	}
	w := newWindow(c)
	var acked, inWin atomic.Int64
	hists := make([]*hdrhistogram.Histogram, *pubs)
	errs := make([]error, *pubs)
	var wg sync.WaitGroup
	for i := range conns {
		hists[i] = newHist()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			js, err := jetstream.New(conns[i])
			if err != nil {
				errs[i] = err
				return
			}
			buf := make([]byte, c.size)
			subj := fmt.Sprintf("BENCH.%d", i)
			for {
				t := time.Now()
				if !t.Before(w.end) {
					return
				}
				if _, err := js.Publish(ctx, subj, buf); err != nil {
					errs[i] = err
					return
				}
				now := time.Now()
				acked.Add(1)
				if w.in(t) {
					record(hists[i], now.Sub(t))
				}
				if w.in(now) {
					inWin.Add(1)
				}
			}
		}(i)
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	info, err := js0.Stream(ctx, "BENCH")
	if err != nil {
		return err
	}
	st, err := info.Info(ctx)
	if err != nil {
		return err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	r := result{System: "nats-jetstream-sync-" + *syncLabel, Shape: shape{Name: c.name, Kind: "durable", Payload: c.size, Pubs: *pubs},
		Sent: acked.Load(), Delivered: int64(st.State.Msgs), Latency: summarize(h), LatencyFrom: "send → ack (synchronous publish)",
		Settings: map[string]any{"publishers": *pubs, "sync": *syncLabel, "warmup": c.warmup.String(), "duration": c.duration.String()}}
	if r.Delivered != r.Sent {
		return fmt.Errorf("unaccounted: %d acked, %d stored", r.Sent, r.Delivered)
	}
	n := inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

// jsAsync: one publisher with up to --window asynchronous publishes in flight.
func jsAsync(args []string) error {
	fs := flag.NewFlagSet("js-async", flag.ExitOnError)
	var c common
	c.register(fs)
	url := fs.String("url", nats.DefaultURL, "server URL")
	win := fs.Int("window", 256, "max async publishes pending")
	syncLabel := fs.String("sync", "default", "the server's sync mode, for the report")
	_ = fs.Parse(args)
	ctx := context.Background()
	nc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(*win+1))
	if err != nil {
		return err
	}
	if err := jsStream(ctx, js, "BENCHA"); err != nil {
		return err
	}
	w := newWindow(c)
	h := newHist()
	var hmu sync.Mutex
	var acked, failed, inWin atomic.Int64
	buf := make([]byte, c.size)
	var sent int64
	sem := make(chan struct{}, *win) // our own window: never hit the client's stall error
	for {
		t := time.Now()
		if !t.Before(w.end) {
			break
		}
		sem <- struct{}{}
		f, err := js.PublishAsync("BENCHA.x", buf)
		if err != nil {
			return err
		}
		sent++
		go func(t time.Time) {
			defer func() { <-sem }()
			select {
			case <-f.Ok():
				now := time.Now()
				acked.Add(1)
				if w.in(now) {
					inWin.Add(1)
				}
				if w.in(t) {
					hmu.Lock()
					record(h, now.Sub(t))
					hmu.Unlock()
				}
			case <-f.Err():
				failed.Add(1)
			}
		}(t)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(c.drain):
		return errors.New("async publishes still pending after the drain time")
	}
	time.Sleep(100 * time.Millisecond) // the ack goroutines finish counting
	if acked.Load()+failed.Load() != sent {
		return fmt.Errorf("unaccounted: %d sent, %d acked, %d failed", sent, acked.Load(), failed.Load())
	}
	hmu.Lock()
	lat := summarize(h)
	hmu.Unlock()
	r := result{System: "nats-jetstream-async-sync-" + *syncLabel, Shape: shape{Name: c.name, Kind: "durable", Payload: c.size, Pubs: 1},
		Sent: sent, Delivered: acked.Load(), Refused: failed.Load(), Latency: lat, LatencyFrom: "send → ack (async publish)",
		Settings: map[string]any{"window": *win, "sync": *syncLabel}}
	n := inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

// natsPubSub: core NATS (no JetStream), one publisher, --fanout subscribers on their own
// connections; latency from the send time stamped into payloads of 8 bytes or more.
func natsPubSub(args []string) error {
	fs := flag.NewFlagSet("nats-pubsub", flag.ExitOnError)
	var c common
	c.register(fs)
	url := fs.String("url", nats.DefaultURL, "server URL")
	fanout := fs.Int("fanout", 1, "subscribers")
	_ = fs.Parse(args)
	w := newWindow(c)
	type subState struct {
		sub        *nats.Subscription
		got, inWin atomic.Int64
		hist       *hdrhistogram.Histogram
		mu         sync.Mutex
	}
	subs := make([]*subState, *fanout)
	for i := range subs {
		nc, err := nats.Connect(*url)
		if err != nil {
			return err
		}
		defer nc.Close()
		st := &subState{hist: newHist()}
		sub, err := nc.Subscribe("bench.pubsub", func(m *nats.Msg) {
			now := time.Now()
			st.got.Add(1)
			if w.in(now) {
				st.inWin.Add(1)
			}
			if len(m.Data) >= 8 {
				t := time.Unix(0, int64(binary.LittleEndian.Uint64(m.Data)))
				if w.in(t) {
					st.mu.Lock()
					record(st.hist, now.Sub(t))
					st.mu.Unlock()
				}
			}
		})
		if err != nil {
			return err
		}
		_ = sub.SetPendingLimits(-1, 256<<20)
		st.sub = sub
		if err := nc.Flush(); err != nil {
			return err
		}
		subs[i] = st
	}
	pc, err := nats.Connect(*url)
	if err != nil {
		return err
	}
	defer pc.Close()
	buf := make([]byte, c.size)
	var sent int64
	for {
		t := time.Now()
		if !t.Before(w.end) {
			break
		}
		if len(buf) >= 8 {
			binary.LittleEndian.PutUint64(buf, uint64(t.UnixNano()))
		}
		if err := pc.Publish("bench.pubsub", buf); err != nil {
			return err
		}
		sent++
		if sent%1024 == 0 { // keep the publisher from running unboundedly ahead
			if err := pc.Flush(); err != nil {
				return err
			}
		}
	}
	if err := pc.Flush(); err != nil {
		return err
	}
	deadline := time.Now().Add(c.drain)
	var delivered, dropped, inWin int64
	h := newHist()
	for i, st := range subs {
		for {
			d, _ := st.sub.Dropped()
			if st.got.Load()+int64(d) >= sent || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		d, _ := st.sub.Dropped()
		if st.got.Load()+int64(d) != sent {
			return fmt.Errorf("unaccounted at subscriber %d: %d sent, %d delivered, %d dropped", i, sent, st.got.Load(), d)
		}
		delivered += st.got.Load()
		dropped += int64(d)
		inWin += st.inWin.Load()
		st.mu.Lock()
		h.Merge(st.hist)
		st.mu.Unlock()
	}
	r := result{System: "nats-core", Shape: shape{Name: c.name, Kind: "pubsub", Payload: c.size, Fanout: *fanout, Pubs: 1},
		Sent: sent, Delivered: delivered, Dropped: dropped, Latency: summarize(h), LatencyFrom: "send → delivery at the subscriber",
		Settings: map[string]any{"fanout": *fanout}}
	return emit(r, inWin, inWin*int64(c.size), c.duration)
}

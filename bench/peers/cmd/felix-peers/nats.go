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

// connectN opens n connections to url; the returned func closes them.
func connectN(url string, n int) ([]*nats.Conn, func(), error) {
	conns := make([]*nats.Conn, 0, n)
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for i := 0; i < n; i++ {
		nc, err := nats.Connect(url)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, nc)
	}
	return conns, closeAll, nil
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
	conns, closeAll, err := connectN(*url, *pubs)
	if err != nil {
		return err
	}
	defer closeAll()
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
			errs[i] = syncPublisher(ctx, conns[i], fmt.Sprintf("BENCH.%d", i), c.size, w, hists[i], &acked, &inWin)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	stored, err := storedMsgs(ctx, js0, "BENCH")
	if err != nil {
		return err
	}
	h := newHist()
	for _, x := range hists {
		h.Merge(x)
	}
	r := result{System: "nats-jetstream-sync-" + *syncLabel, Shape: shape{Name: c.name, Kind: "durable", Payload: c.size, Pubs: *pubs},
		Sent: acked.Load(), Delivered: stored, Latency: summarize(h), LatencyFrom: "send → ack (synchronous publish)",
		Settings: map[string]any{"publishers": *pubs, "sync": *syncLabel, "warmup": c.warmup.String(), "duration": c.duration.String()}}
	if r.Delivered != r.Sent {
		return fmt.Errorf("unaccounted: %d acked, %d stored", r.Sent, r.Delivered)
	}
	n := inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

// syncPublisher publishes to subj, one message in flight, until the window ends.
func syncPublisher(ctx context.Context, nc *nats.Conn, subj string, size int, w window, h *hdrhistogram.Histogram, acked, inWin *atomic.Int64) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	buf := make([]byte, size)
	for {
		t := time.Now()
		if !t.Before(w.end) {
			return nil
		}
		if _, err := js.Publish(ctx, subj, buf); err != nil {
			return err
		}
		now := time.Now()
		acked.Add(1)
		if w.in(t) {
			record(h, now.Sub(t))
		}
		if w.in(now) {
			inWin.Add(1)
		}
	}
}

// storedMsgs is the message count of a stream.
func storedMsgs(ctx context.Context, js jetstream.JetStream, name string) (int64, error) {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int64(info.State.Msgs), nil
}

// asyncCounts is what the async publisher's ack goroutines count.
type asyncCounts struct {
	acked, failed, inWin atomic.Int64
	mu                   sync.Mutex
	h                    *hdrhistogram.Histogram
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
	cnt := &asyncCounts{h: newHist()}
	sent, err := asyncPublish(js, make([]byte, c.size), *win, w, cnt)
	if err != nil {
		return err
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(c.drain):
		return errors.New("async publishes still pending after the drain time")
	}
	time.Sleep(100 * time.Millisecond) // the ack goroutines finish counting
	if cnt.acked.Load()+cnt.failed.Load() != sent {
		return fmt.Errorf("unaccounted: %d sent, %d acked, %d failed", sent, cnt.acked.Load(), cnt.failed.Load())
	}
	cnt.mu.Lock()
	lat := summarize(cnt.h)
	cnt.mu.Unlock()
	r := result{System: "nats-jetstream-async-sync-" + *syncLabel, Shape: shape{Name: c.name, Kind: "durable", Payload: c.size, Pubs: 1},
		Sent: sent, Delivered: cnt.acked.Load(), Refused: cnt.failed.Load(), Latency: lat, LatencyFrom: "send → ack (async publish)",
		Settings: map[string]any{"window": *win, "sync": *syncLabel}}
	n := cnt.inWin.Load()
	return emit(r, n, n*int64(c.size), c.duration)
}

// asyncPublish publishes with at most win in flight (its own window, so the client's
// stall error never fires) until the window ends; it returns how many were sent.
func asyncPublish(js jetstream.JetStream, buf []byte, win int, w window, cnt *asyncCounts) (int64, error) {
	var sent int64
	sem := make(chan struct{}, win)
	for {
		t := time.Now()
		if !t.Before(w.end) {
			return sent, nil
		}
		sem <- struct{}{}
		f, err := js.PublishAsync("BENCHA.x", buf)
		if err != nil {
			return sent, err
		}
		sent++
		go func(t time.Time) {
			defer func() { <-sem }()
			select {
			case <-f.Ok():
				now := time.Now()
				cnt.acked.Add(1)
				if w.in(now) {
					cnt.inWin.Add(1)
				}
				if w.in(t) {
					cnt.mu.Lock()
					record(cnt.h, now.Sub(t))
					cnt.mu.Unlock()
				}
			case <-f.Err():
				cnt.failed.Add(1)
			}
		}(t)
	}
}

// coreSub is one core NATS subscriber's counts.
type coreSub struct {
	sub        *nats.Subscription
	got, inWin atomic.Int64
	hist       *hdrhistogram.Histogram
	mu         sync.Mutex
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
	conns, closeAll, err := connectN(*url, *fanout+1)
	if err != nil {
		return err
	}
	defer closeAll()
	subs := make([]*coreSub, *fanout)
	for i := range subs {
		if subs[i], err = subscribeCore(conns[i+1], w); err != nil {
			return err
		}
	}
	sent, err := corePublish(conns[0], c.size, w)
	if err != nil {
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
		delivered, dropped, inWin = delivered+st.got.Load(), dropped+int64(d), inWin+st.inWin.Load()
		st.mu.Lock()
		h.Merge(st.hist)
		st.mu.Unlock()
	}
	r := result{System: "nats-core", Shape: shape{Name: c.name, Kind: "pubsub", Payload: c.size, Fanout: *fanout, Pubs: 1},
		Sent: sent, Delivered: delivered, Dropped: dropped, Latency: summarize(h), LatencyFrom: "send → delivery at the subscriber",
		Settings: map[string]any{"fanout": *fanout}}
	return emit(r, inWin, inWin*int64(c.size), c.duration)
}

func subscribeCore(nc *nats.Conn, w window) (*coreSub, error) {
	st := &coreSub{hist: newHist()}
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
		return nil, err
	}
	_ = sub.SetPendingLimits(-1, 256<<20)
	st.sub = sub
	return st, nc.Flush()
}

// corePublish publishes stamped payloads until the window ends, flushing every 1024 so
// the publisher does not run unboundedly ahead; it returns how many were sent.
func corePublish(pc *nats.Conn, size int, w window) (int64, error) {
	buf := make([]byte, size)
	var sent int64
	for {
		t := time.Now()
		if !t.Before(w.end) {
			return sent, pc.Flush()
		}
		if len(buf) >= 8 {
			binary.LittleEndian.PutUint64(buf, uint64(t.UnixNano()))
		}
		if err := pc.Publish("bench.pubsub", buf); err != nil {
			return sent, err
		}
		sent++
		if sent%1024 == 0 {
			if err := pc.Flush(); err != nil {
				return sent, err
			}
		}
	}
}

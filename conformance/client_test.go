package conformance

// Reconnection, retry classification, acknowledgement, error and lifecycle scenarios
// (catalogue ids reconnect.*, retry.*, ack.*, errors.*, lifecycle.*).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"felix/client"
)

func init() {
	register("reconnect.resume-next-offset", reconnectResumeNextOffset)
	register("retry.definite-not-transport", retryDefiniteNotTransport)
	register("retry.no-resend-by-default", retryNoResendByDefault)
	register("ack.none-no-roundtrip", ackNoneNoRoundTrip)
	register("ack.per-message-waits", ackPerMessageWaits)
	register("errors.typed", errorsTyped)
	register("lifecycle.concurrent-callers", lifecycleConcurrentCallers)
	register("lifecycle.close-twice", lifecycleCloseTwice)
	register("lifecycle.broker-ends-subscription", lifecycleBrokerEndsSubscription)
}

// restart SIGKILLs the broker and starts it again on the same ports, data and certificate.
func (b *broker) restart() {
	b.t.Helper()
	b.kill()
	b.start()
}

func reconnectResumeNextOffset(t *testing.T, _ *env) {
	b := startBroker(t)
	b.createStream(client.StreamInfo{Name: "resume", Durable: true})
	c := b.dial(client.WithIdleTimeout(time.Second), client.WithReconnectBackoff(20*time.Millisecond, 200*time.Millisecond))
	sub := subscribe(t, c, "resume", client.Earliest)
	first := make([][]byte, 10)
	for i := range first {
		first[i] = []byte(fmt.Sprintf("before %d", i))
	}
	publishAll(t, c, "resume", first)
	collect(t, sub, len(first))
	b.restart()
	pub := b.dial() // a fresh client publishes: the subscriber's client must recover by itself
	later := make([][]byte, 10)
	for i := range later {
		later[i] = []byte(fmt.Sprintf("after %d", i))
	}
	publishAll(t, pub, "resume", later)
	for i, r := range collect(t, sub, len(later)) {
		if want := uint64(len(first) + i); r.Offset != want || string(r.Payload) != string(later[i]) || r.Gap != 0 {
			t.Fatalf("after the restart, record %d: offset %d %q gap %d, want offset %d %q", i, r.Offset, r.Payload, r.Gap, want, later[i])
		}
	}
}

// definite checks that err is the definite refusal target and never a transport outcome.
func definite(t *testing.T, what string, err error, target error) {
	t.Helper()
	switch {
	case !errors.Is(err, target):
		t.Fatalf("%s: %v, want %v", what, err, target)
	case errors.Is(err, client.ErrIndeterminate), errors.Is(err, context.DeadlineExceeded), errors.Is(err, client.ErrClosed):
		t.Fatalf("%s: %v classified as a transport outcome", what, err)
	}
}

func retryDefiniteNotTransport(t *testing.T, e *env) {
	b := e.shared(t)
	c, ctx := b.dial(), stepCtx(t)
	p, err := c.NewPublisher("no-such-stream", client.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	_, err = p.PublishSync(ctx, []byte("x"))
	definite(t, "publish to an unknown stream", err, client.ErrNotFound)
	definite(t, "publish to an unknown stream", err, client.ErrRefused)
	_, _, err = c.Get(ctx, "no-such-cache", "k")
	definite(t, "get from an unknown cache", err, client.ErrNotFound)
	_, err = client.Dial(ctx, b.quic, client.WithFingerprint(b.fp), client.WithToken("not-a-token"))
	definite(t, "dial with a bad token", err, client.ErrUnauthorized)
}

func retryNoResendByDefault(t *testing.T, _ *env) {
	b := startBroker(t)
	b.createStream(client.StreamInfo{Name: "once", Durable: true})
	c := b.dial(client.WithIdleTimeout(time.Second))
	p, err := c.NewPublisher("once", client.PublisherOptions{Offsets: true, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := stepCtx(t)
	defer p.Close(ctx)
	if _, err := p.PublishSync(ctx, []byte("warm-up")); err != nil { // the request stream is authenticated
		t.Fatal(err)
	}
	b.signal(syscall.SIGSTOP) // the publish is sent; no answer can come
	pend, err := p.Publish(ctx, []byte("lost answer"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pend.Wait(ctx); !errors.Is(err, client.ErrIndeterminate) {
		t.Fatalf("publish to a stopped broker: %v, want ErrIndeterminate", err)
	}
	b.restart() // SIGKILL (nothing of the stopped broker's socket survives), then start
	pub := b.dial()
	marker := publishAll(t, pub, "once", [][]byte{[]byte("marker")})[0]
	sub := subscribe(t, pub, "once", client.Earliest)
	r := collect(t, sub, 1)[0]
	if string(r.Payload) != "warm-up" || r.Offset != 0 {
		t.Fatalf("first record: %q at %d, want the warm-up at 0", r.Payload, r.Offset)
	}
	if r = collect(t, sub, 1)[0]; string(r.Payload) != "marker" || r.Offset != 1 || marker.FirstOffset != 1 {
		t.Fatalf("first record after the restart: %q at %d (marker at %d): the indeterminate publish was re-sent", r.Payload, r.Offset, marker.FirstOffset)
	}
}

func ackNoneNoRoundTrip(t *testing.T, _ *env) {
	b := startBroker(t)
	b.createStream(client.StreamInfo{Name: "fire"})
	c := b.dial()
	p, err := c.NewPublisher("fire", client.PublisherOptions{Ack: client.AckNone, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A first publish authenticates the request stream (that needs the broker); the
	// scenario is about the publishes after it.
	if _, err := p.PublishSync(ctx, []byte("warm-up")); err != nil {
		t.Fatal(err)
	}
	b.signal(syscall.SIGSTOP)
	defer b.signal(syscall.SIGCONT)
	if _, err := p.PublishSync(ctx, []byte("no answer needed")); err != nil {
		t.Fatalf("ack none with the broker stopped: %v, want done without an answer", err)
	}
}

func ackPerMessageWaits(t *testing.T, _ *env) {
	b := startBroker(t)
	b.createStream(client.StreamInfo{Name: "acked", Durable: true})
	c := b.dial()
	p, err := c.NewPublisher("acked", client.PublisherOptions{Ack: client.AckPerMessage, Offsets: true, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := stepCtx(t)
	defer p.Close(ctx)
	if _, err := p.PublishSync(ctx, []byte("warm-up")); err != nil { // authenticates the request stream
		t.Fatal(err)
	}
	b.signal(syscall.SIGSTOP)
	pend, err := p.Publish(ctx, []byte("wait for me"))
	if err != nil {
		b.signal(syscall.SIGCONT)
		t.Fatal(err)
	}
	select {
	case <-pend.Done():
		b.signal(syscall.SIGCONT)
		res, err := pend.Wait(ctx)
		t.Fatalf("a per-message publish completed while the broker was stopped: %+v %v", res, err)
	case <-time.After(500 * time.Millisecond): // the broker cannot answer while stopped
	}
	b.signal(syscall.SIGCONT)
	res, err := pend.Wait(ctx)
	if err != nil || !res.HasOffsets || res.FirstOffset != 1 {
		t.Fatalf("after the broker resumed: %+v %v, want acknowledged at offset 1", res, err)
	}
}

func errorsTyped(t *testing.T, e *env) {
	b := e.shared(t)
	c, ctx := b.dial(), stepCtx(t)
	_, err := c.Subscribe(ctx, "no-such-stream", client.Latest, client.SubscribeOptions{})
	definite(t, "subscribe to an unknown stream", err, client.ErrNotFound)
	var se *client.ServerError
	if !errors.As(err, &se) || se.Code == "" {
		t.Fatalf("unknown stream: %v carries no code", err)
	}
	_, err = client.Dial(ctx, b.quic, client.WithFingerprint(b.fp), client.WithToken("not-a-token"))
	definite(t, "bad token", err, client.ErrUnauthorized)
	_, tc, _ := trimmedBroker(t)
	_, err = tc.Subscribe(ctx, "trimmed", client.Offset(0), client.SubscribeOptions{})
	var ce *client.CursorError
	if !errors.As(err, &ce) || ce.Reason != client.CursorTooOld || !errors.Is(err, client.ErrCursor) {
		t.Fatalf("an offset retention discarded: %v, want *CursorError too_old", err)
	}
}

func lifecycleConcurrentCallers(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("shared")
	b.createStream(client.StreamInfo{Name: "shared", Durable: true})
	c, ctx := b.dial(), stepCtx(t)
	p, err := c.NewPublisher("shared", client.PublisherOptions{Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	const workers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	offsets := sync.Map{}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentWorker(ctx, c, p, w, each, &offsets)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	offsets.Range(func(any, any) bool { n++; return true })
	if n != workers*each {
		t.Fatalf("%d distinct offsets for %d publishes", n, workers*each)
	}
}

// concurrentWorker puts, reads back, counts and publishes on the shared client and
// publisher; every answer must be its own.
func concurrentWorker(ctx context.Context, c *client.Client, p *client.Publisher, w, each int, offsets *sync.Map) error {
	for i := range each {
		key, val := fmt.Sprintf("w%d-%d", w, i), []byte(fmt.Sprintf("value %d/%d", w, i))
		if err := c.Put(ctx, "shared", key, val, 0); err != nil {
			return err
		}
		got, found, err := c.Get(ctx, "shared", key)
		if err != nil || !found || string(got) != string(val) {
			return fmt.Errorf("worker %d get %s: %q %v %v", w, key, got, found, err)
		}
		if sum, err := c.CounterAdd(ctx, "shared", fmt.Sprintf("w%d", w), 1); err != nil || sum != int64(i+1) {
			return fmt.Errorf("worker %d add: %d %v, want %d", w, sum, err, i+1)
		}
		res, err := p.PublishSync(ctx, val)
		if err != nil {
			return err
		}
		if _, dup := offsets.LoadOrStore(res.FirstOffset, key); dup {
			return fmt.Errorf("worker %d: offset %d answered twice", w, res.FirstOffset)
		}
	}
	return nil
}

func lifecycleCloseTwice(t *testing.T, e *env) {
	b := e.shared(t)
	b.createStream(client.StreamInfo{Name: "closing"})
	c, ctx := b.dial(), stepCtx(t)
	sub := subscribe(t, c, "closing", client.Latest)
	for i := range 2 {
		if err := sub.Close(); err != nil && i == 0 {
			t.Fatalf("first subscription close: %v", err)
		}
	}
	if _, err := sub.Next(ctx); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	for i := range 2 {
		if err := c.Close(); err != nil && i == 0 {
			t.Fatalf("first client close: %v", err)
		}
	}
	if _, _, err := c.Get(ctx, "any", "k"); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}
}

func lifecycleBrokerEndsSubscription(t *testing.T, e *env) {
	b := e.shared(t)
	b.createStream(client.StreamInfo{Name: "ending", Durable: true})
	c, ctx := b.dial(), stepCtx(t)
	sub := subscribe(t, c, "ending", client.Latest)
	if err := b.admin().DeleteStream(ctx, "ending"); err != nil {
		t.Fatal(err)
	}
	_, err := sub.Next(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("subscription to a deleted stream: %v, want its end reported", err)
	}
	definite(t, "subscription to a deleted stream", err, client.ErrNotFound)
}

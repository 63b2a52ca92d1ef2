package client

import (
	"context"
	"testing"
	"time"
)

// resumeBound is how soon after a SIGKILLed broker is back a subscriber or watch must
// receive a new record: well under the 10–40 s the SDK once took (its 10 s keep-alive and
// exponentially backed-off probes, too small for a stateless reset, left it to QUIC's 30 s
// idle timeout). Now the connection is given up about 6 s after the kill (a 1 s keep-alive,
// then the 5 s idle timeout), so after the trial's 4 s outage records arrive within ~2 s.
const resumeBound = 5 * time.Second

// killAndRestart SIGKILLs b (no CONNECTION_CLOSE reaches the client) and restarts it on
// the same port and data dir after pause (the trial's 4 s gap while the port is dead),
// and returns the new broker and the instant of the kill.
func killAndRestart(t *testing.T, b *testBroker, env []string, pause time.Duration) (b2 *testBroker, killed time.Time) {
	t.Helper()
	b.kill()
	killed = time.Now()
	time.Sleep(pause) // the outage itself, not a wait for a condition
	return startBroker(t, b.dataDir, env...), killed
}

// A live subscription on a durable stream resumes within resumeBound once a broker killed
// with SIGKILL is back on the same port and data dir: the record published after the
// restart is delivered, nothing before it is repeated.
func TestSubscribeResumesAfterKill(t *testing.T) {
	addr := freeUDPAddr(t)
	env := append(writeCert(t), "FELIX_QUIC_BIND="+addr)
	b := startBroker(t, "", env...)
	b.createStream("ks", true)
	c := b.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("ks", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishSync(ctx, []byte("before")); err != nil {
		t.Fatal(err)
	}
	_ = p.Close(ctx)
	sub, err := c.Subscribe(ctx, "ks", Earliest, SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if r, err := sub.Next(ctx); err != nil || string(r.Payload) != "before" {
		t.Fatalf("first record: %q, %v", r.Payload, err)
	}
	b2, killed := killAndRestart(t, b, env, 4*time.Second)
	c2 := b2.dial()
	p2, err := c2.NewPublisher("ks", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close(ctx)
	if _, err := p2.PublishSync(ctx, []byte("after")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nctx, cancel := context.WithTimeout(ctx, resumeBound)
	defer cancel()
	r, err := sub.Next(nctx)
	if err != nil || string(r.Payload) != "after" || r.Offset != 1 {
		t.Fatalf("after the restart: %q at %d, %v after %v (want \"after\" at 1 within %v)", r.Payload, r.Offset, err, time.Since(start), resumeBound)
	}
	if live, since := sub.Live(); !live || !since.After(killed) {
		t.Fatalf("Live() = %v, %v after the resume (killed at %v)", live, since, killed)
	}
	t.Logf("subscription resumed %v after the publish", time.Since(start))
}

// A cache watch resumes within resumeBound once a SIGKILLed broker is back: the put made
// after the restart is delivered.
func TestWatchResumesAfterKill(t *testing.T) {
	addr := freeUDPAddr(t)
	env := append(writeCert(t), "FELIX_QUIC_BIND="+addr)
	b := startBroker(t, "", env...)
	b.createCache("c4")
	c := b.dial()
	ctx := testCtx(t)
	if err := c.Put(ctx, "c4", "k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	from := uint64(0)
	w, err := c.Watch(ctx, "c4", "k", WatchOptions{From: &from})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if ch, err := w.Next(ctx); err != nil || string(ch.Value) != "v1" {
		t.Fatalf("first change: %+v, %v", ch, err)
	}
	b2, killed := killAndRestart(t, b, env, 4*time.Second)
	c2 := b2.dial()
	if err := c2.Put(ctx, "c4", "k", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	nctx, cancel := context.WithTimeout(ctx, resumeBound)
	defer cancel()
	for {
		ch, err := w.Next(nctx)
		if err != nil {
			t.Fatalf("after the restart: %v after %v (want v2 within %v)", err, time.Since(start), resumeBound)
		}
		if string(ch.Value) == "v2" {
			break
		}
	}
	if live, since := w.Live(); !live || !since.After(killed) {
		t.Fatalf("Live() = %v, %v after the resume (killed at %v)", live, since, killed)
	}
	t.Logf("watch resumed %v after the put", time.Since(start))
}

// The SDK's transport gives a quiet connection a keep-alive every fifth of its idle
// timeout (5 s by default), and refuses an idle timeout under 1 s.
func TestIdleTimeoutConfig(t *testing.T) {
	cfg := defaultConfig(func(string) string { return "" })
	if q := quicConfig(cfg); q.MaxIdleTimeout != DefaultIdleTimeout || q.KeepAlivePeriod != DefaultIdleTimeout/5 {
		t.Fatalf("default: idle %v, keep-alive %v", q.MaxIdleTimeout, q.KeepAlivePeriod)
	}
	if err := WithIdleTimeout(10 * time.Second)(cfg); err != nil || quicConfig(cfg).KeepAlivePeriod != 2*time.Second {
		t.Fatalf("WithIdleTimeout(10 s): %v, keep-alive %v", err, quicConfig(cfg).KeepAlivePeriod)
	}
	mustErrIs(t, WithIdleTimeout(500*time.Millisecond)(cfg), ErrInvalidArgument)
}

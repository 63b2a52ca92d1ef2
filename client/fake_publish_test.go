package client

// Publisher rules against the fake broker (fake_test.go): lost answers, the
// idempotent feature and its binary re-send, binary ack refusals, the in-flight
// byte bound, and linger and sealing on a fake clock (fakeTimers).

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"felix/proto"
)

func TestPublishLostAnswer(t *testing.T) {
	answer := func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		first, last := uint64(10), uint64(10+len(b.Payloads)-1)
		x.reply(&proto.PublishOK{RequestID: *b.RequestID, FirstOffset: &first, LastOffset: &last, Duplicate: true})
	}
	ctx := testCtx(t)

	// Not idempotent: reported, never re-sent.
	fb := startFake(t, dropFirst(answer))
	c := fb.dial()
	p, _ := c.NewPublisher("s", PublisherOptions{Offsets: true})
	_, err := p.PublishSync(ctx, []byte("a"))
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypePublishBatch); n != 1 {
		t.Fatalf("plain publish sent %d times, want 1", n)
	}
	p.Close(ctx)

	// Idempotent: re-sent with the same request id and producer id.
	fb2 := startFake(t, dropFirst(answer))
	c2 := fb2.dial()
	ip, _ := c2.NewPublisher("s", PublisherOptions{Offsets: true, Idempotent: true})
	res, err := ip.PublishSync(ctx, []byte("a"))
	if err != nil || !res.Duplicate || res.FirstOffset != 10 {
		t.Fatalf("idempotent re-send: %+v %v", res, err)
	}
	sent := fb2.messages(proto.TypePublishBatch)
	if len(sent) != 2 {
		t.Fatalf("idempotent publish sent %d times, want 2", len(sent))
	}
	a, b := sent[0].(*proto.JSONPublishBatch), sent[1].(*proto.JSONPublishBatch)
	if *a.RequestID != *b.RequestID || a.ProducerID != ip.ProducerID() || b.ProducerID != ip.ProducerID() || !a.Idempotent || !b.Idempotent {
		t.Fatalf("re-send changed its dedupe key: %+v / %+v", a, b)
	}
	ip.Close(ctx)
}

func TestIdempotentNeedsFeature(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {}, func(fb *fakeBroker) { fb.features = []string{proto.FeatureErrorCodes} })
	c := fb.dial()
	p, _ := c.NewPublisher("s", PublisherOptions{Idempotent: true})
	_, err := p.PublishSync(testCtx(t), []byte("a"))
	mustErrIs(t, err, ErrUnsupported)
	p.Close(testCtx(t))
}

// With 0x2000 negotiated an idempotent Publisher without Offsets sends binary 0x2009
// frames and re-sends a lost one with the same request id and producer id.
func TestIdempotentBinaryResend(t *testing.T) {
	fb := startFake(t, dropFirst(func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
	}))
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Idempotent: true, Linger: -1})
	defer p.Close(ctx)
	if _, err := p.PublishSync(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	sent := fb.messages(proto.TypePublishBatch)
	if len(sent) != 2 {
		t.Fatalf("sent %d frames, want 2", len(sent))
	}
	for _, m := range sent {
		b := m.(*proto.JSONPublishBatch)
		if b.Ack != "binary" || !b.Idempotent || b.ProducerID != p.ProducerID() || *b.RequestID != *sent[0].(*proto.JSONPublishBatch).RequestID {
			t.Fatalf("frame %+v is not the same 0x2009 request", b)
		}
	}
}

// A binary error ack becomes a typed refusal.
func TestBinaryAckRefusal(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckError(nil, *b.RequestID, proto.ErrorText(proto.CodeOverloaded, "queue full")))
	})
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: -1})
	defer p.Close(ctx)
	_, err := p.PublishSync(ctx, []byte("a"))
	mustErrIs(t, err, ErrOverloaded, ErrRefused)
}

// Publish waits while MaxInflightBytes are unacknowledged and resumes when an ack frees
// the budget.
func TestPublisherInflightBound(t *testing.T) {
	release := make(chan struct{})
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		go func() {
			<-release
			x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
		}()
	})
	c := fb.dial()
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: -1, MaxInflightBytes: 10})
	defer p.Close(ctx)
	first, err := p.Publish(ctx, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := p.Publish(short, make([]byte, 8)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish over the in-flight bound: %v", err)
	}
	close(release)
	if _, err := first.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := p.Publish(ctx, make([]byte, 8))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := second.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// fakeTimers replaces the linger timers: they fire only when the test says so.
type fakeTimers struct {
	mu      sync.Mutex
	pending []*fakeTimer
}

type fakeTimer struct {
	d       time.Duration
	f       func()
	stopped bool
}

func (ft *fakeTimer) Stop() bool { ft.stopped = true; return true }

func (ts *fakeTimers) afterFunc(d time.Duration, f func()) interface{ Stop() bool } {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := &fakeTimer{d: d, f: f}
	ts.pending = append(ts.pending, t)
	return t
}

// fire runs every scheduled timer once.
func (ts *fakeTimers) fire() {
	ts.mu.Lock()
	p := ts.pending
	ts.pending = nil
	ts.mu.Unlock()
	for _, t := range p {
		t.f()
	}
}

// A batch waits for its linger (fake clock) unless it fills up first.
func TestLingerAndSealing(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		x.raw(proto.AppendPublishAckOK(nil, *b.RequestID))
	})
	timers := &fakeTimers{}
	c := fb.dial(func(c *config) error { c.afterFunc = timers.afterFunc; return nil })
	ctx := testCtx(t)
	p, _ := c.NewPublisher("s", PublisherOptions{Linger: time.Hour, MaxRecords: 3})
	defer p.Close(ctx)
	a, _ := p.Publish(ctx, []byte("a"))
	bpd, _ := p.Publish(ctx, []byte("b"))
	p.mu.Lock()
	open := p.open[""] != nil && len(p.open[""].ends) == 2
	p.mu.Unlock()
	if !open || len(timers.pending) != 1 || timers.pending[0].d != time.Hour {
		t.Fatalf("two records under MaxRecords must wait for the linger (open=%v timers=%d)", open, len(timers.pending))
	}
	select {
	case <-a.Done():
		t.Fatal("batch answered before its linger expired")
	default:
	}
	timers.fire()
	if _, err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if br, err := bpd.Batch(); err != nil || br.Records != 2 {
		t.Fatalf("lingered batch %+v %v", br, err)
	}
	// Three records fill a batch: sent without the timer, which is stopped.
	var last Pending
	for _, r := range []string{"c", "d", "e"} {
		last, _ = p.Publish(ctx, []byte(r))
	}
	if _, err := last.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	timers.mu.Lock()
	stopped := len(timers.pending) == 1 && timers.pending[0].stopped
	timers.mu.Unlock()
	if !stopped {
		t.Fatal("the full batch's linger timer was not stopped")
	}
	if got := fb.count(proto.TypePublishBatch); got != 2 {
		t.Fatalf("%d batches sent, want 2", got)
	}
}

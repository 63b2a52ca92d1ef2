package core

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"
)

// harness drives a manual engine (no core goroutines) over fake disks and a
// fake clock: the test steps the cores itself, so every interleaving is the
// test's choice.
type harness struct {
	t     *testing.T
	e     *Engine
	store *fakeStore
	disks []*fakeDisk
	clock *fakeClock
}

func newHarness(t *testing.T, cores int, store *fakeStore, configure func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, store: store, clock: &fakeClock{}}
	cfg := Config{Cores: cores, DataDir: "fake", Fsync: FsyncOnCommit, NoPinning: true, manual: true, Clock: h.clock}
	cfg.newDisk = func(int) (coreDisk, error) {
		d := newFakeDisk(store)
		h.disks = append(h.disks, d)
		return d, nil
	}
	if configure != nil {
		configure(&cfg)
	}
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	t.Cleanup(func() { h.close() })
	return h
}

func (h *harness) close() {
	if !h.e.closed.Load() {
		if err := h.e.Close(context.Background()); err != nil {
			h.t.Fatal(err)
		}
	}
}

// step runs n turns of every core.
func (h *harness) step(n int) {
	for range n {
		for _, c := range h.e.cores {
			c.step(false)
		}
	}
}

func (h *harness) hold(on bool) {
	for _, d := range h.disks {
		d.hold = on
	}
}

func (h *harness) create(spec StreamSpec) {
	h.t.Helper()
	if err := h.e.CreateStream(spec); err != nil {
		h.t.Fatalf("CreateStream(%v): %v", spec.Name, err)
	}
}

// ack records a publish's outcome.
type ack struct {
	calls int
	res   PublishResult
	err   error
}

func (a *ack) done(res PublishResult, err error) { a.calls++; a.res, a.err = res, err }

func (h *harness) publish(req *PublishRequest) *ack {
	h.t.Helper()
	a := &ack{}
	if err := h.e.Publish(req, a.done); err != nil {
		h.t.Fatalf("Publish: %v", err)
	}
	return a
}

// publishThirdHeld publishes a, b and c (one record each) to testStream behind a Block
// subscriber with a queue of 1 that reads nothing, steps twice and fails the test unless a
// is acked, b is acked (parked in the overflow) and c is held; it returns c's ack.
func (h *harness) publishThirdHeld() *ack {
	h.t.Helper()
	a1 := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 1)})
	a2 := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 1)}) // parks in overflow
	a3 := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("c", 1)}) // held
	h.step(2)
	if a1.calls != 1 || a2.calls != 1 || a3.calls != 0 {
		h.t.Fatalf("acks %d %d %d; want the third held", a1.calls, a2.calls, a3.calls)
	}
	return a3
}

func payloads(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

// nextNow returns the subscription's next delivery without waiting.
func nextNow(t *testing.T, sub *Subscription) (Delivery, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return sub.Next(ctx)
}

// records decodes a delivery into offset → payload pairs and checks the
// frame agrees with the delivery's metadata.
func records(t *testing.T, d Delivery) []string {
	t.Helper()
	var out []string
	withOffsets, base, count, err := decodeEventFrame(d.Frame, func(p []byte) { out = append(out, string(p)) })
	if err != nil {
		t.Fatalf("frame: %v", err)
	}
	if count != d.Count || (withOffsets && base != d.BaseOffset) {
		t.Fatalf("frame says base %d count %d (offsets %v), delivery says %d/%d", base, count, withOffsets, d.BaseOffset, d.Count)
	}
	return out
}

// drain reads every delivery available now.
func drain(t *testing.T, sub *Subscription) []Delivery {
	t.Helper()
	var out []Delivery
	for {
		d, err := nextNow(t, sub)
		if errors.Is(err, context.Canceled) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, d)
	}
}

func u64payload(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

var testStream = StreamName{Tenant: "t1", Namespace: "default", Stream: "orders"}

const testTimeout = 30 * time.Second

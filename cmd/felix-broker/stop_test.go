package main

// Stopping a broker with publishes in flight (moved from e2e_test.go): after SIGTERM the
// drain ends cleanly, after SIGKILL the next start logs an unclean stop, and in both cases
// every acknowledged record is there after the restart. Every wait has a deadline.

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"felix/proto"
	"felix/seglog"
)

func TestSIGTERMDrainKeepsAckedRecords(t *testing.T) { stopWithPublishesInFlight(t, syscall.SIGTERM) }

// SIGKILL: no drain at all. Under on_commit (the single-node default) every acknowledged
// record was fsynced before its ack, so it must survive; the run-state says "running", so
// the next start logs an unclean stop.
func TestSIGKILLKeepsAckedRecords(t *testing.T) { stopWithPublishesInFlight(t, syscall.SIGKILL) }

// stopDeadline bounds each wait of stopWithPublishesInFlight.
const stopDeadline = 30 * time.Second

func stopWithPublishesInFlight(t *testing.T, sig syscall.Signal) {
	b := startBroker(t, "", "FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=20000")
	b.createStream("default", "default", "orders", true)
	c := b.dial()
	pubs := startPublishers(t, b, c, 4)
	// Stop only once some publish is acknowledged (and others are still being written):
	// a stop right after the writes could come before any ack, and the test would prove
	// nothing (it failed so, 1 run in a CI-sized pass: "no publish was acknowledged").
	pubs.waitAcked(t)
	code := b.stop(sig)
	c.CloseWithError(0, "") // after SIGKILL nothing will close the stream for us
	acked := pubs.wait(t)
	st, err := seglog.ReadRunState(seglog.OSFS{}, b.dataDir)
	if sig == syscall.SIGTERM {
		if code != 0 {
			t.Fatalf("exit code %d after SIGTERM", code)
		}
		if err != nil || !st.Found || !st.CleanStop {
			t.Fatalf("run-state after drain: %+v %v", st, err)
		}
		if !strings.Contains(b.logs.String(), "stopped cleanly") {
			t.Fatal("no clean-stop log line")
		}
	} else if err != nil || !st.Found || st.CleanStop {
		t.Fatalf("run-state after SIGKILL: %+v %v", st, err)
	}
	if len(acked) == 0 {
		t.Fatal("no publish was acknowledged before the drain")
	}
	// Restart on the same data: every acknowledged record is there.
	b2 := startBroker(t, b.dataDir)
	if unclean := strings.Contains(b2.logs.String(), "did not stop cleanly"); unclean != (sig == syscall.SIGKILL) {
		t.Fatalf("restart after %v: unclean-stop log line present=%v", sig, unclean)
	}
	stored := storedRecords(t, b2)
	present := map[string]bool{}
	for _, p := range stored {
		present[p] = true
	}
	for k := range acked {
		if !present[k] {
			t.Fatalf("acknowledged record %s lost (%d acked, %d stored)", k, len(acked), len(stored))
		}
	}
	t.Logf("%d acknowledged, %d stored after restart", len(acked), len(stored))
}

// publishers pipeline publishes to "orders" on their own streams and record every ack.
type publishers struct {
	mu    sync.Mutex
	acked map[string]bool // "p<publisher>-<request id>"
	wg    sync.WaitGroup  // the ack readers
	first chan struct{}   // closed at the first ack
	once  sync.Once
}

// startPublishers starts n publishers on c and returns once each has written 21 publishes
// (failing t when they have not within stopDeadline).
func startPublishers(t *testing.T, b *brokerProc, c *quic.Conn, n int) *publishers {
	t.Helper()
	ps := &publishers{acked: map[string]bool{}, first: make(chan struct{})}
	started := make(chan struct{}, n)
	for p := 0; p < n; p++ {
		ctl := openStream(t, c)
		if _, ok := ctl.auth("default", b.token, flagsPtr(v1Flags)).(*proto.AuthOK); !ok {
			t.Fatal("auth")
		}
		ps.wg.Add(1)
		go ps.write(ctl, p, started)
		go ps.readAcks(ctl, p)
	}
	deadline := time.After(stopDeadline)
	for p := 0; p < n; p++ {
		select {
		case <-started:
		case <-deadline:
			t.Fatalf("only %d of %d publishers wrote 21 publishes within %v", p, n, stopDeadline)
		}
	}
	return ps
}

// write pipelines publishes without waiting for acks until the stream fails; after the
// 21st it signals started.
func (ps *publishers) write(ctl *frameStream, p int, started chan<- struct{}) {
	for i := 0; ; i++ {
		id := uint64(i)
		frame := proto.AppendMessage(nil, &proto.Publish{TenantID: "default", Namespace: "default", Stream: "orders",
			Payload: []byte(fmt.Sprintf("p%d-%d", p, i)), RequestID: &id})
		if _, err := ctl.st.Write(frame); err != nil {
			return
		}
		if i == 20 {
			started <- struct{}{}
		}
	}
}

// readAcks records acks until the stream ends (each read has its own deadline: next).
func (ps *publishers) readAcks(ctl *frameStream, p int) {
	defer ps.wg.Done()
	for {
		h, body, err := ctl.next()
		if err != nil {
			return
		}
		if h.Flags != 0 {
			continue
		}
		m, _ := proto.DecodeMessage(body)
		if ok, isOK := m.(*proto.PublishOK); isOK {
			ps.mu.Lock()
			ps.acked[fmt.Sprintf("p%d-%d", p, ok.RequestID)] = true
			ps.mu.Unlock()
			ps.once.Do(func() { close(ps.first) })
		}
	}
}

// waitAcked waits (at most stopDeadline) until at least one publish was acknowledged.
func (ps *publishers) waitAcked(t *testing.T) {
	t.Helper()
	select {
	case <-ps.first:
	case <-time.After(stopDeadline):
		t.Fatalf("no publish acknowledged within %v of the publishers starting", stopDeadline)
	}
}

// wait waits (at most stopDeadline) for the ack readers to end and returns the acks.
func (ps *publishers) wait(t *testing.T) map[string]bool {
	t.Helper()
	done := make(chan struct{})
	go func() { ps.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopDeadline):
		t.Fatalf("the publishers' ack readers did not end within %v of the broker stopping", stopDeadline)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.acked
}

// storedRecords reads back every record of "orders" from b: the far-offset cursor error
// gives the count of durable records.
func storedRecords(t *testing.T, b *brokerProc) map[uint64]string {
	t.Helper()
	c := b.dial()
	ctl := openStream(t, c)
	ctl.auth("default", b.token, flagsPtr(v1Flags))
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders", Start: &proto.Start{Kind: proto.StartEarliest}})
	events := acceptEvents(t, c)
	ctl.msg()
	ctl.send(&proto.Subscribe{TenantID: "default", Namespace: "default", Stream: "orders", Start: &proto.Start{Kind: proto.StartOffset, Offset: 1 << 40}})
	ce, ok := ctl.msg().(*proto.SubscribeCursorError)
	if !ok {
		t.Fatal("no cursor error for a far offset")
	}
	return events.records(int(ce.Available))
}

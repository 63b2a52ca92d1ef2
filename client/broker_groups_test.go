package client

// Consumer-group tests of the SDK against a real in-process broker (startBroker,
// harness_test.go): poll, ack, nack, dead letters, and a zero-delay nack.

import (
	"fmt"
	"testing"
	"time"

	"felix/proto"
)

func TestGroupsOnBroker(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("jobs", true)
	// A pool of several connections: group operations must still reach one consumer.
	c := b.dial(WithConnPool(3))
	ctx := testCtx(t)
	if !c.Capabilities().Has(proto.FeatureGroups) {
		t.Fatalf("broker does not negotiate groups: %v", c.Capabilities().Features)
	}
	p, err := c.NewPublisher("jobs", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := p.PublishSync(ctx, fmt.Appendf(nil, "job-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	recs, err := c.Poll(ctx, "jobs", 0, "billing", 10, 2*time.Second)
	if err != nil || len(recs) != 3 || string(recs[0].Payload) != "job-0" || recs[0].Delivery != 1 {
		t.Fatalf("first poll: %+v %v", recs, err)
	}
	for i := range 4 { // the pool's round-robin must not move the consumer
		if err := c.Ack(ctx, "jobs", 0, "billing", uint64(i%2)); err != nil {
			t.Fatalf("ack %d: %v", i, err)
		}
	}
	if err := c.Nack(ctx, "jobs", 0, "billing", 0, 2); err != nil {
		t.Fatal(err)
	}
	recs, err = c.Poll(ctx, "jobs", 0, "billing", 10, 2*time.Second)
	if err != nil || len(recs) != 1 || recs[0].Offset != 2 || recs[0].Delivery != 2 {
		t.Fatalf("redelivery: %+v %v", recs, err)
	}
	entries, _, more, err := c.DeadLetters(ctx, "jobs", 0, "billing", 0, 10)
	if err != nil || len(entries) != 0 || more {
		t.Fatalf("dead letters: %+v %v %v", entries, more, err)
	}
	mustErrIs(t, c.Ack(ctx, "jobs", 0, "nobody", 0), ErrNotFound, ErrRefused)
	if n, err := c.Redrive(ctx, "jobs", 0, "billing", 2); err == nil && n != 0 {
		t.Fatalf("redrive of a live offset counted %d", n)
	}
}

// Nack with a zero delay makes the record available at once: the wire carries an explicit
// redeliver_after_ms 0 (an absent field would mean the group's default, 1 s, and the poll
// that does not wait right after the nack would then find nothing).
func TestNackZeroRedeliversAtOnce(t *testing.T) {
	b := startBroker(t, "")
	b.createStream("jobs", true)
	c := b.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("jobs", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishSync(ctx, []byte("job")); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	recs, err := c.Poll(ctx, "jobs", 0, "g", 10, 2*time.Second)
	if err != nil || len(recs) != 1 {
		t.Fatalf("first poll: %+v %v", recs, err)
	}
	if err := c.Nack(ctx, "jobs", 0, "g", 0, recs[0].Offset); err != nil {
		t.Fatal(err)
	}
	recs, err = c.Poll(ctx, "jobs", 0, "g", 10, 0)
	if err != nil || len(recs) != 1 || recs[0].Delivery != 2 {
		t.Fatalf("poll right after a zero-delay nack: %+v %v", recs, err)
	}
}

package client

import (
	"strings"
	"testing"
	"time"
)

// The stream options against a real broker: an in-memory Quorum stream is refused naming
// the field; a Queue is read through a group and refuses Subscribe; an AtLeastOnce stream
// refuses fire-and-forget publishes (nothing stored) and keeps acknowledged ones.
func TestStreamOptionsOnBroker(t *testing.T) {
	b := startBroker(t, "")
	ctx := testCtx(t)
	ad := b.admin()
	_, err := ad.CreateStream(ctx, StreamInfo{Name: "volatile", Consistency: ConsistencyQuorum})
	mustErrIs(t, err, ErrMalformed)
	if !strings.Contains(err.Error(), "consistency Quorum needs a durable stream") {
		t.Fatalf("in-memory Quorum: %v", err)
	}
	for _, s := range []StreamInfo{{Name: "jobs", Durable: true, Kind: KindQueue}, {Name: "alo", Durable: true, Delivery: DeliveryAtLeastOnce}} {
		if _, err := ad.CreateStream(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// One connection with one request stream: the publishes below arrive in order.
	c := b.dial(WithConnPool(1), WithStreamsPerConn(1))

	p, err := c.NewPublisher("jobs", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.PublishSync(ctx, []byte("job")); err != nil {
		t.Fatal(err)
	}
	p.Close(ctx)
	_, err = c.Subscribe(ctx, "jobs", Earliest, SubscribeOptions{})
	mustErrIs(t, err, ErrMalformed)
	if recs, err := c.Poll(ctx, "jobs", 0, "workers", 10, 2*time.Second); err != nil || len(recs) != 1 || string(recs[0].Payload) != "job" {
		t.Fatalf("group poll of a Queue: %+v %v", recs, err)
	}

	fire, err := c.NewPublisher("alo", PublisherOptions{Ack: AckNone, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fire.PublishSync(ctx, []byte("unacknowledged")); err != nil {
		t.Fatalf("AckNone publish (fire and forget) reported %v", err)
	}
	fire.Close(ctx)
	acked, err := c.NewPublisher("alo", PublisherOptions{Linger: -1, Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := acked.PublishSync(ctx, []byte("acknowledged"))
	if err != nil || !res.HasOffsets || res.FirstOffset != 0 {
		t.Fatalf("acked publish after a refused AckNone one: %+v %v (want offset 0: nothing stored before it)", res, err)
	}
	acked.Close(ctx)
}

package client

import (
	"bytes"
	"testing"
	"time"
)

// A poll whose records add up to more than a frame can carry gets those that fit and
// the next poll gets the rest, each as delivery 1 (docs/soak.md finding 5: the broker
// answered with one frame over the 16 MiB limit, the SDK refused it, and the same
// records were redelivered in one too large answer every time). The broker runs with
// FELIX_MAX_FRAME_BYTES at 1 MiB so the test moves 1.3 MiB instead of 20 MiB (it ran
// close to its 30 s context under -race on a loaded machine); a first answer holding
// every record would be one frame over that bound, so the split is asserted.
func TestGroupPollLargerThanAFrame(t *testing.T) {
	b := startBroker(t, "", "FELIX_MAX_FRAME_BYTES=1048576")
	b.createStream("jobs", true)
	c := b.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("jobs", PublisherOptions{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	const n, size = 4, 320 << 10 // 1.25 MiB in all: base64 in one answer would be 1.7 MiB
	for i := range n {
		if _, err := p.PublishSync(ctx, bytes.Repeat([]byte{byte('a' + i)}, size)); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(ctx)
	seen := 0
	for poll := 0; seen < n && poll < n; poll++ {
		recs, err := c.Poll(ctx, "jobs", 0, "g", 256, 2*time.Second)
		if err != nil || len(recs) == 0 {
			t.Fatalf("poll %d after %d records: %d records, %v", poll, seen, len(recs), err)
		}
		if len(recs) == n {
			t.Fatalf("poll %d: all %d records in one answer, more than a 1 MiB frame holds", poll, n)
		}
		for _, r := range recs {
			if r.Offset != uint64(seen) || r.Delivery != 1 || len(r.Payload) != size || r.Payload[0] != byte('a'+seen) {
				t.Fatalf("poll %d: record %d (delivery %d, %d bytes), want offset %d delivery 1", poll, r.Offset, r.Delivery, len(r.Payload), seen)
			}
			seen++
		}
	}
	if seen != n {
		t.Fatalf("%d of %d records delivered", seen, n)
	}
}

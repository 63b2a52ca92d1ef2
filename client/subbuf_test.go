package client

import (
	"fmt"
	"testing"

	"felix/proto"
)

// reuseFake serves one subscription whose event stream carries frames frames of per
// records each, payload "r<offset>" padded to 64 bytes.
func reuseFake(t *testing.T, frames, per int) *fakeBroker {
	return startFake(t, func(x *exchange, m proto.Message) {
		if _, ok := m.(*proto.Subscribe); !ok {
			return
		}
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		out := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 1})
		x.reply(&proto.Subscribed{SubscriptionID: 1})
		for f := range frames {
			ps := make([][]byte, per)
			for i := range ps {
				ps[i] = reusePayload(uint64(f*per + i))
			}
			out = proto.AppendSharedEventBatch(out, uint64(f*per), true, ps)
		}
		_, _ = es.Write(out)
	})
}

func reusePayload(off uint64) []byte { return fmt.Appendf(nil, "r%-63d", off) }

// TestReuseBuffersNext: with ReuseBuffers every record Next returns is right when
// returned (frames recycled through the free list are refilled, not shared), over more
// frames than the subscription queue holds.
func TestReuseBuffersNext(t *testing.T) {
	const frames, per = 200, 7
	c := reuseFake(t, frames, per).dial(WithSubscriptionQueue(4))
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{ReuseBuffers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	for off := range uint64(frames * per) {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Offset != off || string(r.Payload) != string(reusePayload(off)) {
			t.Fatalf("record at %d: %q, want offset %d %q", r.Offset, r.Payload, off, reusePayload(off))
		}
	}
}

// TestReuseBuffersRecordsCopies: the channel form with ReuseBuffers hands out copies, so
// records kept after later frames were read (and their buffers recycled) are intact.
// Without the copy (ownRecord) the kept payloads are overwritten by later frames.
func TestReuseBuffersRecordsCopies(t *testing.T) {
	const frames, per = 50, 3
	c := reuseFake(t, frames, per).dial(WithSubscriptionQueue(2))
	ctx := testCtx(t)
	sub, err := c.Subscribe(ctx, "s", Earliest, SubscribeOptions{ReuseBuffers: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	records := sub.Records(ctx)
	var kept []Record
	for range frames * per {
		r, ok := <-records
		if !ok {
			t.Fatal(sub.Err())
		}
		kept = append(kept, r)
	}
	for i, r := range kept {
		if want := reusePayload(uint64(i)); r.Offset != uint64(i) || string(r.Payload) != string(want) {
			t.Fatalf("kept record %d: offset %d %q, want %q", i, r.Offset, r.Payload, want)
		}
	}
}

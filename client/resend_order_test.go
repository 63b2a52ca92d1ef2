package client

import (
	"strconv"
	"sync"
	"testing"

	"felix/proto"

	"github.com/quic-go/quic-go"
)

// TestIdempotentResendKeepsKeyOrder: an idempotent publisher whose connection dies with
// batches of one key in flight sends them again in their first-send order, before any
// batch published later (docs/client.md: records of one key keep their order). The fake
// broker holds the first connection's batches unanswered, drops it at the eighth, and
// records the order in which the second connection delivers the payloads; every one of
// 0..63 must arrive there once, in order. (Before the fix the re-sends went to the front
// of the queue one by one, reversed, and later batches could overtake them.)
func TestIdempotentResendKeepsKeyOrder(t *testing.T) {
	const held, total = 8, 64
	var (
		mu    sync.Mutex
		first *quic.Conn
		inOne int
		order []int
	)
	fb := startFake(t, func(x *exchange, m proto.Message) {
		b := m.(*proto.JSONPublishBatch)
		mu.Lock()
		if first == nil {
			first = x.conn
		}
		if x.conn == first {
			if inOne++; inOne == held {
				x.drop()
			}
			mu.Unlock()
			return
		}
		for _, p := range b.Payloads {
			n, _ := strconv.Atoi(string(p))
			order = append(order, n)
		}
		mu.Unlock()
		first, last := uint64(0), uint64(len(b.Payloads)-1)
		x.reply(&proto.PublishOK{RequestID: *b.RequestID, FirstOffset: &first, LastOffset: &last})
	})
	c := fb.dial()
	ctx := testCtx(t)
	p, err := c.NewPublisher("s", PublisherOptions{Idempotent: true, Offsets: true, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	pending := make([]Pending, total)
	for i := range pending {
		if pending[i], err = p.PublishKeyed(ctx, []byte("K"), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i, pd := range pending {
		if _, err := pd.Wait(ctx); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(order) != total {
		t.Fatalf("second connection stored %d records, want %d: %v", len(order), total, order)
	}
	for i, n := range order {
		if n != i {
			t.Fatalf("records of one key out of order after the re-send: %v", order)
		}
	}
}

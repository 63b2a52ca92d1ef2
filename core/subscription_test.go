package core

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// collect reads every delivery available now and returns the records by
// offset, failing on a duplicate or an out-of-order offset.
func collect(t *testing.T, sub *Subscription, from uint64) ([]string, []Delivery) {
	t.Helper()
	var got []string
	ds := drain(t, sub)
	next := from
	for _, d := range ds {
		if d.BaseOffset != next+d.Dropped {
			t.Fatalf("delivery at %d (dropped %d), expected %d", d.BaseOffset, d.Dropped, next)
		}
		got = append(got, records(t, d)...)
		next = d.BaseOffset + uint64(d.Count)
	}
	return got, ds
}

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, prefix+"-"+strconv.Itoa(i))
	}
	return out
}

func TestSubscribeHistoryJoinsLiveWithoutGapOrDuplicate(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HistoryFrameBytes = 8 })
			h.create(StreamSpec{Name: testStream, Shards: 1, Durable: durable})
			h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("p", 10)})
			h.step(1)
			h.hold(true)
			h.publish(&PublishRequest{Stream: testStream, Payloads: names2("q", 3)}) // in flight (durable)
			h.step(1)
			sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 4, WithOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			h.hold(false)
			h.publish(&PublishRequest{Stream: testStream, Payloads: names2("r", 2)})
			h.step(2)
			got, ds := collect(t, sub, 4)
			want := append(append(names("p", 4, 10), names("q", 0, 3)...), names("r", 0, 2)...)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			if !ds[0].History {
				t.Fatal("first delivery is not history")
			}
			if durable && len(ds) < 4 {
				t.Fatalf("history of 6 records in frames of 8 bytes came in %d deliveries", len(ds))
			}
		})
	}
}

func names2(prefix string, n int) [][]byte { return payloads(prefix, n) }

func TestSubscribeStartPositions(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("p", 5)})
	h.step(1)
	latest, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	earliest, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	atTail, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 5})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("n", 1)})
	h.step(1)
	if got, _ := collect(t, latest, 5); !reflect.DeepEqual(got, []string{"n-0"}) {
		t.Fatalf("latest got %v", got)
	}
	if got, _ := collect(t, atTail, 5); !reflect.DeepEqual(got, []string{"n-0"}) {
		t.Fatalf("offset = tail got %v", got)
	}
	if got, _ := collect(t, earliest, 0); len(got) != 6 {
		t.Fatalf("earliest got %v", got)
	}
	_, err = h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 7})
	var cerr *CursorError
	if !errors.As(err, &cerr) || *cerr != (CursorError{Reason: CursorInFuture, Requested: 7, Available: 6}) {
		t.Fatalf("in_future: %v", err)
	}
	h.store.logs[fakeLogKey(logRecords, testStream, 0)].trim(3)
	_, err = h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 1})
	if !errors.As(err, &cerr) || *cerr != (CursorError{Reason: CursorTooOld, Requested: 1, Available: 3}) {
		t.Fatalf("too_old: %v", err)
	}
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := collect(t, sub, 3); !reflect.DeepEqual(got, []string{"p-3", "p-4", "n-0"}) {
		t.Fatalf("earliest after trim got %v", got)
	}
}

func TestHistoryTrimmedWhileReadingIsTooOld(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("p", 5)})
	h.step(1)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	h.store.logs[fakeLogKey(logRecords, testStream, 0)].trim(2)
	_, err = nextNow(t, sub)
	var cerr *CursorError
	if !errors.As(err, &cerr) || cerr.Reason != CursorTooOld || cerr.Available != 2 {
		t.Fatalf("history read below the trimmed head: %v", err)
	}
}

func TestOffsetsVariantsAreSharedPerBatch(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	var subs []*Subscription
	for i := range 4 {
		sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, WithOffsets: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 2)})
	h.step(1)
	var frames [4]Delivery
	for i, sub := range subs {
		ds := drain(t, sub)
		if len(ds) != 1 {
			t.Fatalf("sub %d got %d deliveries", i, len(ds))
		}
		frames[i] = ds[0]
		withOffsets, _, _, err := decodeEventFrame(ds[0].Frame, nil)
		if err != nil || withOffsets != (i%2 == 0) {
			t.Fatalf("sub %d: offsets %v, %v", i, withOffsets, err)
		}
	}
	if &frames[0].Frame[0] != &frames[2].Frame[0] || &frames[1].Frame[0] != &frames[3].Frame[0] {
		t.Fatal("subscribers of one variant do not share the frame")
	}
}

// An in-memory shard has no log to catch up from: a full DropNew subscriber
// loses the batch, counted and shown as the gap of the next delivery.
func TestDropNewGapsAreTheCountedDrops(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 2, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(strconv.Itoa(i), i+1)})
		h.step(1)
	}
	got, ds := collect(t, sub, 0)
	if len(ds) != 2 || sub.Dropped() != 3+4+5 {
		t.Fatalf("deliveries %d, dropped %d", len(ds), sub.Dropped())
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("z", 1)})
	h.step(1)
	_, more := collect(t, sub, 3)
	if len(more) != 1 || more[0].Dropped != 12 || more[0].BaseOffset != 15 {
		t.Fatalf("delivery after drops: %+v", more)
	}
	if len(got) != 3 {
		t.Fatalf("records %v", got)
	}
	if v := h.e.Metrics(); v == nil {
		t.Fatal("no metrics set")
	}
}

func TestBlockHoldsPublishesUntilTheSubscriberDrains(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	slow, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, Policy: Block})
	if err != nil {
		t.Fatal(err)
	}
	fast, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 100})
	if err != nil {
		t.Fatal(err)
	}
	a3 := h.publishThirdHeld()
	if got, _ := collect(t, fast, 0); len(got) != 2 {
		t.Fatalf("fast subscriber got %v while the slow one blocks", got)
	}
	if _, err := nextNow(t, slow); err != nil { // a; b moves from overflow into the queue
		t.Fatal(err)
	}
	h.step(1)
	if a3.calls != 1 || a3.res.FirstOffset != 2 {
		t.Fatalf("held publish after the drain: %+v", a3)
	}
	got, _ := collect(t, slow, 1)
	if !reflect.DeepEqual(got, []string{"b-0", "c-0"}) {
		t.Fatalf("slow subscriber got %v", got)
	}
}

func TestBlockTimeoutEndsTheSlowSubscriber(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HeldPublishes = 1 })
	h.create(StreamSpec{Name: testStream, Shards: 1})
	slow, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, Policy: Block, BlockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 1)})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 1)})
	held := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("c", 1)})
	shed := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("d", 1)})
	h.step(1)
	if held.calls != 0 || !errors.Is(shed.err, ErrOverloaded) {
		t.Fatalf("held %+v, shed %+v", held, shed)
	}
	h.clock.Advance(999 * time.Millisecond)
	h.step(1)
	if held.calls != 0 {
		t.Fatal("released before the block timeout")
	}
	h.clock.Advance(time.Millisecond)
	h.step(1)
	if held.calls != 1 || held.err != nil {
		t.Fatalf("held publish after the timeout: %+v", held)
	}
	d, err := nextNow(t, slow)
	if err != nil || d.BaseOffset != 0 {
		t.Fatalf("queued frame before the end: %+v %v", d, err)
	}
	if _, err := nextNow(t, slow); !errors.Is(err, ErrSlowSubscriber) {
		t.Fatalf("after the queued frame: %v", err)
	}
}

func TestClosedBlockSubscriberReleasesTheShard(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	slow, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, Policy: Block})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 1)})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 1)})
	held := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("c", 1)})
	h.step(1)
	if err := slow.Close(); err != nil {
		t.Fatal(err)
	}
	h.step(1)
	if held.calls != 1 {
		t.Fatal("closing the blocking subscriber did not release the shard")
	}
	if _, err := nextNow(t, slow); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestInMemoryReplayRing(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, MemoryReplayRecords: 4})
	for i := range 3 {
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(strconv.Itoa(i), 2)})
	}
	h.step(1)
	// Ring keeps batches 1 and 2 (offsets 2..5); batch 0 was evicted.
	_, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 1})
	var cerr *CursorError
	if !errors.As(err, &cerr) || cerr.Reason != CursorTooOld || cerr.Available != 2 {
		t.Fatalf("evicted offset: %v", err)
	}
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 3, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	got, ds := collect(t, sub, 3)
	if !reflect.DeepEqual(got, []string{"1-1", "2-0", "2-1"}) {
		t.Fatalf("replay got %v", got)
	}
	for _, d := range ds {
		if withOffsets, _, _, _ := decodeEventFrame(d.Frame, nil); withOffsets {
			t.Fatal("in-memory frame carries offsets")
		}
	}
}

func TestUnreadableInFlightBatchEndsSubscribers(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.hold(true)
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 2)}) // staged with no subscriber
	h.step(1)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 0})
	if err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.readErr = errors.New("injected read error")
	store.mu.Unlock()
	h.hold(false)
	h.step(1)
	if a.err != nil || a.calls != 1 {
		t.Fatalf("the publish itself committed: %+v", a)
	}
	if _, err := nextNow(t, sub); !errors.Is(err, ErrStorageFailed) {
		t.Fatalf("subscriber of an unreadable batch: %v", err)
	}
}

func TestHistoryReportsOffsetsWithoutRecordsAsSkipped(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 2)})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 2)})
	h.step(1)
	// Offset 2 holds no data record (as a generation-start record would).
	store.logs[fakeLogKey(logRecords, testStream, 0)].hide(2)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	ds := drain(t, sub)
	if len(ds) != 2 || ds[0].BaseOffset != 0 || ds[0].Count != 2 || ds[1].BaseOffset != 3 || ds[1].Skipped != 1 || ds[1].Count != 1 {
		t.Fatalf("deliveries %+v", ds)
	}
}

func TestSubscribeInsideABatchInFlight(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.hold(true)
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 5)})
	h.step(1)
	mid, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 2, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 3})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := h.e.Subscribe(SubscribeRequest{Stream: testStream})
	if err != nil {
		t.Fatal(err)
	}
	h.hold(false)
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 1)})
	h.step(2)
	if got, _ := collect(t, mid, 2); !reflect.DeepEqual(got, []string{"a-2", "a-3", "a-4", "b-0"}) {
		t.Fatalf("from offset 2: %v", got)
	}
	got, ds := collect(t, plain, 3)
	if !reflect.DeepEqual(got, []string{"a-3", "a-4", "b-0"}) {
		t.Fatalf("from offset 3: %v", got)
	}
	if withOffsets, _, _, _ := decodeEventFrame(ds[0].Frame, nil); withOffsets {
		t.Fatal("cut frame carries offsets the subscriber did not ask for")
	}
	if got, _ := collect(t, latest, 5); !reflect.DeepEqual(got, []string{"b-0"}) {
		t.Fatalf("latest: %v", got)
	}
}

func TestDeleteDuringHistoryEndsTheSubscription(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HistoryFrameBytes = 1 })
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("a", 3)})
	h.step(1)
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 1)}) // queued live
	h.step(1)
	if d, err := nextNow(t, sub); err != nil || !d.History || d.Count != 1 {
		t.Fatalf("first history page: %+v %v", d, err)
	}
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	if _, err := nextNow(t, sub); !errors.Is(err, ErrNotFound) {
		t.Fatalf("history after delete: %v", err)
	}
}

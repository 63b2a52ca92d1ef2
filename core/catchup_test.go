package core

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

// shardOf returns shard i of name (tests in package core read its metrics).
func shardOf(e *Engine, name StreamName, i int) *streamShard { return e.lookup(name).shards[i] }

// A DropNew subscriber of a durable shard whose queue is full reads the
// batches it could not take from the log and rejoins live delivery: every
// record, in order, no gap, nothing counted dropped, one catch-up episode.
// With the catch-up turned off (catchUp.enabled false: the old DropNew) the
// same run loses 3+4+5 records.
func TestFullDurableSubscriberCatchesUpFromTheLog(t *testing.T) {
	for _, catchUp := range []bool{true, false} {
		t.Run(fmt.Sprintf("catchup=%v", catchUp), func(t *testing.T) {
			h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HistoryFrameBytes = 16 })
			h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
			sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 2, WithOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			sub.mu.Lock()
			sub.catchUp.enabled = catchUp
			sub.mu.Unlock()
			var want []string
			for i := range 5 {
				h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(strconv.Itoa(i), i+1)})
				h.step(1)
				want = append(want, names(strconv.Itoa(i), 0, i+1)...)
			}
			got, ds := collect(t, sub, 0)
			m := shardOf(h.e, testStream, 0).metrics
			if !catchUp {
				if sub.Dropped() != 12 || len(got) != 3 || m.drops.Get() != 12 {
					t.Fatalf("old DropNew: %d records, dropped %d (metric %d)", len(got), sub.Dropped(), m.drops.Get())
				}
				return
			}
			if !reflect.DeepEqual(got, want) || sub.Dropped() != 0 || m.drops.Get() != 0 {
				t.Fatalf("got %v, dropped %d (metric %d)\nwant %v", got, sub.Dropped(), m.drops.Get(), want)
			}
			if m.catchUps.Get() != 1 || m.catchUpRecords.Get() != 12 || !ds[len(ds)-1].History || ds[0].History {
				t.Fatalf("episodes %d, records read %d, deliveries %+v", m.catchUps.Get(), m.catchUpRecords.Get(), ds)
			}
			h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("z", 2)}) // live again
			h.step(1)
			more, ds := collect(t, sub, 15)
			if !reflect.DeepEqual(more, names("z", 0, 2)) || len(ds) != 1 || ds[0].History {
				t.Fatalf("after the catch-up: %v %+v", more, ds)
			}
		})
	}
}

// Batches published while the subscriber is reading its catch-up from the
// log extend it; the subscriber reaches the tail, rejoins live, can fall
// behind again (a second episode) and still sees every record once, in
// order.
func TestCatchUpFollowsPublishesWhileReading(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HistoryFrameBytes = 8 })
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	next := uint64(0)
	take := func(n int) {
		for range n {
			d, err := nextNow(t, sub)
			if err != nil {
				return
			}
			if d.BaseOffset != next || d.Dropped != 0 {
				t.Fatalf("delivery at %d (dropped %d), expected %d", d.BaseOffset, d.Dropped, next)
			}
			got = append(got, records(t, d)...)
			next = d.BaseOffset + uint64(d.Count)
		}
	}
	for round := range 30 {
		p := "r" + strconv.Itoa(round)
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(p, 1+round%4)})
		h.step(1)
		want = append(want, names(p, 0, 1+round%4)...)
		take(round % 3) // slower than the publisher: 0, 1 or 2 deliveries a round
		if round == 20 {
			take(1000) // catch up fully: live again
		}
	}
	take(1000)
	if !reflect.DeepEqual(got, want) || sub.Dropped() != 0 {
		t.Fatalf("got %v\nwant %v (dropped %d)", got, want, sub.Dropped())
	}
	if n := shardOf(h.e, testStream, 0).metrics.catchUps.Get(); n < 2 {
		t.Fatalf("catch-up episodes %d, want a second one after rejoining", n)
	}
}

// Records retention removed before the catching-up subscriber read them are
// the only loss: the next delivery starts at the oldest retained offset and
// reports the gap (Dropped), counted in Dropped() and the drops metric; the
// subscription goes on.
func TestCatchUpTrimmedByRetentionIsAGap(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.HistoryFrameBytes = 16 })
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	sub, err := h.e.Subscribe(SubscribeRequest{Stream: testStream, QueueCapacity: 1, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(strconv.Itoa(i), 3)})
		h.step(1)
	}
	h.store.logs[fakeLogKey(logRecords, testStream, 0)].trim(7) // the catch-up starts at 3
	got, ds := collect(t, sub, 0)
	want := append(names("0", 0, 3), "2-1", "2-2", "3-0", "3-1", "3-2")
	if !reflect.DeepEqual(got, want) || ds[1].BaseOffset != 7 || ds[1].Dropped != 4 {
		t.Fatalf("got %v %+v\nwant %v, the second delivery at 7 after a gap of 4", got, ds, want)
	}
	if m := shardOf(h.e, testStream, 0).metrics; sub.Dropped() != 4 || m.drops.Get() != 4 {
		t.Fatalf("dropped %d, metric %d", sub.Dropped(), m.drops.Get())
	}
	h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("z", 1)})
	h.step(1)
	if more, _ := collect(t, sub, 12); !reflect.DeepEqual(more, []string{"z-0"}) {
		t.Fatalf("after the gap: %v", more)
	}
}

// On the real log, a subscriber that reads nothing while a publisher appends
// 2000 batches of 10 records (queue of 4 frames) then reads them all, while
// the publisher goes on with 500 more batches: on a durable stream it gets all
// 25 000 records in order with no gap and nothing dropped; on an in-memory
// stream the same run reports the drops.
func TestSlowSubscriberUnderAFastPublisher(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			e := newOptionsEngine(t, &fakeClock{}, func(c *Config) { c.SegmentBytes = 1 << 20; c.Fsync = FsyncNone })
			name := StreamName{Tenant: "t", Namespace: "n", Stream: "slow"}
			if err := e.CreateStream(StreamSpec{Name: name, Shards: 1, Durable: durable}); err != nil {
				t.Fatal(err)
			}
			sub, err := e.Subscribe(SubscribeRequest{Stream: name, QueueCapacity: 4, WithOffsets: true})
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			batch := func(i int) [][]byte {
				out := make([][]byte, 10)
				for j := range out {
					out[j] = []byte(strconv.Itoa(i*10 + j))
				}
				return out
			}
			for i := range 2000 {
				if _, err := publishSync(t, e, &PublishRequest{Stream: name, Payloads: batch(i)}); err != nil {
					t.Fatal(err)
				}
			}
			done := make(chan error, 1)
			go func() {
				for i := 2000; i < 2500; i++ {
					if _, err := publishSync(t, e, &PublishRequest{Stream: name, Payloads: batch(i)}); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			next, lost := uint64(0), uint64(0)
			for next+lost < 25000 {
				d, err := sub.Next(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				lost += d.Dropped
				if d.BaseOffset != next+d.Dropped {
					t.Fatalf("delivery at %d, expected %d + dropped %d", d.BaseOffset, next, d.Dropped)
				}
				i := int(d.BaseOffset)
				_, _, _, _ = decodeEventFrame(d.Frame, func(p []byte) {
					if string(p) != strconv.Itoa(i) {
						t.Fatalf("record %q at offset %d", p, i)
					}
					i++
				})
				next = d.BaseOffset + uint64(d.Count)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if durable && (lost != 0 || sub.Dropped() != 0) {
				t.Fatalf("durable: %d records lost (Dropped %d)", lost, sub.Dropped())
			}
			if !durable && (lost == 0 || sub.Dropped() == 0) {
				t.Fatalf("in-memory: no drops reported (%d, %d)", lost, sub.Dropped())
			}
			t.Logf("durable=%v: delivered %d, dropped %d, catch-up episodes %d", durable, next-lost, sub.Dropped(),
				shardOf(e, name, 0).metrics.catchUps.Get())
		})
	}
}

// BenchmarkSubscriptionPushPop is one live frame through a subscriber's queue
// (push on the core, pop by the consumer): the per-subscriber step of fanout
// that the catch-up check sits in (docs/bench/catchup.md).
func BenchmarkSubscriptionPushPop(b *testing.B) {
	q := &Subscription{capacity: 512, items: make([]Delivery, 512), notify: make(chan struct{}, 1)}
	d := Delivery{Frame: []byte("frame"), Count: 1}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		d.BaseOffset = uint64(i)
		q.push(d)
		if _, ok, _ := q.pop(); !ok {
			b.Fatal("empty")
		}
	}
}

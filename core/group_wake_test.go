package core

import (
	"fmt"
	"testing"
	"time"

	"felix/core/groups"
)

func (h *harness) groupNack(group string, consumer uint64, delay time.Duration, offs ...uint64) *groupAnswer {
	h.t.Helper()
	a := &groupAnswer{}
	refs := make([]groups.Ref, len(offs))
	for i, o := range offs {
		refs[i] = groups.Ref{Offset: o}
	}
	req := GroupAckRequest{Stream: testStream, Group: group, Consumer: consumer, Refs: refs, DelayMillis: delay.Milliseconds()}
	if err := h.e.GroupNack(req, a.plain); err != nil {
		h.t.Fatalf("GroupNack: %v", err)
	}
	h.step(3)
	if a.calls != 1 || a.err != nil {
		h.t.Fatalf("nack: %d calls, %v", a.calls, a.err)
	}
	return a
}

// A nack that makes a record ready at once answers a parked poll at once,
// without a clock advance (no periodic re-check).
func TestGroupNackWakesParkedPoll(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
	parked := h.groupPoll("g", 2, 1, time.Hour)
	if parked.calls != 0 {
		t.Fatalf("poll answered with nothing ready: %+v", parked)
	}
	h.groupNack("g", 1, 0, 0)
	wantRecords(t, parked, 0)
	if parked.records[0].Delivery != 2 {
		t.Fatalf("delivery %d, want 2", parked.records[0].Delivery)
	}
}

// A delayed nack wakes a parked poll when the record becomes ready, long
// before the poll's own deadline.
func TestGroupDelayedNackWakesParkedPollWhenReady(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
	parked := h.groupPoll("g", 2, 1, time.Hour)
	h.groupNack("g", 1, 50*time.Millisecond, 0)
	h.clock.Advance(49 * time.Millisecond)
	h.step(3)
	if parked.calls != 0 {
		t.Fatalf("answered before the record was ready: %+v", parked)
	}
	h.clock.Advance(2 * time.Millisecond)
	h.step(3)
	wantRecords(t, parked, 0)
}

// Commits on one shard wake only that shard's parked polls; a shard whose
// group state closed leaves no hook behind.
func TestGroupCommitHookClearedOnClose(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	a := h.groupPoll("g", 1, 1, time.Hour)
	s := h.e.lookup(testStream).shards[0]
	if s.onCommit == nil {
		t.Fatal("no commit hook on a shard with group state")
	}
	if err := h.e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	h.step(5)
	if a.calls != 1 || a.err == nil {
		t.Fatalf("parked poll of a deleted stream: %+v", a)
	}
	if s.onCommit != nil {
		t.Fatal("commit hook left on a closed shard")
	}
}

// The group logs compact once they hold far more records than the live
// state, and a restart from the compacted logs restores the group: its
// cursor, its dead letters, and the lease outstanding at the restart (with one
// delivery allowed, dead-lettered at open).
func TestGroupLogsCompactAndRecover(t *testing.T) {
	old := groupCompactMin
	groupCompactMin = 64
	t.Cleanup(func() { groupCompactMin = old })
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(groupSpec)
	h.publishN("a", 301)
	create := &groupAnswer{}
	if err := h.e.CreateGroup(testStream, 0, "g", groups.GroupConfig{MaxDeliveries: 1}, create.plain); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
	h.groupNack("g", 1, 0, 0) // one delivery allowed: dead-lettered
	for off := uint64(1); off < 299; off++ {
		wantRecords(t, h.groupPoll("g", 1, 1, 0), off)
		if a := h.groupAck("g", 1, off); a.calls != 1 || a.err != nil {
			t.Fatalf("ack %d: %+v", off, a)
		}
	}
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 299) // still leased at the restart
	h.step(3)
	cursor := store.logs[fakeLogKey(logGroupCursors, testStream, 0)]
	dead := store.logs[fakeLogKey(logDeadLetters, testStream, 0)]
	if held := cursor.NextOffset() - cursor.EarliestOffset(); cursor.EarliestOffset() == 0 || held > 2*groupCompactMin {
		t.Fatalf("cursor log not compacted: earliest %d, next %d", cursor.EarliestOffset(), cursor.NextOffset())
	}
	if dead.EarliestOffset() == 0 {
		t.Fatalf("dead-letter log not compacted: earliest %d, next %d", dead.EarliestOffset(), dead.NextOffset())
	}
	h.close()
	h2 := newHarness(t, 1, store, nil)
	h2.create(groupSpec)
	a := h2.groupPoll("g", 2, 10, 0)
	if got := fmt.Sprint(recordOffsets(a.records)); got != "[300]" || a.records[0].Delivery != 1 {
		t.Fatalf("after compaction and restart: %s %+v (%d calls, %v)", got, a.records, a.calls, a.err)
	}
	var list []groups.DeadLetter
	if err := h2.e.DeadLetters(DeadLettersRequest{Stream: testStream, Group: "g", Limit: 5}, func(l []groups.DeadLetter, _ uint64, _ error) { list = l }); err != nil {
		t.Fatal(err)
	}
	h2.step(3)
	if len(list) != 2 || list[0].Offset != 0 || list[1].Offset != 299 {
		t.Fatalf("dead letters after compaction and restart: %+v", list)
	}
}

// An answer never carries more than MaxBytes of payload (soak finding 5: one poll's
// 256 records were larger than a frame, so its answer was lost on every redelivery
// and they were never delivered). The records that do not fit are given back: a
// parked poll of another consumer gets them at once, as delivery 1; a record larger
// than MaxBytes on its own is still handed out, alone.
func TestGroupPollAnswerBoundedByMaxBytes(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	sizes := []int{100, 100, 100, 300, 100}
	recs := make([][]byte, len(sizes))
	for i, n := range sizes {
		recs[i] = make([]byte, n)
		recs[i][0] = byte(i)
	}
	if a := h.publish(&PublishRequest{Stream: testStream, Payloads: recs}); a == nil {
		t.Fatal("publish")
	}
	h.step(3)
	poll := func(consumer uint64, wait time.Duration) *groupAnswer {
		a := &groupAnswer{}
		req := GroupPollRequest{Stream: testStream, Group: "g", Consumer: consumer, MaxRecords: 10, MaxWait: wait, MaxBytes: 250}
		if err := h.e.GroupPoll(req, a.poll); err != nil {
			t.Fatal(err)
		}
		h.step(3)
		return a
	}
	h.hold(true) // consumer 1's delivery record stays in flight: its answer waits
	first := poll(1, 0)
	parked := poll(3, time.Second) // everything is leased to consumer 1: parks
	if first.calls != 0 || parked.calls != 0 {
		t.Fatalf("answered before the delivery record was durable: %+v %+v", first, parked)
	}
	h.hold(false)
	h.step(3)
	wantRecords(t, first, 0, 1) // 300 bytes would not fit: offsets 2, 3, 4 given back
	for i, r := range first.records {
		if len(r.Payload) != 100 || r.Payload[0] != byte(i) || r.Delivery != 1 {
			t.Fatalf("record %d: %d bytes, first %d, delivery %d", r.Offset, len(r.Payload), r.Payload[0], r.Delivery)
		}
	}
	if parked.calls == 0 {
		h.clock.Advance(time.Millisecond) // the group timer's minimum delay
		h.step(3)
	}
	wantRecords(t, parked, 2) // 100 + 300 > 250: offsets 3 and 4 given back again
	if parked.records[0].Delivery != 1 {
		t.Fatalf("given-back record delivered as delivery %d, want 1", parked.records[0].Delivery)
	}
	large := poll(2, 0)
	wantRecords(t, large, 3) // alone, though larger than MaxBytes
	if p := large.records[0]; len(p.Payload) != 300 || p.Payload[0] != 3 || p.Delivery != 1 {
		t.Fatalf("large record: %d bytes, first %d, delivery %d", len(p.Payload), p.Payload[0], p.Delivery)
	}
	wantRecords(t, poll(1, 0), 4)
}

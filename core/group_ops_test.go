package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"felix/core/groups"
)

// groupAnswer collects one asynchronous group answer.
type groupAnswer struct {
	calls   int
	records []GroupRecord
	err     error
}

func (a *groupAnswer) poll(recs []GroupRecord, err error) { a.calls++; a.records, a.err = recs, err }
func (a *groupAnswer) plain(err error)                    { a.calls++; a.err = err }

var groupSpec = StreamSpec{Name: testStream, Shards: 1, Durable: true}

func (h *harness) groupPoll(group string, consumer uint64, max int, wait time.Duration) *groupAnswer {
	h.t.Helper()
	a := &groupAnswer{}
	req := GroupPollRequest{Stream: testStream, Group: group, Consumer: consumer, MaxRecords: max, MaxWait: wait}
	if err := h.e.GroupPoll(req, a.poll); err != nil {
		h.t.Fatalf("GroupPoll: %v", err)
	}
	h.step(3)
	return a
}

func (h *harness) groupAck(group string, consumer uint64, offs ...uint64) *groupAnswer {
	h.t.Helper()
	a := &groupAnswer{}
	refs := make([]groups.Ref, len(offs))
	for i, o := range offs {
		refs[i] = groups.Ref{Offset: o}
	}
	if err := h.e.GroupAck(GroupAckRequest{Stream: testStream, Group: group, Consumer: consumer, Refs: refs}, a.plain); err != nil {
		h.t.Fatalf("GroupAck: %v", err)
	}
	h.step(3)
	return a
}

func (h *harness) publishN(prefix string, n int) {
	h.t.Helper()
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads(prefix, n)})
	h.step(3)
	if a.calls != 1 || a.err != nil {
		h.t.Fatalf("publish: %d calls, %v", a.calls, a.err)
	}
}

func recordOffsets(recs []GroupRecord) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Offset
	}
	return out
}

func wantRecords(t *testing.T, a *groupAnswer, want ...uint64) {
	t.Helper()
	if a.calls != 1 || a.err != nil {
		t.Fatalf("answer: %d calls, err %v", a.calls, a.err)
	}
	got := recordOffsets(a.records)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("records %v, want %v", got, want)
	}
}

func TestGroupPollAckAndRestartResumes(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(groupSpec)
	h.publishN("a", 5)
	a := h.groupPoll("billing", 1, 3, 0)
	wantRecords(t, a, 0, 1, 2)
	if string(a.records[1].Payload) != "a-1" || a.records[1].Delivery != 1 {
		t.Fatalf("record %+v", a.records[1])
	}
	if ack := h.groupAck("billing", 1, 0, 1, 2); ack.calls != 1 || ack.err != nil {
		t.Fatalf("ack: %+v", ack)
	}
	h.close()

	h = newHarness(t, 1, store, nil)
	h.create(groupSpec)
	wantRecords(t, h.groupPoll("billing", 2, 10, 0), 3, 4)
}

func TestGroupAckWaitsForItsCursorRecordAndCrashRedelivers(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(groupSpec)
	h.publishN("a", 2)
	wantRecords(t, h.groupPoll("g", 1, 2, 0), 0, 1)
	h.hold(true) // appends are written but never complete
	ack := h.groupAck("g", 1, 0, 1)
	h.step(5)
	if ack.calls != 0 {
		t.Fatalf("ack answered (%v) before its cursor record was durable", ack.err)
	}
	store.crash()
	h2 := newHarness(t, 1, store, nil)
	h2.create(groupSpec)
	a := h2.groupPoll("g", 1, 10, 0)
	wantRecords(t, a, 0, 1)
	if a.records[0].Delivery != 2 {
		t.Fatalf("delivery %d after the crash, want 2", a.records[0].Delivery)
	}
}

func TestGroupLaggingNeverHoldsUpPublishes(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	wantRecords(t, h.groupPoll("slow", 1, 1, 0), 0) // leased, never acked
	parked := h.groupPoll("idle", 2, 1, time.Hour)  // parked
	_ = parked
	for i := 0; i < 200; i++ {
		a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("b", 10)})
		h.step(2)
		if a.calls != 1 || a.err != nil {
			t.Fatalf("publish %d: %d calls, %v", i, a.calls, a.err)
		}
	}
}

func TestGroupParkedPollAnswersOnCommitOrTimeout(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	a := h.groupPoll("g", 1, 10, time.Second)
	if a.calls != 0 {
		t.Fatalf("empty poll answered at once: %+v", a)
	}
	h.publishN("a", 2) // the commit hook answers at once: no clock advance
	wantRecords(t, a, 0, 1)

	b := h.groupPoll("g", 2, 10, time.Second)
	h.clock.Advance(time.Second - time.Millisecond)
	h.step(3)
	if b.calls != 0 {
		t.Fatalf("parked poll answered before its wait: %+v", b)
	}
	h.clock.Advance(2 * time.Millisecond)
	h.step(3)
	wantRecords(t, b)
}

func TestGroupLeaseExpiryRedeliversThenDeadLetters(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	for d := 1; d <= groups.DefaultMaxDeliveries; d++ {
		a := h.groupPoll("g", uint64(d), 1, 0)
		wantRecords(t, a, 0)
		if a.records[0].Delivery != uint32(d) {
			t.Fatalf("delivery %d, want %d", a.records[0].Delivery, d)
		}
		h.clock.Advance(groups.DefaultVisibilityTimeoutMillis * time.Millisecond)
		h.step(3) // the core timer expires the lease
	}
	wantRecords(t, h.groupPoll("g", 9, 1, 0))
	var list []groups.DeadLetter
	var calls int
	err := h.e.DeadLetters(DeadLettersRequest{Stream: testStream, Group: "g", Limit: 10}, func(l []groups.DeadLetter, _ uint64, err error) {
		calls++
		list = l
		if err != nil {
			t.Error(err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if calls != 1 || len(list) != 1 || list[0].Offset != 0 || list[0].Deliveries != groups.DefaultMaxDeliveries {
		t.Fatalf("dead letters %+v (%d calls)", list, calls)
	}
	n := -1
	if err := h.e.Redrive(RedriveRequest{Stream: testStream, Group: "g", Offsets: []uint64{0}}, func(c int, err error) { n = c }); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if n != 1 {
		t.Fatalf("redrive count %d", n)
	}
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
}

func TestGroupCreateWithConfig(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	a := &groupAnswer{}
	if err := h.e.CreateGroup(testStream, 0, "g", groups.GroupConfig{MaxDeliveries: 1, VisibilityTimeoutMillis: 10}, a.plain); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if a.calls != 1 || a.err != nil {
		t.Fatalf("create: %+v", a)
	}
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
	h.clock.Advance(10 * time.Millisecond)
	h.step(3) // one delivery allowed: the expiry dead-letters it
	wantRecords(t, h.groupPoll("g", 1, 1, 0))
	var list []groups.DeadLetter
	if err := h.e.DeadLetters(DeadLettersRequest{Stream: testStream, Group: "g", Limit: 5}, func(l []groups.DeadLetter, _ uint64, _ error) { list = l }); err != nil {
		t.Fatal(err)
	}
	h.step(3)
	if len(list) != 1 || list[0].Deliveries != 1 {
		t.Fatalf("dead letters %+v", list)
	}
}

func TestGroupLateAckRefused(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.publishN("a", 1)
	wantRecords(t, h.groupPoll("g", 1, 1, 0), 0)
	h.clock.Advance(groups.DefaultVisibilityTimeoutMillis * time.Millisecond)
	h.step(3)
	wantRecords(t, h.groupPoll("g", 2, 1, 0), 0)
	late := h.groupAck("g", 1, 0)
	if late.calls != 1 || !errors.Is(late.err, groups.ErrLeaseExpired) && !errors.Is(late.err, groups.ErrNotLeased) {
		t.Fatalf("late ack: %+v", late)
	}
	if ok := h.groupAck("g", 2, 0); ok.err != nil {
		t.Fatalf("ack by the holder: %v", ok.err)
	}
}

func TestGroupErrors(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(groupSpec)
	h.create(StreamSpec{Name: StreamName{Tenant: "t1", Namespace: "default", Stream: "mem"}, Shards: 1})
	if err := h.e.GroupPoll(GroupPollRequest{Stream: StreamName{Tenant: "t1", Namespace: "default", Stream: "mem"}, Group: "g", MaxRecords: 1}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("in-memory stream: %v", err)
	}
	if err := h.e.GroupPoll(GroupPollRequest{Stream: StreamName{Tenant: "x", Namespace: "y", Stream: "z"}, Group: "g", MaxRecords: 1}, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown stream: %v", err)
	}
	if err := h.e.GroupPoll(GroupPollRequest{Stream: testStream, Group: "g"}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("max records 0: %v", err)
	}
	if a := h.groupAck("nope", 1, 0); !errors.Is(a.err, groups.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v", a.err)
	}
	a := h.groupPoll("", 1, 1, 0)
	if !errors.Is(a.err, ErrInvalid) || !errors.Is(a.err, groups.ErrInvalidGroupName) {
		t.Fatalf("empty group name: %v", a.err)
	}
}

// TestGroupOnDisk runs groups over the production seglog disk: companion logs in the
// shard's groups/ and dead-letters/ directories, replayed after a restart.
func TestGroupOnDisk(t *testing.T) {
	dir := t.TempDir()
	open := func() *Engine {
		e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateStream(groupSpec); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	for i := 0; i < 3; i++ {
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("d", 4)}); err != nil {
			t.Fatal(err)
		}
	}
	recs := pollSync(t, e, GroupPollRequest{Stream: testStream, Group: "g", Consumer: 1, MaxRecords: 5})
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	ackSync(t, e, GroupAckRequest{Stream: testStream, Group: "g", Consumer: 1, Refs: []groups.Ref{{Offset: 0}, {Offset: 1}, {Offset: 2}}})
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close(context.Background())
	recs = pollSync(t, e, GroupPollRequest{Stream: testStream, Group: "g", Consumer: 2, MaxRecords: 100})
	if got := fmt.Sprint(recordOffsets(recs)); got != "[3 4 5 6 7 8 9 10 11]" {
		t.Fatalf("after restart: %s", got)
	}
	if recs[0].Delivery != 2 || string(recs[0].Payload) != "d-3" {
		t.Fatalf("record %+v", recs[0])
	}
}

func pollSync(t *testing.T, e *Engine, req GroupPollRequest) []GroupRecord {
	t.Helper()
	type answer struct {
		recs []GroupRecord
		err  error
	}
	ch := make(chan answer, 1)
	if err := e.GroupPoll(req, func(r []GroupRecord, err error) { ch <- answer{r, err} }); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatal(a.err)
		}
		return a.recs
	case <-time.After(testTimeout):
		t.Fatal("poll not answered")
	}
	return nil
}

func ackSync(t *testing.T, e *Engine, req GroupAckRequest) {
	t.Helper()
	ch := make(chan error, 1)
	if err := e.GroupAck(req, func(err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testTimeout):
		t.Fatal("ack not answered")
	}
}

// BenchmarkGroupPollAck: consumers of one group poll batches of 100 records of 1 KiB
// and ack them, on a real engine (seglog disk, periodic fsync). One op = one record
// polled and acked. The records are published before the timer starts.
func BenchmarkGroupPollAck(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprintf("consumers=%d/batch=100/1KiB", consumers), func(b *testing.B) {
			benchGroupPollAck(b, consumers, 100)
		})
	}
}

func benchGroupPollAck(b *testing.B, consumers, batch int) {
	e, err := NewEngine(Config{Cores: 1, DataDir: b.TempDir(), NoPinning: true})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(groupSpec); err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 1024)
	pub := make([][]byte, 1000)
	for i := range pub {
		pub[i] = payload
	}
	for n := 0; n < b.N; n += len(pub) {
		if _, err := publishSync(b, e, &PublishRequest{Stream: testStream, Payloads: pub}); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	errs := make(chan error, consumers)
	share := (b.N + consumers - 1) / consumers
	for c := 0; c < consumers; c++ {
		go func(c int) { errs <- consumeGroup(e, uint64(c+1), share, batch) }(c)
	}
	for c := 0; c < consumers; c++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// consumeGroup polls and acks until it has acked want records (or the shard runs dry).
func consumeGroup(e *Engine, consumer uint64, want, batch int) error {
	polled := make(chan []GroupRecord, 1)
	acked := make(chan error, 1)
	perr := make(chan error, 1)
	refs := make([]groups.Ref, 0, batch)
	for done := 0; done < want; {
		req := GroupPollRequest{Stream: testStream, Group: "bench", Consumer: consumer, MaxRecords: min(batch, want-done)}
		if err := e.GroupPoll(req, func(r []GroupRecord, err error) { perr <- err; polled <- r }); err != nil {
			return err
		}
		if err := <-perr; err != nil {
			return err
		}
		recs := <-polled
		if len(recs) == 0 {
			return nil
		}
		refs = refs[:0]
		for _, r := range recs {
			refs = append(refs, groups.Ref{Offset: r.Offset, Delivery: r.Delivery})
		}
		if err := e.GroupAck(GroupAckRequest{Stream: testStream, Group: "bench", Consumer: consumer, Refs: refs}, func(err error) { acked <- err }); err != nil {
			return err
		}
		if err := <-acked; err != nil {
			return err
		}
		done += len(recs)
	}
	return nil
}

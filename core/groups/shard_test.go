package groups

import (
	"errors"
	"testing"
)

func TestPollLeasesInOrderAndAckMovesResume(t *testing.T) {
	r := newRig(t, GroupConfig{})
	ls := r.poll("g", 1, 3, 10)
	wantOffsets(t, ls, 0, 1, 2)
	for _, l := range ls {
		if l.Delivery != 1 || l.DeadlineMillis != r.now+DefaultVisibilityTimeoutMillis {
			t.Fatalf("lease %+v", l)
		}
	}
	wantOffsets(t, r.poll("g", 2, 100, 10), 3, 4, 5, 6, 7, 8, 9)
	wantOffsets(t, r.poll("g", 2, 100, 10)) // nothing left: empty, not an error
	if err := r.ack("g", 1, 1, 2); err != nil {
		t.Fatal(err)
	}
	if got := r.s.byName["g"].resume(); got != 0 {
		t.Fatalf("resume %d, want 0 (offset 0 still leased)", got)
	}
	if err := r.ack("g", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := r.s.byName["g"].resume(); got != 3 {
		t.Fatalf("resume %d, want 3", got)
	}
	fx := r.s.TakeEffects()
	last, err := DecodeCursorRecord(fx.Cursor[len(fx.Cursor)-1])
	if err != nil || last.Kind != KindAck || last.NextOffset != 3 {
		t.Fatalf("last cursor record %+v %v, want an ack record with next_offset 3", last, err)
	}
}

func TestTwoConsumersNeverHoldTheSameRecord(t *testing.T) {
	r := newRig(t, GroupConfig{VisibilityTimeoutMillis: 100})
	a := r.poll("g", 1, 5, 5)
	b := r.poll("g", 2, 5, 5)
	if len(a) != 5 || len(b) != 0 {
		t.Fatalf("a=%v b=%v", offsets(a), offsets(b))
	}
	r.now += 99
	if got := r.poll("g", 2, 5, 5); len(got) != 0 {
		t.Fatalf("b got %v while a's leases run", offsets(got))
	}
	r.now++
	b = r.poll("g", 2, 5, 5)
	wantOffsets(t, b, 0, 1, 2, 3, 4)
	if b[0].Delivery != 2 {
		t.Fatalf("redelivery number %d, want 2", b[0].Delivery)
	}
}

func TestLateAckDoesNotAckTheNewLease(t *testing.T) {
	r := newRig(t, GroupConfig{VisibilityTimeoutMillis: 100})
	r.poll("g", 1, 1, 1)
	r.now += 100
	// Expired but not yet re-leased: refused.
	wantErr(t, r.ack("g", 1, 0), ErrLeaseExpired)
	b := r.poll("g", 2, 1, 1)
	wantOffsets(t, b, 0)
	_, err := r.s.Ack("g", 1, []Ref{{Offset: 0, Delivery: 1}}, r.now)
	wantErr(t, err, ErrLeaseExpired)
	var oe *OffsetsError
	if !errors.As(err, &oe) || len(oe.Refused) != 1 || oe.Refused[0].Offset != 0 {
		t.Fatalf("error %v, want an *OffsetsError naming offset 0", err)
	}
	wantErr(t, r.ack("g", 1, 0), ErrNotLeased)
	if e := r.s.byName["g"].entries[0]; e.consumer != 2 || e.state != stateLeased {
		t.Fatalf("entry %+v, want still leased to 2", e)
	}
	if err := r.ack("g", 2, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.ack("g", 2, 0); err != nil {
		t.Fatalf("repeated ack: %v, want nil (idempotent)", err)
	}
	wantErr(t, r.ack("g", 2, 7), ErrNotLeased)
}

func TestAckBatchAppliesTheValidOnes(t *testing.T) {
	r := newRig(t, GroupConfig{})
	r.poll("g", 1, 2, 2)
	r.poll("g", 2, 1, 3)
	err := r.ack("g", 1, 0, 2, 1)
	wantErr(t, err, ErrNotLeased)
	g := r.s.byName["g"]
	if _, ok := g.entries[0]; ok {
		t.Fatal("offset 0 not acked")
	}
	if _, ok := g.entries[2]; !ok {
		t.Fatal("offset 2 acked by the wrong consumer")
	}
}

func TestCrashAfterAckBeforeCursorDurableRedelivers(t *testing.T) {
	r := newRig(t, GroupConfig{})
	r.poll("g", 1, 2, 2)
	r.sync()
	if err := r.ack("g", 1, 0, 1); err != nil {
		t.Fatal(err)
	}
	fx := r.write() // appended, but the fsync never completes
	if r.s.Durable(fx.Token) {
		t.Fatal("ack token durable before MarkDurable")
	}
	r.crash()
	ls := r.poll("g", 3, 10, 2)
	wantOffsets(t, ls, 0, 1)
	if ls[0].Delivery != 2 {
		t.Fatalf("delivery %d, want 2 (count survives the crash)", ls[0].Delivery)
	}
}

func TestDurableAckIsNotRedelivered(t *testing.T) {
	r := newRig(t, GroupConfig{})
	r.poll("g", 1, 3, 3)
	if err := r.ack("g", 1, 0, 2); err != nil {
		t.Fatal(err)
	}
	tok := r.sync()
	if !r.s.Durable(tok) {
		t.Fatal("token not durable after MarkDurable")
	}
	r.crash()
	wantOffsets(t, r.poll("g", 1, 10, 5), 1, 3, 4)
	if len(r.report.Repaired) != 0 || r.report.Outstanding != 1 {
		t.Fatalf("report %v", r.report)
	}
}

func TestNacksDeadLetterWithCountSurvivingRestarts(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 3, RedeliveryDelayMillis: 50})
	for i := 1; i <= 3; i++ {
		ls := r.poll("g", 1, 1, 1)
		if len(ls) != 1 || ls[0].Delivery != uint32(i) {
			t.Fatalf("round %d: leases %+v", i, ls)
		}
		if err := r.nack("g", 1, -1, 0); err != nil {
			t.Fatal(err)
		}
		r.sync()
		r.crash()
		r.now += 50
	}
	wantOffsets(t, r.poll("g", 1, 1, 1))
	dl, next, err := r.s.DeadLetters(nil, "g", 0, 10)
	if err != nil || len(dl) != 1 || dl[0].Offset != 0 || dl[0].Deliveries != 3 || next != 1 {
		t.Fatalf("dead letters %+v next %d err %v", dl, next, err)
	}
	if g := r.s.byName["g"]; g.resume() != 1 {
		t.Fatalf("resume %d, want 1 (dead letter passed)", g.resume())
	}
}

func TestNackDelayAndExpiryDeadLetter(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 2, VisibilityTimeoutMillis: 10})
	r.poll("g", 1, 1, 1)
	if err := r.nack("g", 1, 500, 0); err != nil {
		t.Fatal(err)
	}
	if at, ok := r.s.NextReady(); !ok || at != r.now+500 {
		t.Fatalf("next ready %d %v, want %d", at, ok, r.now+500)
	}
	if _, ok := r.s.NextExpiry(); ok {
		t.Fatal("a lease expiry is scheduled after the nack")
	}
	r.now += 499
	wantOffsets(t, r.poll("g", 1, 1, 1))
	r.now++
	ls := r.poll("g", 1, 1, 1)
	wantOffsets(t, ls, 0)
	if at, ok := r.s.NextExpiry(); !ok || at != r.now+10 {
		t.Fatalf("next expiry %d %v, want %d", at, ok, r.now+10)
	}
	r.now += 10
	r.s.Tick(r.now) // second delivery expired: max reached
	fx := r.s.TakeEffects()
	if len(fx.DeadLetters) != 1 {
		t.Fatalf("%d dead-letter records, want 1", len(fx.DeadLetters))
	}
	d, err := DecodeDeadLetterRecord(fx.DeadLetters[0])
	if err != nil || d.Offset != 0 || d.Deliveries != 2 || d.AtMillis != r.now || d.GroupID != GroupID("g") {
		t.Fatalf("dead-letter record %+v %v", d, err)
	}
	if _, ok := r.s.NextExpiry(); ok {
		t.Fatal("an expiry remains with nothing outstanding")
	}
	if _, ok := r.s.NextReady(); ok {
		t.Fatal("a ready time remains with nothing outstanding")
	}
}

func TestRedrive(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 1})
	r.poll("g", 1, 2, 2)
	if err := r.nack("g", 1, 0, 0, 1); err != nil {
		t.Fatal(err)
	}
	n, _, err := r.s.Redrive("g", []uint64{1, 5}, r.now)
	if n != 1 {
		t.Fatalf("redriven %d, want 1", n)
	}
	wantErr(t, err, ErrNotDead)
	r.sync()
	r.crash()
	ls := r.poll("g", 2, 10, 2)
	wantOffsets(t, ls, 1)
	if ls[0].Delivery != 1 {
		t.Fatalf("delivery %d after redrive, want 1", ls[0].Delivery)
	}
	dl, _, _ := r.s.DeadLetters(nil, "g", 0, 10)
	if len(dl) != 1 || dl[0].Offset != 0 {
		t.Fatalf("dead letters %+v, want only 0", dl)
	}
}

// The seed's crash: the cursor log's tail survives, the dead-letter log's tail does not.
// The offset must be delivered again, never skipped, and stay so across a second
// restart even after a new dead letter reuses the lost dead-letter log offset.
func TestLostDeadLetterIsRedeliveredNotSkipped(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 1})
	r.poll("g", 1, 3, 3)
	r.sync()
	if err := r.nack("g", 1, 0, 1); err != nil {
		t.Fatal(err)
	}
	if err := r.ack("g", 1, 0, 2); err != nil {
		t.Fatal(err)
	}
	r.write()
	r.curDur = len(r.cursor) // cursor tail durable, dead-letter tail lost
	r.crash()
	if len(r.report.Repaired) != 1 || r.report.LostDeadLetters != 1 {
		t.Fatalf("report %v, want group g repaired", r.report)
	}
	if g := r.s.byName["g"]; g.resume() != 1 {
		t.Fatalf("resume %d, want 1 (where the lost dead letter stands)", g.resume())
	}
	if dl, _, _ := r.s.DeadLetters(nil, "g", 0, 10); len(dl) != 0 {
		t.Fatalf("dead letters %+v, want none", dl)
	}
	// A second group dead-letters: its record takes the dead-letter log offset 0 again.
	r.poll("h", 1, 1, 3)
	if err := r.nack("h", 1, 0, 0); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.crash()
	ls := r.poll("g", 2, 10, 3)
	wantOffsets(t, ls, 1)
	if ls[0].Delivery != 1 {
		t.Fatalf("delivery %d, want 1 (count lowered to max-1, then one more delivery)", ls[0].Delivery)
	}
	if err := r.nack("g", 2, 0, 1); err != nil { // max reached again: dead again
		t.Fatal(err)
	}
	r.sync()
	r.crash()
	dl, _, _ := r.s.DeadLetters(nil, "g", 0, 10)
	if len(dl) != 1 || dl[0].Offset != 1 || dl[0].Deliveries != 1 {
		t.Fatalf("dead letters %+v", dl)
	}
}

// The other order: the dead-letter record survives, the cursor log lost its dead event
// and even the delivery. The dead-letter log decides; the offset is not delivered again.
func TestDeadLetterKeptCursorTailLost(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 1})
	r.poll("g", 1, 2, 2)
	r.sync()
	curDur := r.curDur
	if err := r.nack("g", 1, 0, 1); err != nil {
		t.Fatal(err)
	}
	r.write()
	r.curDur, r.deadDur = curDur-1, len(r.dead) // lose the deliver record too
	r.crash()
	wantOffsets(t, r.poll("g", 1, 10, 2), 0)
	dl, _, _ := r.s.DeadLetters(nil, "g", 0, 10)
	if len(dl) != 1 || dl[0].Offset != 1 {
		t.Fatalf("dead letters %+v", dl)
	}
}

func TestWindowEarliestSkipsDeletedRecords(t *testing.T) {
	r := newRig(t, GroupConfig{RedeliveryDelayMillis: 1})
	ls, _, err := r.s.Poll(nil, PollRequest{Group: "g", Consumer: 1, MaxRecords: 2, NowMillis: r.now, Window: Window{Earliest: 5, End: 10}})
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, ls, 5, 6)
	if err := r.nack("g", 1, 0, 5); err != nil {
		t.Fatal(err)
	}
	ls, _, _ = r.s.Poll(nil, PollRequest{Group: "g", Consumer: 1, MaxRecords: 2, NowMillis: r.now, Window: Window{Earliest: 7, End: 10}})
	wantOffsets(t, ls, 7, 8)
}

func TestCommittedEndBoundsDelivery(t *testing.T) {
	r := newRig(t, GroupConfig{})
	wantOffsets(t, r.poll("g", 1, 10, 0))
	wantOffsets(t, r.poll("g", 1, 10, 2), 0, 1)
	wantOffsets(t, r.poll("g", 1, 10, 3), 2)
}

func TestErrors(t *testing.T) {
	r := newRig(t, GroupConfig{})
	wantErr(t, r.ack("nope", 1, 0), ErrUnknownGroup)
	wantErr(t, r.nack("nope", 1, 0, 0), ErrUnknownGroup)
	_, _, err := r.s.DeadLetters(nil, "nope", 0, 1)
	wantErr(t, err, ErrUnknownGroup)
	_, _, err = r.s.Redrive("nope", nil, r.now)
	wantErr(t, err, ErrUnknownGroup)
	_, _, err = r.s.Poll(nil, PollRequest{Group: "", MaxRecords: 1})
	wantErr(t, err, ErrInvalidGroupName)
	_, _, err = r.s.Poll(nil, PollRequest{Group: "g", MaxRecords: 0})
	wantErr(t, err, ErrInvalidRequest)
	r.poll("g", 1, 1, 1)
	_, _, err = r.s.DeadLetters(nil, "g", 0, 0)
	wantErr(t, err, ErrInvalidRequest)
	wantErr(t, r.nack("g", 1, MaxVisibilityTimeoutMillis+1, 0), ErrInvalidRequest)
	_, err = NewShard(Options{Defaults: GroupConfig{VisibilityTimeoutMillis: -1}}, 0)
	wantErr(t, err, ErrInvalidRequest)
	_, err = r.s.CreateGroup("x", GroupConfig{MaxPollRecords: MaxPollRecordsLimit + 1}, 0)
	wantErr(t, err, ErrInvalidRequest)
}

func TestPollIsCappedByMaxPollRecords(t *testing.T) {
	r := newRig(t, GroupConfig{MaxPollRecords: 4})
	if got := len(r.poll("g", 1, 100, 100)); got != 4 {
		t.Fatalf("%d records, want 4", got)
	}
}

func TestCreateGroupKeepsConfigAcrossRestart(t *testing.T) {
	r := newRig(t, GroupConfig{})
	if _, err := r.s.CreateGroup("g", GroupConfig{MaxDeliveries: 7, VisibilityTimeoutMillis: 1234}, 40); err != nil {
		t.Fatal(err)
	}
	r.sync()
	r.crash()
	g := r.s.byName["g"]
	if g == nil || g.cfg.MaxDeliveries != 7 || g.cfg.VisibilityTimeoutMillis != 1234 || g.frontier != 40 {
		t.Fatalf("group after restart: %+v", g)
	}
	if names := r.s.Groups(); len(names) != 1 || names[0] != "g" {
		t.Fatalf("groups %v", names)
	}
}

func TestDeadLettersPaging(t *testing.T) {
	r := newRig(t, GroupConfig{MaxDeliveries: 1})
	r.poll("g", 1, 5, 5)
	if err := r.nack("g", 1, 0, 4, 0, 2); err != nil {
		t.Fatal(err)
	}
	dl, next, _ := r.s.DeadLetters(nil, "g", 0, 2)
	if len(dl) != 2 || dl[0].Offset != 0 || dl[1].Offset != 2 || next != 3 {
		t.Fatalf("page 1: %+v next %d", dl, next)
	}
	dl, next, _ = r.s.DeadLetters(dl[:0], "g", next, 2)
	if len(dl) != 1 || dl[0].Offset != 4 || next != 5 {
		t.Fatalf("page 2: %+v next %d", dl, next)
	}
}

func TestScheduleMemoryIsBoundedByOutstanding(t *testing.T) {
	r := newRig(t, GroupConfig{})
	for i := uint64(1); i <= 200; i++ {
		ls := r.poll("g", 1, 50, i*50)
		if err := r.ack("g", 1, offsets(ls)...); err != nil {
			t.Fatal(err)
		}
		r.sync()
	}
	g := r.s.byName["g"]
	if len(g.leases) > 2*len(g.entries)+64+50 || len(g.order.items) > 2*50+1 {
		t.Fatalf("lease heap %d, order queue %d items with %d outstanding", len(g.leases), len(g.order.items), len(g.entries))
	}
}

// Leases the core could not hand out (its answer would have been too large) are given
// back: ready for the next poll at once, their delivery not counted; leases that are not
// current leases of the consumer are left alone.
func TestReturnGivesLeasesBackUncounted(t *testing.T) {
	r := newRig(t, GroupConfig{})
	wantOffsets(t, r.poll("g", 1, 4, 4), 0, 1, 2, 3)
	n, err := r.s.Return("g", 1, []Ref{{Offset: 2, Delivery: 1}, {Offset: 3}, {Offset: 1, Delivery: 7}}, r.now)
	if err != nil || n != 2 {
		t.Fatalf("return: %d, %v; want 2 given back", n, err)
	}
	if n, _ := r.s.Return("g", 2, []Ref{{Offset: 0}}, r.now); n != 0 {
		t.Fatalf("another consumer gave back %d leases", n)
	}
	got := r.poll("g", 2, 10, 4)
	wantOffsets(t, got, 2, 3)
	for _, l := range got {
		if l.Delivery != 1 {
			t.Fatalf("lease %+v: a given-back lease must be delivered as delivery 1 again", l)
		}
	}
	if err := r.ack("g", 1, 0, 1); err != nil {
		t.Fatalf("leases kept by consumer 1: %v", err)
	}
	if _, err := r.s.Return("nope", 1, nil, r.now); !errors.Is(err, ErrUnknownGroup) {
		t.Fatalf("unknown group: %v", err)
	}
}

package core

import (
	"errors"
	"testing"
)

func TestInboxBoundsAndOrder(t *testing.T) {
	q := newInbox(3)
	for i := range 3 {
		if _, err := q.push(message{kind: msgPublish, enqueuedNanos: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.push(message{}); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("push into a full inbox: %v", err)
	}
	got := q.drain(make([]message, 0, 2))
	if len(got) != 2 || got[0].enqueuedNanos != 0 || got[1].enqueuedNanos != 1 {
		t.Fatalf("drain %+v", got)
	}
	if _, err := q.push(message{enqueuedNanos: 3}); err != nil {
		t.Fatal(err)
	}
	got = q.drain(make([]message, 0, 8))
	if len(got) != 2 || got[0].enqueuedNanos != 2 || got[1].enqueuedNanos != 3 || q.depth() != 0 {
		t.Fatalf("drain after wrap %+v", got)
	}
}

func TestInboxWakesOnlyASleepingCore(t *testing.T) {
	q := newInbox(4)
	if wake, _ := q.push(message{}); wake {
		t.Fatal("woke a core that did not say it would sleep")
	}
	if q.prepareSleep() {
		t.Fatal("may sleep with a message queued")
	}
	q.drain(make([]message, 0, 4))
	if !q.prepareSleep() {
		t.Fatal("may not sleep on an empty inbox")
	}
	if wake, _ := q.push(message{}); !wake {
		t.Fatal("a sleeping core was not woken")
	}
	if wake, _ := q.push(message{}); wake {
		t.Fatal("woke twice for one sleep")
	}
	q.drain(make([]message, 0, 4))
	q.prepareSleep()
	if !q.wakeRequest() || q.wakeRequest() {
		t.Fatal("wakeRequest must report a sleeping core exactly once")
	}
	rest := q.close()
	if _, err := q.push(message{}); !errors.Is(err, ErrClosed) || len(rest) != 0 {
		t.Fatalf("push after close: %v (%d left)", err, len(rest))
	}
}

func TestTimersFireInDeadlineOrder(t *testing.T) {
	var l timerList
	var fired []int
	mk := func(id int) *coreTimer {
		return &coreTimer{index: -1, fn: func(int64) { fired = append(fired, id) }}
	}
	a, b, c := mk(1), mk(2), mk(3)
	l.schedule(a, 30)
	l.schedule(b, 10)
	l.schedule(c, 20)
	l.schedule(a, 5) // move earlier
	l.stop(c)
	l.stop(c) // stopping twice is harmless
	if at, ok := l.next(); !ok || at != 5 {
		t.Fatalf("next = %d %v", at, ok)
	}
	if n := l.run(9); n != 1 {
		t.Fatalf("fired %d at 9", n)
	}
	l.run(100)
	if len(fired) != 2 || fired[0] != 1 || fired[1] != 2 {
		t.Fatalf("fired %v", fired)
	}
	if _, ok := l.next(); ok {
		t.Fatal("timers left")
	}
}

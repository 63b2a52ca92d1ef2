package memnet

import (
	"bytes"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"felix/cluster/sim"
	"felix/internal/testseed"
)

// A reliable net with no delay delivers every message in send order, with
// or without a bubble.
func TestReliableInOrder(t *testing.T) {
	n := New(Config[int]{Seed: testseed.Seed(t, 1)})
	defer n.Close()
	in := n.Recv(2)
	go func() {
		for i := range 100 {
			if err := n.Send(1, 2, i); err != nil {
				t.Error(err)
			}
		}
	}()
	for i := range 100 {
		d := <-in
		if d.From != 1 || d.To != 2 || d.Msg != i || d.Corrupt {
			t.Fatalf("delivery %d = %+v", i, d)
		}
	}
	if st := n.Stats(); st.Sent != 100 {
		t.Fatalf("stats %+v", st)
	}
}

// Delays are timers: inside a bubble they take exactly their virtual time.
func TestDelayIsVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[string]{Seed: 1, Link: sim.LinkFaults{Delay: 5 * time.Millisecond}})
		defer n.Close()
		in := n.Recv(2)
		start := time.Now()
		if err := n.Send(1, 2, "hello"); err != nil {
			t.Fatal(err)
		}
		d := <-in
		if got := time.Since(start); got != 5*time.Millisecond || d.Msg != "hello" {
			t.Fatalf("got %q after %v, want hello after 5ms", d.Msg, got)
		}
	})
}

// collect sends count messages on 1->2 and returns what 2 received once
// the bubble is quiet.
func collect(t *testing.T, lf sim.LinkFaults, seed uint64, count int) ([][]byte, Stats) {
	var got [][]byte
	var st Stats
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[[]byte]{Seed: seed, Link: lf})
		if err := n.Handle(2, func(d sim.Delivery[[]byte]) { got = append(got, d.Msg) }); err != nil {
			t.Fatal(err)
		}
		for i := range count {
			if err := n.Send(1, 2, []byte(fmt.Sprintf("m%03d", i))); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second) // virtual: lets every delay timer fire
		synctest.Wait()
		st = n.Stats()
		n.Close()
	})
	return got, st
}

// The faults happen at their rates, and the same seed gives the same fates.
func TestFaultsAndReplay(t *testing.T) {
	seed := testseed.Seed(t, 7)
	lf := sim.LinkFaults{Delay: time.Millisecond, Jitter: time.Millisecond, DropPercent: 20, DupPercent: 10,
		ReorderPercent: 30, ReorderDelay: 10 * time.Millisecond, CorruptPercent: 5}
	got, st := collect(t, lf, seed, 1000)
	t.Logf("memnet seed=%d link=[%v]: %+v", seed, lf, st)
	if st.Dropped < 150 || st.Dropped > 250 || st.Duplicated < 50 || st.Corrupted < 20 || st.Delivered != len(got) {
		t.Fatalf("rates off: %+v, %d received", st, len(got))
	}
	if st.Delivered != st.Sent-st.Dropped+st.Duplicated {
		t.Fatalf("not conserved: %+v", st)
	}
	again, _ := collect(t, lf, seed, 1000)
	if len(got) != len(again) {
		t.Fatalf("same seed, %d then %d deliveries", len(got), len(again))
	}
	sorted := func(b [][]byte) string { return string(bytes.Join(sortedCopy(b), []byte(","))) }
	if sorted(got) != sorted(again) {
		t.Fatal("same seed, different messages delivered")
	}
}

func sortedCopy(b [][]byte) [][]byte {
	c := append([][]byte(nil), b...)
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && bytes.Compare(c[j], c[j-1]) < 0; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	return c
}

// A corrupted []byte message fails any checksum: here it simply differs
// from what was sent, in exactly one byte.
func TestCorruptNextFlipsOneByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[[]byte]{Seed: 3})
		defer n.Close()
		in := n.Recv(2)
		n.CorruptNext(1, 2)
		sent := []byte("payload")
		_ = n.Send(1, 2, sent)
		_ = n.Send(1, 2, sent)
		first, second := <-in, <-in
		diff := 0
		for i := range sent {
			if first.Msg[i] != sent[i] {
				diff++
			}
		}
		if !first.Corrupt || diff != 1 || second.Corrupt || !bytes.Equal(second.Msg, sent) || string(sent) != "payload" {
			t.Fatalf("first %+v (%d bytes differ), second %+v, sent now %q", first, diff, second, sent)
		}
	})
}

// Partitions drop both ways, one-way blocks drop one way, and a copy in
// flight when its link is blocked is dropped on arrival.
func TestPartitions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[string]{Seed: 1, Link: sim.LinkFaults{Delay: time.Millisecond}})
		defer n.Close()
		var got []string
		for _, id := range []sim.NodeID{1, 2} {
			_ = n.Handle(id, func(d sim.Delivery[string]) { got = append(got, fmt.Sprintf("%v->%v %s", d.From, d.To, d.Msg)) })
		}
		settle := func() { time.Sleep(10 * time.Millisecond); synctest.Wait() }
		n.Partition([]sim.NodeID{1}, []sim.NodeID{2})
		_ = n.Send(1, 2, "a")
		_ = n.Send(2, 1, "b")
		settle()
		n.Heal()
		n.BlockOneWay([]sim.NodeID{1}, []sim.NodeID{2})
		_ = n.Send(1, 2, "c")
		_ = n.Send(2, 1, "d")
		settle()
		n.Heal()
		_ = n.Send(1, 2, "e") // in flight for 1ms
		n.Partition([]sim.NodeID{1}, []sim.NodeID{2})
		settle()
		n.HealLink(1, 2)
		_ = n.Send(1, 2, "f")
		settle()
		if fmt.Sprint(got) != "[2->1 d 1->2 f]" {
			t.Fatalf("delivered %v", got)
		}
	})
}

// Close closes every inbox, stops timers and makes Send fail.
func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := New(Config[int]{Seed: 1, Link: sim.LinkFaults{Delay: time.Second}})
		in := n.Recv(1)
		_ = n.Send(2, 1, 1)
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := <-in; ok {
			t.Fatal("inbox open after Close")
		}
		if err := n.Send(2, 1, 2); err != sim.ErrNetworkClosed {
			t.Fatalf("Send after Close = %v", err)
		}
		if err := n.Handle(3, func(sim.Delivery[int]) {}); err != sim.ErrNetworkClosed {
			t.Fatalf("Handle after Close = %v", err)
		}
		if _, ok := <-n.Recv(4); ok {
			t.Fatal("Recv after Close gave an open channel")
		}
		_ = n.Close()
	})
}

func TestHandleTwice(t *testing.T) {
	n := New(Config[int]{})
	defer n.Close()
	n.Recv(1)
	if err := n.Handle(1, func(sim.Delivery[int]) {}); err != ErrHandled {
		t.Fatalf("Handle after Recv = %v", err)
	}
}

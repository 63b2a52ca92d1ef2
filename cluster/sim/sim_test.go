package sim

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// pinger answers every message with the same message to the sender and
// counts its ticks; the simplest machine that keeps a network busy.
type pinger struct {
	ticks []Time
	got   int
}

func (p *pinger) Step(_ Time, from NodeID, msg string) []Envelope[string] {
	p.got++
	return []Envelope[string]{{To: from, Msg: msg}}
}

func (p *pinger) Tick(now Time) []Envelope[string] {
	p.ticks = append(p.ticks, now)
	return nil
}

func newPingers(opts Options, trace func(string)) (*Sim[string], map[NodeID]*pinger) {
	ps := map[NodeID]*pinger{}
	s := New(Config[string]{Options: opts, Trace: trace, New: func(env Env) Machine[string] {
		p := &pinger{}
		ps[env.ID] = p
		return p
	}})
	return s, ps
}

func TestTicksFallOnTheirInterval(t *testing.T) {
	s, ps := newPingers(Options{Seed: 1, TickInterval: 5 * time.Millisecond}, nil)
	s.AddNodes(2)
	s.RunTicks(3)
	if s.Now() != Time(15*time.Millisecond) || len(ps[1].ticks) != 3 || ps[2].ticks[2] != Time(15*time.Millisecond) {
		t.Fatalf("now %v, ticks %v", s.Now(), ps[1].ticks)
	}
	s.RunFor(7 * time.Millisecond)
	if s.Now() != Time(22*time.Millisecond) || len(ps[1].ticks) != 4 {
		t.Fatalf("after RunFor(7ms): now %v, ticks %v", s.Now(), ps[1].ticks)
	}
}

// Deliver freezes timers: the clock moves to each delivery, skipped ticks
// are not made up, and the next tick falls on the interval again.
func TestDeliverSkipsTicks(t *testing.T) {
	s, ps := newPingers(Options{Seed: 1, Link: LinkFaults{Delay: 4 * time.Millisecond}}, nil)
	s.AddNodes(2)
	_ = s.Send(1, 2, "x")
	s.Deliver(7) // 7 hops of 4ms: 28ms, past two tick boundaries
	if s.Now() != Time(28*time.Millisecond) || len(ps[1].ticks) != 0 || ps[1].got+ps[2].got != 7 {
		t.Fatalf("now %v, ticks %v, got %d+%d", s.Now(), ps[1].ticks, ps[1].got, ps[2].got)
	}
	s.RunTicks(1)
	if ps[1].ticks[0] != Time(30*time.Millisecond) {
		t.Fatalf("next tick at %v, want 30ms", ps[1].ticks[0])
	}
}

func TestLivelockIsBounded(t *testing.T) {
	s, _ := newPingers(Options{Seed: 1, MaxEvents: 50}, nil)
	s.AddNodes(2)
	_ = s.Send(1, 2, "x") // zero delay: the two answer each other forever
	s.Deliver(0)
	if !errors.Is(s.Err(), ErrLivelock) || s.Step() {
		t.Fatalf("Err = %v", s.Err())
	}
}

func TestCorruptNeedsACodec(t *testing.T) {
	s, _ := newPingers(Options{Seed: 1}, nil)
	s.AddNodes(2)
	s.Faults().CorruptNext(1, 2)
	if err := s.Send(1, 2, "x"); !errors.Is(err, ErrNoCorrupt) {
		t.Fatalf("corrupting a string without Config.Corrupt: %v", err)
	}
}

func TestLinkPrecedence(t *testing.T) {
	f := NewFaults(LinkFaults{Delay: 1})
	_ = f.SetLink(Any, 2, LinkFaults{Delay: 2})
	_ = f.SetLink(1, Any, LinkFaults{Delay: 3})
	_ = f.SetLink(1, 2, LinkFaults{Delay: 4})
	for _, c := range []struct {
		from, to NodeID
		want     time.Duration
	}{{1, 2, 4}, {1, 3, 3}, {3, 2, 2}, {3, 4, 1}, {External, 2, 1}, {1, External, 1}} {
		if got := f.Link(c.from, c.to).Delay; got != c.want {
			t.Errorf("Link(%v, %v).Delay = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if err := f.SetLink(1, 2, LinkFaults{DupPercent: -1}); err == nil {
		t.Error("a negative percent was accepted")
	}
	f.Partition([]NodeID{1}, []NodeID{2, 3})
	if !f.Blocked(1, 3) || !f.Blocked(3, 1) || f.Blocked(2, 3) {
		t.Errorf("blocked: %v", f.BlockedLinks())
	}
}

func TestDiskCrashCuts(t *testing.T) {
	r := NewRand(1)
	for _, c := range []struct {
		mode     CutMode
		min, max int
	}{{CutKeep, 10, 10}, {CutLose, 4, 4}, {CutRandom, 4, 10}} {
		d := NewDisk()
		f := d.File("log")
		f.Append([]byte("abcd"))
		f.Sync()
		f.Append([]byte("efghij"))
		notes := d.crash(c.mode, r)
		if f.Len() < c.min || f.Len() > c.max || f.Synced() != f.Len() || len(notes) != 1 {
			t.Errorf("%v: len %d synced %d notes %v", c.mode, f.Len(), f.Synced(), notes)
		}
		if !strings.HasPrefix(string(f.Bytes()), "abcd") {
			t.Errorf("%v: synced bytes lost: %q", c.mode, f.Bytes())
		}
	}
	if _, err := ParseCutMode("half"); err == nil {
		t.Error("ParseCutMode accepted half")
	}
}

// A random cut lands anywhere in the unsynced suffix, mid-record included.
func TestRandomCutTearsRecords(t *testing.T) {
	r := NewRand(2)
	seen := map[int]bool{}
	for range 200 {
		d := NewDisk()
		d.File("log").Append(make([]byte, 17))
		d.crash(CutRandom, r)
		seen[d.File("log").Len()] = true
	}
	if len(seen) != 18 {
		t.Fatalf("cut lengths seen: %d of 18", len(seen))
	}
}

func TestFlipByte(t *testing.T) {
	b := []byte("hello")
	out, note := FlipByte(b, NewRand(3))
	diff := 0
	for i := range b {
		if b[i] != out[i] {
			diff++
		}
	}
	if diff != 1 || string(b) != "hello" || !strings.HasPrefix(note, "byte ") {
		t.Fatalf("FlipByte(%q) = %q, %q", b, out, note)
	}
}

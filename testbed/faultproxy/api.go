package faultproxy

import (
	"fmt"
	"time"
)

// Change is one recorded fault change of one link: when it applied, what set it, and the faults
// before and after. New records each link's initial faults with Source "config".
type Change struct {
	Time   time.Time `json:"time"`   // the proxy clock's time when the change applied
	Link   Direction `json:"link"`   // ToServer or ToClient (a change to Both is recorded once per link)
	Source string    `json:"source"` // "config", "go", "go reset", "http <remote addr>", "http <remote addr> reset"
	Before Faults    `json:"before"` // the link's faults until the change
	After  Faults    `json:"after"`  // the link's faults from the change on
}

// LinkState is one link's faults and counters.
type LinkState struct {
	Link   Direction `json:"link"`   // ToServer or ToClient
	Faults Faults    `json:"faults"` // the current faults
	Stats  LinkStats `json:"stats"`  // the counters since the proxy started
}

// Snapshot is the whole proxy's state: what GET /links answers.
type Snapshot struct {
	Seed     uint64      `json:"seed"`     // the PRNG seed in use
	Listen   string      `json:"listen"`   // the bound listen address, "127.0.0.1:40001"
	Upstream string      `json:"upstream"` // the upstream address
	Sessions int         `json:"sessions"` // client addresses with an upstream socket
	Links    []LinkState `json:"links"`    // [to-server, to-client]
}

// SetFaults replaces the faults of link d (ToServer, ToClient or Both) with f, from the next
// datagram on; held (reordered) datagrams are released, queued ones keep their release time. The
// change is logged and recorded (Source "go"). Errors: *FaultError (ErrInvalidFaults),
// ErrUnknownLink, ErrClosed.
func (p *Proxy) SetFaults(d Direction, f Faults) error {
	return p.update(d, "go", false, func(Faults) Faults { return f })
}

// SetBlackhole turns Blackhole on or off on link d (ToServer, ToClient or Both), leaving its other
// faults as they are: one link is an asymmetric partition, Both a full one. Errors: ErrUnknownLink,
// ErrClosed.
func (p *Proxy) SetBlackhole(d Direction, on bool) error {
	return p.update(d, "go", false, func(f Faults) Faults { f.Blackhole = on; return f })
}

// Reset clears the faults of both links and releases every queued and held datagram at once, so
// forwarding is clean from now on. Counters are kept. The change is logged (Source "go reset").
func (p *Proxy) Reset() {
	_ = p.update(Both, "go reset", true, func(Faults) Faults { return Faults{} })
}

// Faults returns the current faults of link d (ToServer or ToClient). Errors: ErrUnknownLink.
func (p *Proxy) Faults(d Direction) (Faults, error) {
	if _, err := d.dirs(); err != nil || d == Both {
		return Faults{}, errUnknown(d, err)
	}
	return p.links[d].get(), nil
}

// Stats returns a snapshot of the counters of link d (ToServer or ToClient). Errors: ErrUnknownLink.
func (p *Proxy) Stats(d Direction) (LinkStats, error) {
	if _, err := d.dirs(); err != nil || d == Both {
		return LinkStats{}, errUnknown(d, err)
	}
	return p.links[d].stats(), nil
}

// Snapshot returns the seed, addresses, session count and both links' faults and counters.
func (p *Proxy) Snapshot() Snapshot {
	s := Snapshot{Seed: p.seed, Listen: p.listen.String(), Upstream: p.upAddr.String(), Sessions: p.Sessions()}
	for d, l := range p.links {
		s.Links = append(s.Links, LinkState{Link: Direction(d), Faults: l.get(), Stats: l.stats()})
	}
	return s
}

// Changes returns a copy of every recorded fault change, oldest first.
func (p *Proxy) Changes() []Change {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Change(nil), p.changes...)
}

func errUnknown(d Direction, err error) error {
	if err != nil {
		return err
	}
	return fmt.Errorf("%w: %v is not one link (want to-server or to-client)", ErrUnknownLink, d)
}

// update applies fn to the faults of every link d addresses, validating each result first, and
// records and logs the changes. flush releases queued datagrams at once (Reset).
func (p *Proxy) update(d Direction, source string, flush bool, fn func(Faults) Faults) error {
	ds, err := d.dirs()
	if err != nil {
		return err
	}
	if p.isClosed() {
		return ErrClosed
	}
	p.changeMu.Lock()
	defer p.changeMu.Unlock()
	next := make([]Faults, len(ds))
	for i, dir := range ds {
		next[i] = fn(p.links[dir].get())
		if err := next[i].Validate(); err != nil {
			return err
		}
	}
	for i, dir := range ds {
		now := p.clock.Now()
		before := p.links[dir].set(next[i], now, flush)
		p.record(dir, source, before, next[i], now)
	}
	return nil
}

// record appends a change to the list and logs it.
func (p *Proxy) record(d Direction, source string, before, after Faults, at time.Time) {
	c := Change{Time: at, Link: d, Source: source, Before: before, After: after}
	p.mu.Lock()
	p.changes = append(p.changes, c)
	p.mu.Unlock()
	p.log.Info("faultproxy: fault change", "at", at.Format(time.RFC3339Nano), "link", d.String(),
		"source", source, "before", before.String(), "after", after.String())
}

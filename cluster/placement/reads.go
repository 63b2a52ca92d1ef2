package placement

import (
	"slices"
)

// ReadID names one read waiting for confirmation; RoundID one read-confirmation round.
type (
	ReadID  uint64
	RoundID uint64
)

// ReadConfig is a leader's lease-free read confirmation at its generation.
type ReadConfig struct {
	// Generation is the leader's; rounds are fences at it, which write nothing on a
	// replica that already accepted it. Self is the leader, ReplicaSet every member.
	Generation uint64
	Self       string
	ReplicaSet []string
	without    gaps
}

// ReadResult is one answered read: Err nil (answer the value taken) or ErrLeadershipLost.
type ReadResult struct {
	ID  ReadID
	Err error
}

// ReadConfirmer holds a leader's reads between taking their value and answering
// (seeds/upgrades-and-compatibility.txt, lease_free_reads; docs/failover.md, "Lease-free
// reads"): a read answers only once the quorum mark has passed the write that produced its
// value, and once a fence round that started after it took the value succeeded (a
// majority, Self included, answered at the generation). Concurrent reads share rounds,
// but only reads taken before a round started. A failed round answers its reads
// ErrLeadershipLost. Not safe for concurrent use.
type ReadConfirmer struct {
	cfg    ReadConfig
	mark   uint64
	reads  []waitingRead
	rounds map[RoundID]*readRound
	next   RoundID
}

type waitingRead struct {
	id     ReadID
	needs  uint64  // the mark must reach it
	round  RoundID // 0: not yet covered by a round
	failed bool
}

type readRound struct {
	answered []string
	done     bool
}

// NewReadConfirmer returns a confirmer. Errors: *InputError when Self is not in the
// replica set.
func NewReadConfirmer(cfg ReadConfig) (*ReadConfirmer, error) {
	if !slices.Contains(cfg.ReplicaSet, cfg.Self) {
		return nil, badInput("reads: self %q is not in the replica set", cfg.Self)
	}
	return &ReadConfirmer{cfg: cfg, rounds: map[RoundID]*readRound{}}, nil
}

// Take records read id, which took a value produced by the write ending at produced (one
// past the offset of the record that wrote it; 0 when the value was never written).
// Without the fix it joins a round already in flight.
func (c *ReadConfirmer) Take(id ReadID, produced uint64) {
	r := waitingRead{id: id, needs: produced}
	if c.cfg.without.lateRound {
		for rid, rr := range c.rounds {
			if !rr.done && rid > r.round {
				r.round = rid
			}
		}
	}
	c.reads = append(c.reads, r)
}

// StartRound starts a round covering every read taken and not yet covered, and returns
// its id for the Fence messages (at the leader's generation) to send; false when no read
// waits for one.
func (c *ReadConfirmer) StartRound() (RoundID, bool) {
	c.next++
	covered := false
	for i := range c.reads {
		if c.reads[i].round == 0 {
			c.reads[i].round = c.next
			covered = true
		}
	}
	if !covered {
		c.next--
		return 0, false
	}
	c.rounds[c.next] = &readRound{answered: []string{c.cfg.Self}}
	return c.next, true
}

// RoundAnswer records from's FenceOk at generation for round; an answer at another
// generation, from a non-member or for a finished or unknown round changes nothing.
func (c *ReadConfirmer) RoundAnswer(round RoundID, from string, generation uint64) {
	rr, ok := c.rounds[round]
	if !ok || rr.done || generation != c.cfg.Generation || !slices.Contains(c.cfg.ReplicaSet, from) ||
		slices.Contains(rr.answered, from) {
		return
	}
	rr.answered = append(rr.answered, from)
	if len(rr.answered) >= len(c.cfg.ReplicaSet)/2+1 {
		rr.done = true
	}
}

// RoundFailed fails round: a replica answered FencedEpoch, or no majority answered within
// the caller's round timeout (a lease duration at most). Its reads answer
// ErrLeadershipLost.
func (c *ReadConfirmer) RoundFailed(round RoundID) {
	rr, ok := c.rounds[round]
	if !ok || rr.done {
		return
	}
	delete(c.rounds, round)
	for i := range c.reads {
		if c.reads[i].round == round {
			c.reads[i].failed = true
		}
	}
}

// SetMark records the leader's quorum mark (it never moves back).
func (c *ReadConfirmer) SetMark(mark uint64) { c.mark = max(c.mark, mark) }

// Ready returns, in the order they were taken, the reads that may be answered now and
// forgets them.
func (c *ReadConfirmer) Ready() []ReadResult {
	var out []ReadResult
	keep := c.reads[:0]
	for _, r := range c.reads {
		rr := c.rounds[r.round]
		switch {
		case r.failed:
			out = append(out, ReadResult{ID: r.id, Err: ErrLeadershipLost})
		case rr != nil && rr.done && (r.needs <= c.mark || c.cfg.without.markWait):
			out = append(out, ReadResult{ID: r.id})
		default:
			keep = append(keep, r)
		}
	}
	c.reads = keep
	for id, rr := range c.rounds {
		if rr.done && !c.uses(id) {
			delete(c.rounds, id)
		}
	}
	return out
}

// Waiting returns how many reads wait.
func (c *ReadConfirmer) Waiting() int { return len(c.reads) }

func (c *ReadConfirmer) uses(round RoundID) bool {
	for _, r := range c.reads {
		if r.round == round {
			return true
		}
	}
	return false
}

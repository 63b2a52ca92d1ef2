package faultproxy

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// packet is one datagram in a link: a pooled buffer, its length, the session that carries it (which
// tells the sender where it goes), and, once admitted, its release time and emission order.
type packet struct {
	buf *[]byte
	n   int
	s   *session
	due time.Time
	seq uint64
}

// heldPacket is a datagram held back for reordering: released once left more datagrams of the link
// have been emitted after it, or at deadline.
type heldPacket struct {
	p        packet
	left     int
	deadline time.Time
}

// LinkStats is a snapshot of one link's counters since the Proxy started (Reset does not clear
// them). Packets are datagrams; bytes are UDP payload bytes.
type LinkStats struct {
	PacketsIn        uint64 `json:"packets_in"`        // datagrams read for this link
	BytesIn          uint64 `json:"bytes_in"`          // their payload bytes
	Forwarded        uint64 `json:"forwarded"`         // datagrams written onward, duplicates included
	BytesForwarded   uint64 `json:"bytes_forwarded"`   // their payload bytes
	DroppedBlackhole uint64 `json:"dropped_blackhole"` // dropped by Blackhole (at arrival or while queued)
	DroppedLoss      uint64 `json:"dropped_loss"`      // dropped by LossPct
	DroppedOversize  uint64 `json:"dropped_oversize"`  // dropped by MaxDatagram
	DroppedRate      uint64 `json:"dropped_rate"`      // dropped because the shaping queue was full
	DroppedSession   uint64 `json:"dropped_session"`   // no upstream socket (MaxSessions reached or open failed)
	DroppedWrite     uint64 `json:"dropped_write"`     // the onward write failed
	DroppedClosed    uint64 `json:"dropped_closed"`    // still queued when the Proxy closed
	Duplicated       uint64 `json:"duplicated"`        // extra copies sent by DuplicatePct
	Corrupted        uint64 `json:"corrupted"`         // datagrams with one byte flipped by CorruptPct
	Reordered        uint64 `json:"reordered"`         // datagrams held back by ReorderPct
	Delayed          uint64 `json:"delayed"`           // datagrams that waited in the delay queue (Delay, Jitter, rate cap)
	DelayedBytes     uint64 `json:"delayed_bytes"`     // their payload bytes
	Queued           uint64 `json:"queued"`            // gauge: datagrams inside the link now (delay queue, reorder hold, being written)
}

// Dropped is the sum of every drop counter of s.
func (s LinkStats) Dropped() uint64 {
	return s.DroppedBlackhole + s.DroppedLoss + s.DroppedOversize + s.DroppedRate + s.DroppedSession +
		s.DroppedWrite + s.DroppedClosed
}

type counters struct {
	in, bytesIn, forwarded, bytesForwarded                  atomic.Uint64
	dropBlackhole, dropLoss, dropOversize, dropRate         atomic.Uint64
	dropSession, dropWrite, dropClosed                      atomic.Uint64
	duplicated, corrupted, reordered, delayed, delayedBytes atomic.Uint64
}

// link is one directed link: its faults, PRNG, token bucket, reorder hold and delay queue. Every
// field below mu is guarded by it; counters are atomics so the senders update them without it.
type link struct {
	dir   Direction
	clock Clock
	pool  *bufPool
	wake  chan struct{} // capacity 1: the scheduler has an earlier deadline to look at
	c     counters

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
	tokens float64   // token bucket level in bytes; negative = shaping backlog
	last   time.Time // last token refill
	held   []heldPacket
	queue  []packet // min-heap by (due, seq)
	seq    uint64
}

func newLink(dir Direction, seed uint64, clock Clock, pool *bufPool) *link {
	return &link{
		dir: dir, clock: clock, pool: pool, wake: make(chan struct{}, 1),
		rng:  rand.New(rand.NewPCG(seed, uint64(dir)+1)),
		held: make([]heldPacket, 0, MaxReorderWindow),
	}
}

// handle applies the link's faults to p (arrived at now) and appends to out the datagrams to send
// at once, in order; the rest wait in the delay queue or the reorder hold. p's buffer is owned by
// the link from here on.
func (l *link) handle(p packet, now time.Time, out []packet) []packet {
	l.c.in.Add(1)
	l.c.bytesIn.Add(uint64(p.n))
	l.mu.Lock()
	defer l.mu.Unlock()
	f := &l.faults
	if drop := l.dropCounter(p.n); drop != nil {
		drop.Add(1)
		l.pool.put(p.buf)
		return out
	}
	if f.CorruptPct > 0 && l.chance(f.CorruptPct) {
		l.corrupt(p)
	}
	var dup packet
	if f.DuplicatePct > 0 && l.chance(f.DuplicatePct) {
		dup = packet{buf: l.pool.get(p.n), n: p.n, s: p.s}
		copy(*dup.buf, (*p.buf)[:p.n])
		l.c.duplicated.Add(1)
	}
	out = l.admit(p, now, out)
	if dup.buf != nil {
		out = l.admit(dup, now, out)
	}
	return out
}

// dropCounter returns the counter of the arrival-time fault that drops an n-byte datagram, or nil.
func (l *link) dropCounter(n int) *atomic.Uint64 {
	f := &l.faults
	switch {
	case f.Blackhole:
		return &l.c.dropBlackhole
	case f.MaxDatagram > 0 && n > f.MaxDatagram:
		return &l.c.dropOversize
	case f.LossPct > 0 && l.chance(f.LossPct):
		return &l.c.dropLoss
	}
	return nil
}

// chance draws once from the PRNG: true with probability pct percent.
func (l *link) chance(pct float64) bool { return l.rng.Float64()*100 < pct }

// corrupt XORs one PRNG-chosen byte of p with a non-zero PRNG byte.
func (l *link) corrupt(p packet) {
	if p.n == 0 {
		return
	}
	b := (*p.buf)[:p.n]
	b[l.rng.IntN(p.n)] ^= byte(1 + l.rng.IntN(255))
	l.c.corrupted.Add(1)
}

// admit runs the rate cap, the delay and the reorder decision for p and emits it (or holds it).
func (l *link) admit(p packet, now time.Time, out []packet) []packet {
	f := &l.faults
	wait, ok := l.shape(p.n, now)
	if !ok {
		l.c.dropRate.Add(1)
		l.pool.put(p.buf)
		return out
	}
	p.due = now.Add(wait + l.delay())
	if f.ReorderPct > 0 && len(l.held) < MaxReorderWindow && l.chance(f.ReorderPct) {
		l.held = append(l.held, heldPacket{p: p, left: f.reorderWindow(), deadline: now.Add(f.reorderTimeout())})
		l.c.reordered.Add(1)
		l.signal()
		return out
	}
	out = l.emit(p, now, out)
	return l.overtake(p.due, now, out)
}

// shape charges n bytes to the token bucket and returns how long the datagram waits for its
// tokens; false when the shaping backlog would exceed the queue bound.
func (l *link) shape(n int, now time.Time) (time.Duration, bool) {
	f := &l.faults
	rate := float64(f.RateBytesPerSec)
	if rate <= 0 {
		return 0, true
	}
	if dt := now.Sub(l.last); dt > 0 {
		l.tokens += rate * dt.Seconds()
		l.last = now
	}
	if burst := float64(f.RateBurstBytes); l.tokens > burst {
		l.tokens = burst
	}
	if backlog := -l.tokens; backlog > 0 && backlog+float64(n) > float64(f.rateQueue()) {
		return 0, false
	}
	l.tokens -= float64(n)
	if l.tokens >= 0 {
		return 0, true
	}
	return time.Duration(-l.tokens / rate * float64(time.Second)), true
}

// delay draws Delay±Jitter (never negative).
func (l *link) delay() time.Duration {
	f := &l.faults
	d := f.Delay
	if f.Jitter > 0 {
		d += time.Duration(l.rng.Int64N(2*int64(f.Jitter)+1)) - f.Jitter
	}
	return max(d, 0)
}

// emit gives p its emission order and appends it to out when due, else queues it.
func (l *link) emit(p packet, now time.Time, out []packet) []packet {
	l.seq++
	p.seq = l.seq
	if !p.due.After(now) {
		return append(out, p)
	}
	l.c.delayed.Add(1)
	l.c.delayedBytes.Add(uint64(p.n))
	l.push(p)
	return out
}

// overtake counts one emitted datagram (due at due) against every held one and emits, right after
// it, those that have now been overtaken by their window.
func (l *link) overtake(due, now time.Time, out []packet) []packet {
	for i := 0; i < len(l.held); {
		h := &l.held[i]
		if h.left--; h.left > 0 {
			i++
			continue
		}
		p := h.p
		l.held = append(l.held[:i], l.held[i+1:]...)
		if p.due.Before(due) {
			p.due = due
		}
		out = l.emit(p, now, out)
	}
	return out
}

// popDue appends to out every queued datagram due by now (dropping them under Blackhole) and every
// held datagram past its deadline; it returns the next time the scheduler must look (zero: none).
func (l *link) popDue(now time.Time, out []packet) ([]packet, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < len(l.held); {
		if l.held[i].deadline.After(now) {
			i++
			continue
		}
		p := l.held[i].p
		l.held = append(l.held[:i], l.held[i+1:]...)
		l.requeue(p, now)
	}
	for len(l.queue) > 0 && !l.queue[0].due.After(now) {
		p := l.pop()
		if l.faults.Blackhole {
			l.c.dropBlackhole.Add(1)
			l.pool.put(p.buf)
			continue
		}
		out = append(out, p)
	}
	var next time.Time
	if len(l.queue) > 0 {
		next = l.queue[0].due
	}
	for _, h := range l.held {
		if next.IsZero() || h.deadline.Before(next) {
			next = h.deadline
		}
	}
	return out, next
}

// requeue puts a released held datagram into the delay queue, due no earlier than now.
func (l *link) requeue(p packet, now time.Time) {
	l.seq++
	p.seq = l.seq
	p.due = maxTime(p.due, now)
	l.push(p)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// signal wakes the scheduler without blocking.
func (l *link) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// run is the link's scheduler: it sends queued datagrams when due (with send) until done closes.
func (l *link) run(done <-chan struct{}, send func(packet)) {
	t := l.clock.NewTimer(time.Hour)
	defer t.Stop()
	var out []packet
	for {
		now := l.clock.Now()
		var next time.Time
		out, next = l.popDue(now, out[:0])
		for _, p := range out {
			send(p)
		}
		var fire <-chan time.Time
		if next.IsZero() {
			t.Stop()
		} else {
			t.Reset(max(next.Sub(now), 0))
			fire = t.C()
		}
		select {
		case <-done:
			return
		case <-l.wake:
		case <-fire:
		}
	}
}

// set replaces the faults (applying at now) and releases held datagrams; a changed rate cap starts
// with a full bucket (an unchanged one keeps its backlog). flush also releases every queued datagram
// at once and empties the bucket's backlog. It returns the faults replaced.
func (l *link) set(f Faults, now time.Time, flush bool) Faults {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.faults
	l.faults = f
	if flush || f.RateBytesPerSec != before.RateBytesPerSec || f.RateBurstBytes != before.RateBurstBytes {
		l.tokens, l.last = float64(f.RateBurstBytes), now // a new cap starts with a full bucket
	}
	for _, h := range l.held {
		l.requeue(h.p, now)
	}
	l.held = l.held[:0]
	if flush {
		for i := range l.queue {
			l.queue[i].due = now
		}
		l.heapify()
	}
	l.signal()
	return before
}

// get returns the current faults.
func (l *link) get() Faults {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.faults
}

// drain frees every queued and held datagram (the Proxy is closing), counting them DroppedClosed.
func (l *link) drain() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.queue {
		l.pool.put(p.buf)
	}
	for _, h := range l.held {
		l.pool.put(h.p.buf)
	}
	l.c.dropClosed.Add(uint64(len(l.queue) + len(l.held)))
	l.queue, l.held = l.queue[:0], l.held[:0]
}

// stats snapshots the counters. Queued is derived by conservation (every datagram in, and every
// duplicate, is forwarded, dropped or still inside); the outflow counters are read first, so a
// datagram in transit is never counted out before it is counted in.
func (l *link) stats() LinkStats {
	c := &l.c
	s := LinkStats{
		Forwarded: c.forwarded.Load(), BytesForwarded: c.bytesForwarded.Load(), DroppedBlackhole: c.dropBlackhole.Load(),
		DroppedLoss: c.dropLoss.Load(), DroppedOversize: c.dropOversize.Load(), DroppedRate: c.dropRate.Load(),
		DroppedSession: c.dropSession.Load(), DroppedWrite: c.dropWrite.Load(), DroppedClosed: c.dropClosed.Load(),
		Delayed: c.delayed.Load(), DelayedBytes: c.delayedBytes.Load(), Reordered: c.reordered.Load(),
		Corrupted: c.corrupted.Load(),
	}
	s.Duplicated, s.BytesIn, s.PacketsIn = c.duplicated.Load(), c.bytesIn.Load(), c.in.Load()
	s.Queued = s.PacketsIn + s.Duplicated - s.Forwarded - s.Dropped()
	return s
}

// The delay queue: a binary min-heap on (due, seq), typed so that pushes do not box.

func (l *link) less(i, j int) bool {
	a, b := &l.queue[i], &l.queue[j]
	if a.due.Equal(b.due) {
		return a.seq < b.seq
	}
	return a.due.Before(b.due)
}

func (l *link) push(p packet) {
	l.queue = append(l.queue, p)
	for i := len(l.queue) - 1; i > 0; {
		parent := (i - 1) / 2
		if !l.less(i, parent) {
			break
		}
		l.queue[i], l.queue[parent] = l.queue[parent], l.queue[i]
		i = parent
	}
	if l.queue[0].seq == p.seq {
		l.signal()
	}
}

func (l *link) pop() packet {
	top := l.queue[0]
	last := len(l.queue) - 1
	l.queue[0] = l.queue[last]
	l.queue[last] = packet{}
	l.queue = l.queue[:last]
	l.down(0)
	return top
}

func (l *link) down(i int) {
	for n := len(l.queue); ; {
		small, left, right := i, 2*i+1, 2*i+2
		if left < n && l.less(left, small) {
			small = left
		}
		if right < n && l.less(right, small) {
			small = right
		}
		if small == i {
			return
		}
		l.queue[i], l.queue[small] = l.queue[small], l.queue[i]
		i = small
	}
}

func (l *link) heapify() {
	for i := len(l.queue)/2 - 1; i >= 0; i-- {
		l.down(i)
	}
}

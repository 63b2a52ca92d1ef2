package replica

import (
	"fmt"
	"time"
)

// ShipperState is where one (follower, log) stands on the leader.
type ShipperState uint8

// Shipper states (docs/replication.md, "The shipper").
const (
	// Shipping: records (or, when the follower is below the leader's earliest offset, a
	// bootstrap offer) are sent as the window allows.
	Shipping ShipperState = iota + 1
	// Retrying: the follower answered StaleRoute; nothing is sent before RetryAt.
	Retrying
	// Halted: the follower diverged (LogConflict), refused a bootstrap (needs_bootstrap),
	// refused the peer (Unauthorized), its disk failed, or it predates ReplicateRebuild.
	// Only a rebuild under the policy (RebuildAllowed) leaves it.
	Halted
	// Fenced: the follower knows a newer generation; this leader stops shipping for good.
	Fenced
)

var shipperStateNames = [...]string{"", "shipping", "retrying", "halted", "fenced"}

// String returns "shipping", "retrying", "halted" or "fenced".
func (s ShipperState) String() string {
	if int(s) < len(shipperStateNames) && s != 0 {
		return shipperStateNames[s]
	}
	return fmt.Sprintf("ShipperState(%d)", uint8(s))
}

// MaxMalformed is how many Malformed answers in a row a shipper takes before it halts with
// HaltUnsupported: a bad checksum is resent, but an old peer answers a kind it does not know
// with Malformed every time (seeds/internal-protocol.txt, "Replicating a cache").
const MaxMalformed = 8

// Halt reasons, as /replication/halted lists them.
const (
	HaltDiverged       = "diverged"
	HaltNeedsBootstrap = "needs_bootstrap"
	HaltUnauthorized   = "unauthorized"
	HaltStorageFailed  = "storage_failed"
	HaltUnsupported    = "unsupported_kind"
)

// ShipperConfig are a shipper's fixed inputs.
type ShipperConfig struct {
	// Generation is the leader's generation (the epoch of every message it sends).
	Generation uint64
	// Window bounds the payload bytes in flight (sent, not answered); at least one batch is
	// always allowed. 0 means 1 MiB.
	Window uint64
	// RetryDelay is how long a StaleRoute answer holds shipping; 0 means 50 ms.
	RetryDelay time.Duration
	// Timeout is how long a request may stay unanswered before it counts as lost and its
	// records are sent again (the transport's request timeout); 0 means 1 s.
	Timeout time.Duration
}

// SendKind is what Shipper.Next asks the caller to send.
type SendKind uint8

// Send kinds.
const (
	SendNothing SendKind = iota
	SendRecords
	SendBootstrap
	SendRebuild
)

// Send is what to send next. For SendRecords: the records [From, To) of the log, as many as
// fit MaxBytes of payload (at least one), reported back with Sent. For SendBootstrap and
// SendRebuild: BaseOffset, the leader's earliest offset, reported back with SentOffer.
// For SendNothing, WakeAt (when non-zero) is when to ask again.
type Send struct {
	Kind       SendKind
	From, To   uint64
	MaxBytes   uint64
	BaseOffset uint64
	WakeAt     int64
}

type flight struct {
	kind        SendKind
	first, end  uint64
	bytes       uint64
	sentAt      int64
	live        bool // still counted in the window and the resume position
	probe       bool
	rebuildBase uint64
}

// Shipper is the leader's state for one (follower, log) at one generation. Not safe for
// concurrent use; time is nanoseconds on the caller's clock.
type Shipper struct {
	cfg      ShipperConfig
	state    ShipperState
	reason   string
	next     uint64 // next offset to send
	acked    uint64 // acknowledged at this generation, in answer to this leader's batches
	hasAck   bool
	bootstrp bool // the follower is below the leader's earliest: offer a bootstrap
	offer    bool // a bootstrap or rebuild is in flight
	inflight uint64
	retryAt  int64
	flights  map[uint64]*flight
	bad      int    // Malformed answers in a row
	diverged uint64 // end of the batch answered LogConflict
	// probing: while halted as diverged, one-record batches bisect [probeLo, probeHi) for
	// the first offset the follower disagrees on: it agrees below probeLo (and counts
	// there), and not below probeHi.
	probing  bool
	probeOut bool
	probeLo  uint64
	probeHi  uint64
	stats    ShipperStats
}

// ShipperStats count what a shipper saw (the per-follower metrics of issue 18).
type ShipperStats struct {
	Batches, Acks, Resends, Gaps, Conflicts, Halts, StaleRoutes, Lost uint64
}

// NewShipper returns a shipper at cfg.Generation that starts sending at start (the
// follower's durable_offset from its FenceOk, capped at the leader's tail).
func NewShipper(cfg ShipperConfig, start uint64) *Shipper {
	if cfg.Window == 0 {
		cfg.Window = 1 << 20
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 50 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	return &Shipper{cfg: cfg, state: Shipping, next: start, flights: map[uint64]*flight{}}
}

// State returns the state and, when Halted, the reason (HaltDiverged, ...).
func (s *Shipper) State() (ShipperState, string) { return s.state, s.reason }

// NextOffset returns the next offset to send.
func (s *Shipper) NextOffset() uint64 { return s.next }

// Acked returns the offset the follower acknowledged at this generation in answer to this
// leader's own batches (one past the last record it holds on disk as far as that goes), and
// whether it acknowledged anything yet.
func (s *Shipper) Acked() (uint64, bool) { return s.acked, s.hasAck }

// InFlight returns the payload bytes sent and not answered.
func (s *Shipper) InFlight() uint64 { return s.inflight }

// Stats returns the counters.
func (s *Shipper) Stats() ShipperStats { return s.stats }

// DivergedBelow returns, for a follower halted as diverged, an offset its copy disagrees
// with the leader's below (the end of the batch it answered LogConflict, lowered by the
// probes to one past the first record that differs): its copy can agree only below it, so a
// rebuild keeps every acknowledged record on a majority once a majority without it holds
// the leader's log that far (Tracker.MarkWithout). 0 otherwise.
func (s *Shipper) DivergedBelow() uint64 {
	if s.state == Halted && s.reason == HaltDiverged {
		return s.diverged
	}
	return 0
}

// RebuildAllowed reports whether the policy lets this leader send ReplicateRebuild: only
// for a follower halted as diverged or needing bootstrap, never once fenced.
func (s *Shipper) RebuildAllowed() bool {
	return s.state == Halted && (s.reason == HaltDiverged || s.reason == HaltNeedsBootstrap)
}

// Next says what to send at now, given the leader's earliest offset still held and its
// shippable tail (what it has committed). It first expires requests unanswered for longer
// than the timeout (their records are sent again).
func (s *Shipper) Next(now int64, earliest, tail uint64) Send {
	s.expire(now)
	switch s.state {
	case Retrying:
		if now < s.retryAt {
			return Send{WakeAt: s.retryAt}
		}
		s.state = Shipping
	case Halted:
		return s.nextProbe(earliest)
	case Fenced:
		return Send{}
	}
	if s.offer {
		return Send{}
	}
	if s.bootstrp || s.next < earliest {
		s.bootstrp = true
		return Send{Kind: SendBootstrap, BaseOffset: earliest}
	}
	if s.next >= tail || (s.inflight >= s.cfg.Window && s.inflight > 0) {
		return Send{}
	}
	return Send{Kind: SendRecords, From: s.next, To: tail, MaxBytes: s.cfg.Window - min(s.inflight, s.cfg.Window)}
}

// Sent records that the caller sent records [first, end) (bytes of payload) as request
// corr at now.
func (s *Shipper) Sent(now int64, corr, first, end, bytes uint64) {
	if s.state == Halted {
		s.flights[corr] = &flight{kind: SendRecords, first: first, end: end, sentAt: now, probe: true}
		s.probeOut = true
		return
	}
	s.flights[corr] = &flight{kind: SendRecords, first: first, end: end, bytes: bytes, sentAt: now, live: true}
	s.inflight += bytes
	s.next = max(s.next, end)
	s.stats.Batches++
}

// SentOffer records that the caller sent the bootstrap offer or rebuild Next (or Rebuild)
// asked for, as request corr at base offset base.
func (s *Shipper) SentOffer(now int64, corr uint64, kind SendKind, base uint64) {
	s.flights[corr] = &flight{kind: kind, sentAt: now, live: true, rebuildBase: base}
	s.offer = true
}

// Rebuild returns the ReplicateRebuild to send when RebuildAllowed (SendNothing otherwise):
// discard the follower's copy and place it at earliest.
func (s *Shipper) Rebuild(earliest uint64) Send {
	if !s.RebuildAllowed() || s.offer || s.probeOut {
		return Send{}
	}
	return Send{Kind: SendRebuild, BaseOffset: earliest}
}

// expire treats requests older than the timeout as lost: their answer may never come, so
// shipping resumes from the earliest lost batch.
func (s *Shipper) expire(now int64) {
	for corr, f := range s.flights {
		if now-f.sentAt >= int64(s.cfg.Timeout) {
			s.stats.Lost++
			s.drop(corr, f)
			if f.kind == SendRecords && f.live {
				s.rewind(f.first)
			}
		}
	}
}

// nextProbe is Next for a follower halted as diverged: the next one-record probe of the
// bisection, while none is in flight.
func (s *Shipper) nextProbe(earliest uint64) Send {
	s.probeLo = max(s.probeLo, earliest)
	if !s.probing || s.probeOut || s.offer || s.probeHi <= s.probeLo+1 {
		return Send{}
	}
	mid := s.probeLo + (s.probeHi-s.probeLo)/2
	return Send{Kind: SendRecords, From: mid - 1, To: mid, MaxBytes: s.cfg.Window}
}

// conflicted halts a follower whose records batch f met LogConflict, or moves the
// bisection's upper end down to a probe that met it.
func (s *Shipper) conflicted(f *flight) {
	if f.probe {
		s.probeHi, s.diverged = f.end, f.end
		s.probing = s.probeHi > s.probeLo+1
		return
	}
	s.diverged = f.end
	s.halt(HaltDiverged)
	s.probing, s.probeLo, s.probeHi = true, s.acked, f.end
}

// drop forgets request corr.
func (s *Shipper) drop(corr uint64, f *flight) {
	delete(s.flights, corr)
	if f.probe {
		s.probeOut = false
	}
	if f.kind != SendRecords {
		s.offer = false
	} else if f.live {
		s.inflight -= f.bytes
	}
}

// rewind moves the next offset back to at and stops counting every batch at or past it in
// the window (their answers still count as acknowledgements if they come).
func (s *Shipper) rewind(at uint64) {
	s.next = min(s.next, at)
	for _, f := range s.flights {
		if f.kind == SendRecords && f.live && f.end > at {
			f.live = false
			s.inflight -= f.bytes
		}
	}
}

// halt stops shipping with reason.
func (s *Shipper) halt(reason string) {
	s.state, s.reason = Halted, reason
	s.stats.Halts++
}

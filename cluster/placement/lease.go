package placement

import "time"

// Lease defaults (docs/failover.md, "Leases"): the seed and the spec give no number for
// the clock bound ("only as safe as the clocks and the lease margins"), so this package
// takes a rate-drift bound between any two clocks of DefaultMaxDriftPPM parts per million
// (1 %, two orders above what NTP-disciplined and free-running quartz clocks drift), and
// a lease of DefaultLeaseDuration, renewed with every heartbeat.
const (
	DefaultLeaseDuration = 2 * time.Second
	DefaultMaxDriftPPM   = 10_000
)

// LeaseConfig is the lease's duration and the clock-drift bound both sides assume; a zero
// field takes its default.
type LeaseConfig struct {
	Duration    time.Duration
	MaxDriftPPM int64
}

func (c LeaseConfig) withDefaults() LeaseConfig {
	if c.Duration <= 0 {
		c.Duration = DefaultLeaseDuration
	}
	if c.MaxDriftPPM <= 0 {
		c.MaxDriftPPM = DefaultMaxDriftPPM
	}
	return c
}

// HolderExpiry is when a lease ends on the holder's (the leader's) monotonic clock, given
// when it sent the request the grant answers (requestedAt): the duration shortened by the
// drift bound, counted from before the control plane could have granted it, so network
// delay only shortens the lease.
func (c LeaseConfig) HolderExpiry(requestedAt int64) int64 {
	c = c.withDefaults()
	d := int64(c.Duration)
	return requestedAt + d - d/1_000_000*c.MaxDriftPPM
}

// GrantorExpiry is when the lease is certainly over on the control plane's clock, given
// when it granted it: the duration lengthened by the drift bound. Placement promotes away
// from a leader serving on its lease only after this (Shard.LeaseUntil).
func (c LeaseConfig) GrantorExpiry(grantedAt int64) int64 {
	c = c.withDefaults()
	d := int64(c.Duration)
	return grantedAt + d + d/1_000_000*c.MaxDriftPPM
}

// Lease is a leader's lease at a generation, its expiry on the leader's clock
// (HolderExpiry). The zero Lease is never valid.
type Lease struct {
	Generation uint64
	Expiry     int64
}

// Valid reports whether the lease holds at now (the holder's clock) for generation.
func (l Lease) Valid(now int64, generation uint64) bool {
	return l.Expiry != 0 && l.Generation == generation && now < l.Expiry
}

// Renew returns the lease extended by a grant at generation answering a request sent at
// requestedAt; a grant for another generation replaces it, an older expiry never shortens
// it at the same generation.
func (l Lease) Renew(c LeaseConfig, generation uint64, requestedAt int64) Lease {
	e := c.HolderExpiry(requestedAt)
	if l.Generation == generation {
		e = max(e, l.Expiry)
	}
	return Lease{Generation: generation, Expiry: e}
}

// MayAck reports whether a Quorum write may be acknowledged at now: always by the quorum
// mark with majority_ack; before it, only while the lease is valid
// (seeds/upgrades-and-compatibility.txt, majority_ack). cluster/replica's Tracker.AckMark
// takes the same decision from Expiry.
func (l Lease) MayAck(now int64, generation uint64, majorityAck bool) bool {
	return majorityAck || l.Valid(now, generation)
}

// LeaderRead gates a Leader-stream read, and a Quorum read in lease mode
// (FELIX_QUORUM_READS=lease): nil while the lease is valid, ErrLeaseExpired after.
func (l Lease) LeaderRead(now int64, generation uint64) error {
	if l.Valid(now, generation) {
		return nil
	}
	return ErrLeaseExpired
}

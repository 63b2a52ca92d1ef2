package bench

import (
	"errors"
	"fmt"
	"time"
)

// ErrUnaccounted is wrapped by the *AccountingError of a run in which some message was
// sent but neither delivered nor counted as dropped: such a run reports no figure.
var ErrUnaccounted = errors.New("bench: unaccounted messages")

// ErrTooSmall is returned for a run that moved no more than Settings.MinBytes when
// Settings.RefuseSmall is set (otherwise the run carries a warning).
var ErrTooSmall = errors.New("bench: run smaller than the QUIC send window")

// AccountingError says how many messages of which receiver went missing.
type AccountingError struct {
	Shape     string
	Receiver  string // "subscriber 3", "counters", ...
	Sent      int64
	Delivered int64
	Dropped   int64
}

// Error says which receiver is short and by how many messages.
func (e *AccountingError) Error() string {
	return fmt.Sprintf("bench: %s: %s: %d sent, %d delivered, %d dropped: %d unaccounted",
		e.Shape, e.Receiver, e.Sent, e.Delivered, e.Dropped, e.Sent-e.Delivered-e.Dropped)
}

// Unwrap makes errors.Is(err, ErrUnaccounted) true.
func (e *AccountingError) Unwrap() error { return ErrUnaccounted }

// Account checks sent == delivered + dropped for one receiver: nil, or an
// *AccountingError. A receiver that got more than was sent (a duplicate) fails too.
func Account(shape, receiver string, sent, delivered, dropped int64) error {
	if sent != delivered+dropped {
		return &AccountingError{Shape: shape, Receiver: receiver, Sent: sent, Delivered: delivered, Dropped: dropped}
	}
	return nil
}

// Result is the outcome of one measured run of one system (felix or a peer).
type Result struct {
	System   string   `json:"system"` // "felix", "nats-jetstream-sync-always", "redis", ...
	Shape    Shape    `json:"shape"`
	Settings Settings `json:"settings"`
	Loop     string   `json:"loop"` // "closed" or "open"
	// Sent counts records (operations) issued in the measured phase; Delivered counts
	// deliveries summed over subscribers (= Sent × Fanout when nothing is dropped);
	// Dropped counts deliveries the broker reported dropped (offset gaps); Refused counts
	// publishes or operations the broker refused (overloaded), which were never sent on.
	Sent      int64 `json:"sent"`
	Delivered int64 `json:"delivered"`
	Dropped   int64 `json:"dropped"`
	Refused   int64 `json:"refused"`
	// Elapsed is the measured phase's length.
	Elapsed time.Duration `json:"elapsed_ns"`
	// RecordsPerSec is delivered records (pubsub, replay, group) or completed operations
	// per second; BytesPerSec the matching payload bytes per second.
	RecordsPerSec float64 `json:"records_per_sec"`
	BytesPerSec   float64 `json:"bytes_per_sec"`
	// OfferedRate is Settings.Rate for open loop, 0 for closed.
	OfferedRate float64     `json:"offered_rate"`
	Latency     Percentiles `json:"latency"`
	// LatencyFrom says what the latency measures ("intended send → delivery", "ack", ...).
	LatencyFrom string `json:"latency_from"`
	// BrokerCPUCores is the broker's (or peer server's) CPU time over the measured phase
	// divided by its length (1.0 = one core busy; for peers: over the whole client run);
	// BrokerRSS its resident memory at the end (bytes).
	BrokerCPUCores float64 `json:"broker_cpu_cores"`
	BrokerRSS      int64   `json:"broker_rss_bytes"`
	// ClientCPUCores is the load generator's CPU over the same phase (1.0 = one core): for
	// Felix this felix-bench process (the SDK clients), for a peer or a ceiling its client
	// process as it measured itself; 0 = not measured.
	ClientCPUCores float64 `json:"client_cpu_cores"`
	// Round numbers the comparison round a run belongs to (compare --rounds; 0 = not a
	// round of a comparison).
	Round    int      `json:"round,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
	// PeerSettings are a peer's own settings as felix-peers reported them.
	PeerSettings map[string]any `json:"peer_settings,omitempty"`
}

// CPUPerOp is cores ÷ perSec: the CPU time one delivered record or operation cost
// (0 when either is 0).
func CPUPerOp(cores, perSec float64) time.Duration {
	if cores <= 0 || perSec <= 0 {
		return 0
	}
	return time.Duration(cores / perSec * float64(time.Second))
}

// finish fills the rates from counts and elapsed, and checks the run's size against the
// send window by the bytes on the wire (payload plus a nominal 8 bytes of framing per record,
// so a run of empty payloads is judged too).
func (r *Result) finish(records, bytes int64) error {
	secs := r.Elapsed.Seconds()
	if secs > 0 {
		r.RecordsPerSec = float64(records) / secs
		r.BytesPerSec = float64(bytes) / secs
	}
	if wire := bytes + 8*records; wire <= r.Settings.MinBytes {
		msg := fmt.Sprintf("moved %d bytes, not more than the QUIC send window of %d: figures may show buffering, not the steady state", wire, r.Settings.MinBytes)
		if r.Settings.RefuseSmall {
			return fmt.Errorf("%w: %s: %s", ErrTooSmall, r.Shape.Name, msg)
		}
		r.Warnings = append(r.Warnings, msg)
	}
	return nil
}

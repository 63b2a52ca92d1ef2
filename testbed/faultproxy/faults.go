package faultproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Direction names one directed link of a Proxy. ToServer carries datagrams from the clients to the
// upstream address, ToClient carries the upstream's replies back. Both is accepted only by the
// operations that change faults (SetFaults, SetBlackhole, PUT /links/both); it is not a link.
type Direction int

const (
	// ToServer is the client→server link ("to-server" in the control API and the logs).
	ToServer Direction = 0
	// ToClient is the server→client link ("to-client").
	ToClient Direction = 1
	// Both addresses ToServer and ToClient together ("both").
	Both Direction = -1
)

// numLinks is the number of directed links of one Proxy.
const numLinks = 2

// ErrUnknownLink is returned (wrapped) for a direction name or value that names no link.
var ErrUnknownLink = errors.New("faultproxy: unknown link")

// ErrInvalidFaults is wrapped by every *FaultError: a fault spec that is out of range or malformed.
var ErrInvalidFaults = errors.New("faultproxy: invalid faults")

// String returns "to-server", "to-client", "both" or "Direction(n)".
func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to-server"
	case ToClient:
		return "to-client"
	case Both:
		return "both"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// MarshalText encodes the direction by its String name, so JSON shows "to-server".
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a name accepted by ParseDirection, so JSON answers decode into Direction.
func (d *Direction) UnmarshalText(text []byte) error {
	v, err := ParseDirection(string(text))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDirection maps "to-server" (also "c2s"), "to-client" (also "s2c") and "both" to a Direction.
// Any other name gives an error wrapping ErrUnknownLink.
func ParseDirection(name string) (Direction, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "to-server", "c2s":
		return ToServer, nil
	case "to-client", "s2c":
		return ToClient, nil
	case "both":
		return Both, nil
	}
	return 0, fmt.Errorf("%w: %q (want to-server, to-client or both)", ErrUnknownLink, name)
}

// dirs expands d into the link indexes it addresses, or fails with ErrUnknownLink.
func (d Direction) dirs() ([]Direction, error) {
	switch d {
	case ToServer, ToClient:
		return []Direction{d}, nil
	case Both:
		return []Direction{ToServer, ToClient}, nil
	}
	return nil, fmt.Errorf("%w: %v", ErrUnknownLink, d)
}

// Limits of a fault spec, checked by Faults.Validate.
const (
	// MaxDelay bounds Delay + Jitter + ReorderTimeout: ten minutes.
	MaxDelay = 10 * time.Minute
	// MaxReorderWindow bounds ReorderWindow (and the number of datagrams held at once per link).
	MaxReorderWindow = 64
	// MaxDatagramSize is the largest UDP payload (65535 bytes); MaxDatagram may not exceed it.
	MaxDatagramSize = 65535
)

// Defaults applied when a fault is on but its companion setting is zero.
const (
	// DefaultReorderTimeout releases a held datagram when no later datagram released it: 50 ms.
	DefaultReorderTimeout = 50 * time.Millisecond
	// DefaultRateQueueBytes is the shaping backlog above which a rate-capped link drops: 256 KiB.
	DefaultRateQueueBytes = 256 << 10
)

// Faults is the fault spec of one link. The zero value forwards every datagram unchanged and at once.
// Decisions are applied to each datagram in this order: Blackhole, MaxDatagram, LossPct, CorruptPct,
// DuplicatePct, the rate cap, ReorderPct, then Delay±Jitter. Percentages are in [0, 100]; each is an
// independent draw from the link's seeded PRNG, made only while that fault is non-zero.
//
// JSON (the control API): {"delay":"20ms","jitter":"2ms","loss_pct":5,"duplicate_pct":1,
// "reorder_pct":10,"reorder_window":1,"reorder_timeout":"50ms","rate_bytes_per_sec":1000000,
// "rate_burst_bytes":0,"rate_queue_bytes":0,"blackhole":false,"max_datagram":1200,"corrupt_pct":0};
// durations are Go duration strings, omitted fields are zero, unknown fields are an error.
type Faults struct {
	// Delay is added to every forwarded datagram (one way, this link only).
	Delay time.Duration
	// Jitter spreads Delay uniformly over [Delay-Jitter, Delay+Jitter] (clamped at 0); datagrams may
	// therefore overtake each other, as on a real path.
	Jitter time.Duration
	// LossPct is the chance, in percent, that a datagram is dropped.
	LossPct float64
	// DuplicatePct is the chance, in percent, that a datagram is sent twice (the copy right after).
	DuplicatePct float64
	// ReorderPct is the chance, in percent, that a datagram is held back and released after the next
	// ReorderWindow datagrams of the link, or after ReorderTimeout when fewer follow.
	ReorderPct float64
	// ReorderWindow is how many later datagrams overtake a held one: 1..MaxReorderWindow (0 means 1).
	ReorderWindow int
	// ReorderTimeout releases a held datagram that was not overtaken in time (0 = DefaultReorderTimeout).
	ReorderTimeout time.Duration
	// RateBytesPerSec caps the link's throughput in payload bytes per second (0 = no cap). Datagrams
	// over the cap wait in a FIFO shaping queue (token bucket), they are not dropped at once.
	RateBytesPerSec int64
	// RateBurstBytes is the token bucket size: bytes that may pass at once after an idle spell (0 =
	// strict pacing).
	RateBurstBytes int64
	// RateQueueBytes bounds the shaping backlog; a datagram that would exceed it is dropped (counted
	// as DroppedRate). 0 = DefaultRateQueueBytes.
	RateQueueBytes int64
	// Blackhole drops every datagram of the link, including those already queued when it is set.
	// On one link it is an asymmetric partition; on Both a full one.
	Blackhole bool
	// MaxDatagram drops datagrams whose payload is larger than this many bytes (0 = no limit).
	MaxDatagram int
	// CorruptPct is the chance, in percent, that one byte of a datagram (chosen by the PRNG) is
	// XORed with a non-zero PRNG byte.
	CorruptPct float64
}

// FaultError describes one invalid field of a fault spec. It wraps ErrInvalidFaults.
type FaultError struct {
	Field  string // the JSON field name, e.g. "loss_pct"; "" for a malformed document
	Reason string // what is wrong, e.g. "must be in [0, 100]"
	Err    error  // an underlying decode error, or nil
}

// Error formats the field and the reason.
func (e *FaultError) Error() string {
	msg := "faultproxy: invalid faults"
	if e.Field != "" {
		msg += ": " + e.Field
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap lets errors.Is match ErrInvalidFaults (and the underlying decode error).
func (e *FaultError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalidFaults, e.Err}
	}
	return []error{ErrInvalidFaults}
}

// IsZero reports whether f forwards datagrams unchanged (every fault off).
func (f Faults) IsZero() bool { return f == Faults{} }

// Validate checks every field's range and returns a *FaultError naming the first bad one, or nil.
func (f Faults) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss_pct", f.LossPct}, {"duplicate_pct", f.DuplicatePct}, {"reorder_pct", f.ReorderPct}, {"corrupt_pct", f.CorruptPct}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 100 {
			return &FaultError{Field: p.name, Reason: fmt.Sprintf("%v must be in [0, 100]", p.v)}
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", f.Delay}, {"jitter", f.Jitter}, {"reorder_timeout", f.ReorderTimeout}} {
		if d.v < 0 || d.v > MaxDelay {
			return &FaultError{Field: d.name, Reason: fmt.Sprintf("%v must be in [0, %v]", d.v, MaxDelay)}
		}
	}
	if f.Delay+f.Jitter+f.ReorderTimeout > MaxDelay {
		return &FaultError{Field: "delay", Reason: fmt.Sprintf("delay+jitter+reorder_timeout must not exceed %v", MaxDelay)}
	}
	if f.ReorderWindow < 0 || f.ReorderWindow > MaxReorderWindow {
		return &FaultError{Field: "reorder_window", Reason: fmt.Sprintf("%d must be in [0, %d]", f.ReorderWindow, MaxReorderWindow)}
	}
	for _, n := range []struct {
		name string
		v    int64
	}{{"rate_bytes_per_sec", f.RateBytesPerSec}, {"rate_burst_bytes", f.RateBurstBytes}, {"rate_queue_bytes", f.RateQueueBytes}} {
		if n.v < 0 {
			return &FaultError{Field: n.name, Reason: fmt.Sprintf("%d must not be negative", n.v)}
		}
	}
	if f.MaxDatagram < 0 || f.MaxDatagram > MaxDatagramSize {
		return &FaultError{Field: "max_datagram", Reason: fmt.Sprintf("%d must be in [0, %d]", f.MaxDatagram, MaxDatagramSize)}
	}
	return nil
}

// reorderWindow is ReorderWindow with its default applied.
func (f Faults) reorderWindow() int {
	if f.ReorderWindow <= 0 {
		return 1
	}
	return f.ReorderWindow
}

// reorderTimeout is ReorderTimeout with its default applied.
func (f Faults) reorderTimeout() time.Duration {
	if f.ReorderTimeout <= 0 {
		return DefaultReorderTimeout
	}
	return f.ReorderTimeout
}

// rateQueue is RateQueueBytes with its default applied.
func (f Faults) rateQueue() int64 {
	if f.RateQueueBytes <= 0 {
		return DefaultRateQueueBytes
	}
	return f.RateQueueBytes
}

// faultsJSON is the wire form of Faults: durations as Go duration strings.
type faultsJSON struct {
	Delay           string  `json:"delay,omitempty"`
	Jitter          string  `json:"jitter,omitempty"`
	LossPct         float64 `json:"loss_pct,omitempty"`
	DuplicatePct    float64 `json:"duplicate_pct,omitempty"`
	ReorderPct      float64 `json:"reorder_pct,omitempty"`
	ReorderWindow   int     `json:"reorder_window,omitempty"`
	ReorderTimeout  string  `json:"reorder_timeout,omitempty"`
	RateBytesPerSec int64   `json:"rate_bytes_per_sec,omitempty"`
	RateBurstBytes  int64   `json:"rate_burst_bytes,omitempty"`
	RateQueueBytes  int64   `json:"rate_queue_bytes,omitempty"`
	Blackhole       bool    `json:"blackhole,omitempty"`
	MaxDatagram     int     `json:"max_datagram,omitempty"`
	CorruptPct      float64 `json:"corrupt_pct,omitempty"`
}

func durationText(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// MarshalJSON encodes f in the control API's form (zero fields omitted; {} for no faults).
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		Delay: durationText(f.Delay), Jitter: durationText(f.Jitter), LossPct: f.LossPct,
		DuplicatePct: f.DuplicatePct, ReorderPct: f.ReorderPct, ReorderWindow: f.ReorderWindow,
		ReorderTimeout: durationText(f.ReorderTimeout), RateBytesPerSec: f.RateBytesPerSec,
		RateBurstBytes: f.RateBurstBytes, RateQueueBytes: f.RateQueueBytes, Blackhole: f.Blackhole,
		MaxDatagram: f.MaxDatagram, CorruptPct: f.CorruptPct,
	})
}

// String is the compact JSON form, used in the logs.
func (f Faults) String() string {
	b, _ := f.MarshalJSON()
	return string(b)
}

// UnmarshalJSON decodes the control API's form strictly (unknown fields, trailing data, bad
// durations are errors) but does not range-check: use ParseFaults for both.
func (f *Faults) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w faultsJSON
	if err := dec.Decode(&w); err != nil {
		return &FaultError{Reason: "malformed JSON", Err: err}
	}
	if dec.More() {
		return &FaultError{Reason: "trailing data after the JSON object"}
	}
	out := Faults{
		LossPct: w.LossPct, DuplicatePct: w.DuplicatePct, ReorderPct: w.ReorderPct,
		ReorderWindow: w.ReorderWindow, RateBytesPerSec: w.RateBytesPerSec, RateBurstBytes: w.RateBurstBytes,
		RateQueueBytes: w.RateQueueBytes, Blackhole: w.Blackhole, MaxDatagram: w.MaxDatagram, CorruptPct: w.CorruptPct,
	}
	for _, d := range []struct {
		name string
		text string
		dst  *time.Duration
	}{{"delay", w.Delay, &out.Delay}, {"jitter", w.Jitter, &out.Jitter}, {"reorder_timeout", w.ReorderTimeout, &out.ReorderTimeout}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return &FaultError{Field: d.name, Reason: "want a Go duration such as \"20ms\"", Err: err}
		}
		*d.dst = v
	}
	*f = out
	return nil
}

// ParseFaults decodes one JSON fault spec (see Faults) and validates it. Every failure is a
// *FaultError wrapping ErrInvalidFaults; the control API answers it with HTTP 400.
func ParseFaults(data []byte) (Faults, error) {
	var f Faults
	if err := json.Unmarshal(data, &f); err != nil {
		var fe *FaultError
		if errors.As(err, &fe) {
			return Faults{}, fe
		}
		return Faults{}, &FaultError{Reason: "malformed JSON", Err: err}
	}
	if err := f.Validate(); err != nil {
		return Faults{}, err
	}
	return f, nil
}

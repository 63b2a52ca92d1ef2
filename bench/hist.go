// Package bench is the benchmark harness behind felix-bench (issue 10): workloads run
// against a real felix-broker process over the Go SDK, HDR latency histograms, open- and
// closed-loop drivers, message accounting, peers (NATS JetStream, Redis) started from the
// separate bench/peers module, capacity planning (the knee of the latency-throughput curve),
// Markdown/JSON-lines reports and charts. docs/benchmarks-harness.md is the user's guide.
package bench

import (
	"encoding/json"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency histogram bounds: 1 ns to 60 s at 3 significant digits (0.1 % resolution).
const (
	histLowest  = 1
	histHighest = int64(60 * time.Second)
	histSigFigs = 3
)

// Latency is an HDR histogram of durations in nanoseconds. It is not goroutine-safe: each
// worker records into its own and the driver merges them (Merge).
type Latency struct {
	h *hdrhistogram.Histogram
}

// NewLatency returns an empty histogram covering 1 ns .. 60 s.
func NewLatency() *Latency {
	return &Latency{h: hdrhistogram.New(histLowest, histHighest, histSigFigs)}
}

// Record adds one duration; values outside 1 ns .. 60 s are clamped to the range, so a
// stall is recorded as at least 60 s rather than lost.
func (l *Latency) Record(d time.Duration) {
	v := int64(d)
	if v < histLowest {
		v = histLowest
	}
	if v > histHighest {
		v = histHighest
	}
	_ = l.h.RecordValue(v) // in range by construction
}

// Merge adds every value of o into l.
func (l *Latency) Merge(o *Latency) {
	if o != nil {
		l.h.Merge(o.h)
	}
}

// Count is the number of recorded values.
func (l *Latency) Count() int64 { return l.h.TotalCount() }

// Summary returns the percentiles the reports print.
func (l *Latency) Summary() Percentiles {
	if l.h.TotalCount() == 0 {
		return Percentiles{}
	}
	return Percentiles{
		Count: l.h.TotalCount(),
		P50:   time.Duration(l.h.ValueAtQuantile(50)),
		P90:   time.Duration(l.h.ValueAtQuantile(90)),
		P99:   time.Duration(l.h.ValueAtQuantile(99)),
		P999:  time.Duration(l.h.ValueAtQuantile(99.9)),
		Max:   time.Duration(l.h.Max()),
	}
}

// Percentiles summarise a latency histogram. JSON gives microseconds (float) under
// p50_us, p90_us, p99_us, p999_us, max_us.
type Percentiles struct {
	Count                    int64
	P50, P90, P99, P999, Max time.Duration
}

type percentilesJSON struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func fromUS(f float64) time.Duration { return time.Duration(f * float64(time.Microsecond)) }

// MarshalJSON writes the percentiles in microseconds.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	return json.Marshal(percentilesJSON{p.Count, us(p.P50), us(p.P90), us(p.P99), us(p.P999), us(p.Max)})
}

// UnmarshalJSON reads what MarshalJSON writes (the peers binary writes the same shape).
func (p *Percentiles) UnmarshalJSON(b []byte) error {
	var j percentilesJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Percentiles{j.Count, fromUS(j.P50), fromUS(j.P90), fromUS(j.P99), fromUS(j.P999), fromUS(j.Max)}
	return nil
}

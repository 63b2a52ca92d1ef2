package main

import (
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// result mirrors felix/bench.Result's JSON (the fields felix-bench reads).
type result struct {
	System        string      `json:"system"`
	Shape         shape       `json:"shape"`
	Loop          string      `json:"loop"`
	Sent          int64       `json:"sent"`
	Delivered     int64       `json:"delivered"`
	Dropped       int64       `json:"dropped"`
	Refused       int64       `json:"refused"`
	ElapsedNs     int64       `json:"elapsed_ns"`
	RecordsPerSec float64     `json:"records_per_sec"`
	BytesPerSec   float64     `json:"bytes_per_sec"`
	Latency       percentiles `json:"latency"`
	LatencyFrom   string      `json:"latency_from"`
	Settings      any         `json:"peer_settings"`
	ClientCPU     float64     `json:"client_cpu_cores"`
	Warnings      []string    `json:"warnings,omitempty"`
}

type shape struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Payload  int    `json:"payload_bytes"`
	Fanout   int    `json:"fanout,omitempty"`
	Clients  int    `json:"clients,omitempty"`
	InFlight int    `json:"in_flight,omitempty"`
	Pubs     int    `json:"publishers,omitempty"`
}

type percentiles struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, int64(60*time.Second), 3) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	v := int64(d)
	if v < 1 {
		v = 1
	}
	if v > int64(60*time.Second) {
		v = int64(60 * time.Second)
	}
	_ = h.RecordValue(v)
}

func summarize(h *hdrhistogram.Histogram) percentiles {
	if h.TotalCount() == 0 {
		return percentiles{}
	}
	u := func(v int64) float64 { return float64(v) / 1e3 }
	return percentiles{h.TotalCount(), u(h.ValueAtQuantile(50)), u(h.ValueAtQuantile(90)), u(h.ValueAtQuantile(99)),
		u(h.ValueAtQuantile(99.9)), u(h.Max())}
}

// emit fills the rates and prints the result as one JSON line on stdout.
func emit(r result, records, bytes int64, elapsed time.Duration) error {
	r.ElapsedNs = int64(elapsed)
	if s := elapsed.Seconds(); s > 0 {
		r.RecordsPerSec = float64(records) / s
		r.BytesPerSec = float64(bytes) / s
		select {
		case cpu := <-windowCPU:
			r.ClientCPU = cpu.Seconds() / s
		case <-time.After(time.Second):
		}
	}
	if r.Loop == "" {
		r.Loop = "closed"
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(os.Stdout, string(b))
	return err
}

// window is the warm-up + measured phase of a run.
type window struct{ start, end time.Time }

// newWindow fixes the phases and starts marks: {"mark":"start"} and {"mark":"end"} on
// stdout at the measured phase's bounds (felix-bench samples the server's CPU there) and
// this process's CPU over it, handed to emit.
func newWindow(c common) window {
	s := time.Now().Add(c.warmup)
	w := window{s, s.Add(c.duration)}
	go marks(w)
	return w
}

// windowCPU carries the client's CPU time inside the measured phase (one window per run).
var windowCPU = make(chan time.Duration, 1)

func marks(w window) {
	time.Sleep(time.Until(w.start))
	c0 := selfCPU()
	fmt.Fprintln(os.Stdout, `{"mark":"start"}`)
	time.Sleep(time.Until(w.end))
	c1 := selfCPU()
	fmt.Fprintln(os.Stdout, `{"mark":"end"}`)
	windowCPU <- c1 - c0
}

// selfCPU is this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (w window) in(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

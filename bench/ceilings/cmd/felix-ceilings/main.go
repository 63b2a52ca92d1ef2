// Command felix-ceilings runs the QUIC ceilings Felix's network shapes are compared with
// (issue 22): minimal quic-go programs with the broker's TLS 1.3 and QUIC settings
// (quic.go), no broker code, on loopback. felix-bench builds it from this module (its own
// go.mod, beside bench/peers) and runs it in the same comparison as Felix and the peers.
//
//	felix-ceilings server --mode relay|echo --ready FILE
//	felix-ceilings relay  --addr A --fingerprint FP --size 1024 --batch 64
//	felix-ceilings echo   --addr A --fingerprint FP --clients 50 --inflight 16 --size 256
//
// relay is the pub/sub shape: a publisher connection writes records of --size bytes,
// --batch per stream write, to the relay server, which copies them onto a subscriber
// connection's stream (two QUIC hops, as publisher → broker → subscriber). echo is the
// cache shape: --clients connections with --inflight requests of --size bytes in flight
// on one stream each, echoed back by the server; with 1 × 1 it is the round-trip timer.
// Every record carries its sequence number and send time: a lost, duplicated or
// reordered record fails the run (exit 1) instead of printing a figure.
//
// A client prints {"mark":"start"} and {"mark":"end"} at its measured phase's bounds (the
// harness samples the server's CPU there), then one JSON line in felix-bench's Result
// shape, with the client's own CPU over the measured phase (client_cpu_cores).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: felix-ceilings server|relay|echo [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "server":
		err = serve(os.Args[2:])
	case "relay":
		err = relayClient(os.Args[2:])
	case "echo":
		err = echoClient(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "felix-ceilings:", err)
		os.Exit(1)
	}
}

// common holds the flags every client subcommand takes.
type common struct {
	warmup, duration, drain time.Duration
	size                    int
	name, addr, fp          string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.DurationVar(&c.warmup, "warmup", time.Second, "warm-up, excluded from the figures")
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "measured phase")
	fs.DurationVar(&c.drain, "drain", 20*time.Second, "how long answers may trail the last send")
	fs.IntVar(&c.size, "size", 1024, "record bytes (at least 16: sequence number and send time)")
	fs.StringVar(&c.name, "shape", "", "shape name to report")
	fs.StringVar(&c.addr, "addr", "", "server address (host:port, UDP)")
	fs.StringVar(&c.fp, "fingerprint", "", "server certificate SHA-256 (hex)")
}

func (c *common) check() error {
	if c.size < stampBytes {
		return fmt.Errorf("--size %d: want at least %d", c.size, stampBytes)
	}
	if c.addr == "" || c.fp == "" {
		return fmt.Errorf("--addr and --fingerprint are required")
	}
	return nil
}

// result mirrors felix/bench.Result's JSON (the fields felix-bench reads).
type result struct {
	System         string         `json:"system"`
	Shape          shape          `json:"shape"`
	Loop           string         `json:"loop"`
	Sent           int64          `json:"sent"`
	Delivered      int64          `json:"delivered"`
	ElapsedNs      int64          `json:"elapsed_ns"`
	RecordsPerSec  float64        `json:"records_per_sec"`
	BytesPerSec    float64        `json:"bytes_per_sec"`
	Latency        percentiles    `json:"latency"`
	LatencyFrom    string         `json:"latency_from"`
	ClientCPUCores float64        `json:"client_cpu_cores"`
	Settings       map[string]any `json:"peer_settings"`
}

type shape struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Payload  int    `json:"payload_bytes"`
	Batch    int    `json:"batch,omitempty"`
	Fanout   int    `json:"fanout,omitempty"`
	Clients  int    `json:"clients,omitempty"`
	InFlight int    `json:"in_flight,omitempty"`
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
	_ = h.RecordValue(min(max(int64(d), 1), int64(60*time.Second)))
}

func summarize(h *hdrhistogram.Histogram) percentiles {
	if h.TotalCount() == 0 {
		return percentiles{}
	}
	u := func(v int64) float64 { return float64(v) / 1e3 }
	return percentiles{h.TotalCount(), u(h.ValueAtQuantile(50)), u(h.ValueAtQuantile(90)), u(h.ValueAtQuantile(99)),
		u(h.ValueAtQuantile(99.9)), u(h.Max())}
}

var stdout sync.Mutex

// println writes one JSON line on stdout.
func println(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	stdout.Lock()
	defer stdout.Unlock()
	_, err = fmt.Fprintln(os.Stdout, string(b))
	return err
}

// window is the warm-up + measured phase of a run; marks prints its bounds and reads this
// process's CPU at them.
type window struct {
	start, end time.Time
	cpu        chan time.Duration // CPU time spent inside the window, once it ended
}

func newWindow(c common) *window {
	s := time.Now().Add(c.warmup)
	w := &window{start: s, end: s.Add(c.duration), cpu: make(chan time.Duration, 1)}
	go w.marks()
	return w
}

func (w *window) in(t time.Time) bool { return !t.Before(w.start) && t.Before(w.end) }

func (w *window) marks() {
	time.Sleep(time.Until(w.start))
	c0 := selfCPU()
	_ = println(map[string]string{"mark": "start"})
	time.Sleep(time.Until(w.end))
	c1 := selfCPU()
	_ = println(map[string]string{"mark": "end"})
	w.cpu <- c1 - c0
}

// selfCPU is this process's user + system CPU time.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// emit fills the rates and the client's CPU and prints the result line.
func emit(r result, w *window, records, bytes int64, elapsed time.Duration) error {
	r.ElapsedNs = int64(elapsed)
	if s := elapsed.Seconds(); s > 0 {
		r.RecordsPerSec = float64(records) / s
		r.BytesPerSec = float64(bytes) / s
		select {
		case cpu := <-w.cpu:
			r.ClientCPUCores = cpu.Seconds() / s
		case <-time.After(time.Until(w.end) + time.Second):
		}
	}
	r.Loop = "closed"
	return println(r)
}

package bench

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// Kind is the workload family of a Shape.
type Kind string

// Workload families (issue 10, "Deliver" 1).
const (
	// KindPubSub publishes batches to a durable stream and counts deliveries at Fanout
	// subscribers; latency is publish-intended-time to delivery (payloads of 8 bytes or
	// more carry the timestamp), else the batch's ack latency. Batch 1 publishes
	// synchronously: each record's ack arrives before the next record is sent.
	KindPubSub Kind = "pubsub"
	// KindDurable runs Publishers synchronous publishers (one record in flight each,
	// per-message ack) against a broker in the shape's FsyncMode; latency is the ack. With
	// InFlight > 1 each publisher batches instead: InFlight records in flight, batches of
	// up to Batch records sealed after 1 ms of linger, acked per batch.
	KindDurable Kind = "durable"
	// KindCache runs Clients connections with InFlight requests each, GetRatio gets and
	// the rest puts of Payload-byte values over a key space of Keys.
	KindCache Kind = "cache"
	// KindCounter is KindCache with counter_add only; the counters' sum is checked against
	// the acknowledged adds at the end.
	KindCounter Kind = "counter"
	// KindGroup preloads records and consumes them with Clients consumer-group consumers
	// (poll up to Batch, ack them); latency is one poll+ack round.
	KindGroup Kind = "group"
	// KindReplay preloads records and reads them from the earliest offset with one
	// subscriber; latency is not measured (throughput only).
	KindReplay Kind = "replay"
)

// Shape is one workload with its fixed parameters. Settings (duration, rate) vary per run.
type Shape struct {
	Name       string  `json:"name"`
	Kind       Kind    `json:"kind"`
	Payload    int     `json:"payload_bytes"`
	Batch      int     `json:"batch"`                // records per publish batch / per poll
	Fanout     int     `json:"fanout,omitempty"`     // subscribers (pubsub)
	Publishers int     `json:"publishers,omitempty"` // pubsub, durable
	Clients    int     `json:"clients,omitempty"`    // cache, counter, group
	InFlight   int     `json:"in_flight,omitempty"`  // requests in flight per client
	GetRatio   float64 `json:"get_ratio,omitempty"`  // cache: share of gets
	Keys       int     `json:"keys,omitempty"`       // cache, counter key space
	FsyncMode  string  `json:"fsync_mode"`           // broker FELIX_DURABLE_FSYNC_MODE
	Preload    int     `json:"preload,omitempty"`    // group, replay: records at full size
	Note       string  `json:"note,omitempty"`       // what the shape stands for
}

// ErrUnknownShape is returned by ShapeByName for a name not in Shapes.
var ErrUnknownShape = errors.New("bench: unknown shape")

// Shapes returns every built-in shape by name. Pub/sub shapes run on durable streams with
// periodic fsync (acked on commit to the file, fsynced every 250 ms); durable-* shapes
// name their fsync mode.
func Shapes() map[string]Shape {
	m := map[string]Shape{}
	add := func(s Shape) { m[s.Name] = s }
	add(Shape{Name: "pubsub-latency-256", Kind: KindPubSub, Payload: 256, Batch: 1, Fanout: 1, Publishers: 1, FsyncMode: "periodic",
		Note: "batch 1, synchronous publisher (per-message ack), fanout 1"})
	for _, p := range []struct {
		n    string
		size int
	}{{"0", 0}, {"256", 256}, {"1k", 1024}, {"4k", 4096}, {"16k", 16384}} {
		add(Shape{Name: "pubsub-" + p.n, Kind: KindPubSub, Payload: p.size, Batch: 64, Fanout: 1, Publishers: 1, FsyncMode: "periodic",
			Note: "batch 64, fanout 1"})
	}
	add(Shape{Name: "pubsub-1k-fanout10", Kind: KindPubSub, Payload: 1024, Batch: 64, Fanout: 10, Publishers: 1, FsyncMode: "periodic",
		Note: "batch 64, fanout 10"})
	for _, mode := range []string{"on_commit", "periodic", "none"} {
		add(Shape{Name: "durable-1k-" + mode, Kind: KindDurable, Payload: 1024, Batch: 1, Publishers: 8, FsyncMode: mode,
			Note: "8 synchronous publishers, per-message ack, fsync " + mode})
	}
	add(Shape{Name: "durable-1k-on_commit-b64", Kind: KindDurable, Payload: 1024, Batch: 64, Publishers: 8, InFlight: 64, FsyncMode: "on_commit",
		Note: "8 batching publishers, 64 records in flight each, batches ≤ 64 with 1 ms linger, fsync on_commit"})
	add(Shape{Name: "cache-256-c50", Kind: KindCache, Payload: 256, Clients: 50, InFlight: 1, GetRatio: 0.5, Keys: 10000, FsyncMode: "periodic",
		Note: "50 clients, 1 in flight each, 50 % gets"})
	add(Shape{Name: "cache-256-c50-p16", Kind: KindCache, Payload: 256, Clients: 50, InFlight: 16, GetRatio: 0.5, Keys: 10000, FsyncMode: "periodic",
		Note: "50 clients, 16 in flight each, 50 % gets"})
	add(Shape{Name: "cache-256-read90", Kind: KindCache, Payload: 256, Clients: 16, InFlight: 1, GetRatio: 0.9, Keys: 10000, FsyncMode: "periodic",
		Note: "16 clients, 90 % gets"})
	add(Shape{Name: "counter-c16", Kind: KindCounter, Payload: 8, Clients: 16, InFlight: 1, Keys: 1000, FsyncMode: "periodic",
		Note: "16 clients, counter_add over 1000 keys"})
	add(Shape{Name: "group-1k", Kind: KindGroup, Payload: 1024, Batch: 64, Clients: 4, FsyncMode: "periodic", Preload: 100000,
		Note: "4 consumers, poll 64 + ack"})
	add(Shape{Name: "replay-1k", Kind: KindReplay, Payload: 1024, Batch: 64, FsyncMode: "periodic", Preload: 200000,
		Note: "read from earliest, 1 subscriber"})
	return m
}

// ShapeNames returns the built-in shape names, sorted.
func ShapeNames() []string {
	var out []string
	for n := range Shapes() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ShapeByName returns the named built-in shape. The alias "pubsub-1k" of the plan command
// is a built-in name. Errors: ErrUnknownShape listing the names.
func ShapeByName(name string) (Shape, error) {
	s, ok := Shapes()[name]
	if !ok {
		return Shape{}, fmt.Errorf("%w %q (have %v)", ErrUnknownShape, name, ShapeNames())
	}
	return s, nil
}

// Settings size one run. Durations are wall-clock; Rate is total records (or operations)
// per second offered across all publishers/clients.
type Settings struct {
	// Warmup runs the workload before measuring; its latencies and counts are excluded.
	Warmup time.Duration `json:"warmup_ns"`
	// Duration is the measured phase.
	Duration time.Duration `json:"duration_ns"`
	// Rate > 0 is open loop at that many records/s, latency from each record's intended
	// send time; 0 is closed loop (as fast as the flow control allows).
	Rate float64 `json:"rate"`
	// Scale divides Preload (group, replay) and Keys: 1 = full size, the go test size uses more.
	Scale int `json:"scale"`
	// MinBytes is the QUIC send window the run must move more than (0 = QUICSendWindow).
	MinBytes int64 `json:"min_bytes"`
	// RefuseSmall makes a run below MinBytes an error (ErrTooSmall) instead of a warning.
	RefuseSmall bool `json:"refuse_small"`
	// Drain bounds how long after the last send deliveries may still arrive (0 = 20 s).
	Drain time.Duration `json:"drain_ns"`
}

// QUICSendWindow is the broker's per-stream flow-control window ceiling
// (FELIX_CACHE_STREAM_RECV_WINDOW default, 16 MiB): a run moving fewer bytes may measure
// buffering rather than the steady state.
const QUICSendWindow = 16 << 20

func (s *Settings) defaults() {
	if s.Duration <= 0 {
		s.Duration = 5 * time.Second
	}
	if s.Warmup < 0 {
		s.Warmup = 0
	}
	if s.Scale <= 0 {
		s.Scale = 1
	}
	if s.MinBytes == 0 {
		s.MinBytes = QUICSendWindow
	}
	if s.Drain <= 0 {
		s.Drain = 20 * time.Second
	}
}

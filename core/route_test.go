package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
)

// routed resolves req.Shard with Engine.Route as a broker does, for tests
// that publish with a routing key or by round-robin.
func routed(t testing.TB, e *Engine, req *PublishRequest, key []byte) *PublishRequest {
	t.Helper()
	shard, err := e.Route(req.Stream, key, req.ProducerID, req.Sequence)
	if err != nil {
		t.Errorf("Route(%s): %v", req.Stream, err) // Errorf: callers run on goroutines too
	}
	req.Shard = shard
	return req
}

// refJump is jump consistent hashing as published (Lamping and Veach 2014,
// figure 1), written independently of JumpHash.
func refJump(key uint64, buckets int) int {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// refRoute is the routing Engine.Publish did before Route existed, from the
// standard library's FNV-1a: key → hash mod n or jump hash; else idempotent
// key → FNV-1a(id ‖ big-endian seq) mod n; else the stream's counter mod n.
func refRoute(spec StreamSpec, rr *uint64, key []byte, producer string, seq uint64) int {
	n := spec.Shards
	switch {
	case key != nil:
		h := fnv.New64a()
		h.Write(key)
		if spec.Routing == RoutingJumpHash {
			return refJump(h.Sum64(), n)
		}
		return int(h.Sum64() % uint64(n))
	case producer != "":
		if n <= 1 {
			return 0
		}
		h := fnv.New64a()
		h.Write([]byte(producer))
		h.Write(binary.BigEndian.AppendUint64(nil, seq))
		return int(h.Sum64() % uint64(n))
	default:
		*rr++
		return int((*rr - 1) % uint64(n))
	}
}

// TestRouteMatchesPublishRouting: for every stream kind and routing, Route
// gives the shard the engine's publish routing always gave (refRoute), for
// many keys, producers and sequences, with round-robin publishes interleaved
// (each stream keeps its own counter, which keyed and idempotent routes do
// not advance); and a publish to the routed shard lands there.
func TestRouteMatchesPublishRouting(t *testing.T) {
	h := newHarness(t, 3, newFakeStore(), nil)
	var specs []StreamSpec
	for _, shards := range []int{1, 2, 5, 8, 64} {
		for _, routing := range []Routing{RoutingModulo, RoutingJumpHash} {
			for _, durable := range []bool{false, true} {
				name := StreamName{Tenant: "t", Namespace: "n", Stream: fmt.Sprintf("s%d-%v-%v", shards, routing, durable)}
				specs = append(specs, StreamSpec{Name: name, Shards: shards, Routing: routing, Durable: durable})
			}
		}
	}
	for _, spec := range specs {
		h.create(spec)
	}
	cases := []struct {
		name     string
		key      func(i int) []byte
		producer func(i int) string
	}{
		{"keyed", func(i int) []byte { return fmt.Appendf(nil, "customer-%d", i) }, func(int) string { return "" }},
		{"empty key", func(int) []byte { return []byte{} }, func(int) string { return "" }},
		{"keyed idempotent (key wins)", func(i int) []byte { return fmt.Appendf(nil, "k%d", i*7) }, func(i int) string { return fmt.Sprint("p", i%3) }},
		{"idempotent unkeyed", func(int) []byte { return nil }, func(i int) string { return fmt.Sprint("producer-", i%5) }},
		{"round-robin", func(int) []byte { return nil }, func(int) string { return "" }},
	}
	for _, spec := range specs {
		var rr uint64
		for _, c := range cases {
			for i := range 300 {
				key, producer, seq := c.key(i), c.producer(i), uint64(i)*0x9e3779b97f4a7c15
				got, err := h.e.Route(spec.Name, key, producer, seq)
				want := refRoute(spec, &rr, key, producer, seq)
				if err != nil || got != want {
					t.Fatalf("%s, %s #%d: Route = %d (%v), want %d", spec.Name, c.name, i, got, err, want)
				}
				if i%50 == 0 {
					a := h.publish(&PublishRequest{Stream: spec.Name, Shard: got, Payloads: payloads("x", 1), ProducerID: producer, Sequence: seq})
					h.step(3)
					if a.err != nil || a.res.Shard != got {
						t.Fatalf("%s, %s #%d: publish to shard %d answered %+v, %v", spec.Name, c.name, i, got, a.res, a.err)
					}
				}
			}
		}
	}
}

func TestRouteErrors(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	if _, err := h.e.Route(testStream, nil, "", 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Route of a missing stream: %v", err)
	}
	h.create(StreamSpec{Name: testStream, Shards: 2})
	for _, shard := range []int{-1, 2} {
		if err := h.e.Publish(&PublishRequest{Stream: testStream, Shard: shard, Payloads: payloads("x", 1)}, nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("publish to shard %d of 2: %v", shard, err)
		}
	}
	h.close()
	if _, err := h.e.Route(testStream, nil, "", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("Route after Close: %v", err)
	}
}

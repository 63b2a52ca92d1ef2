package broker

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"

	"github.com/VictoriaMetrics/metrics"

	"felix/core"
	"felix/seglog"
)

// serverMetrics are the broker's own counters (the engine registers its own in the same set).
type serverMetrics struct {
	connections     *metrics.Counter
	streams         *metrics.Counter
	protocolErrors  *metrics.Counter
	errorsSent      *metrics.Counter
	authFailures    *metrics.Counter
	publishes       *metrics.Counter
	publishErrors   *metrics.Counter
	subscriptions   *metrics.Counter
	eventFrames     *metrics.Counter
	slowSubscribers *metrics.Counter
	unknownErrors   *metrics.Counter // errors errorCode could not classify (logged)
	authTimeouts    *metrics.Counter // connections closed by the auth deadline
	authEvictions   *metrics.Counter // unauthenticated connections closed for a new one at the limit
}

func newServerMetrics(set *metrics.Set) serverMetrics {
	return serverMetrics{
		connections:     set.NewCounter("felix_broker_connections_total"),
		streams:         set.NewCounter("felix_broker_streams_total"),
		protocolErrors:  set.NewCounter("felix_broker_protocol_errors_total"),
		errorsSent:      set.NewCounter("felix_broker_error_answers_total"),
		authFailures:    set.NewCounter("felix_broker_auth_failures_total"),
		publishes:       set.NewCounter("felix_broker_publish_batches_total"),
		publishErrors:   set.NewCounter("felix_broker_publish_errors_total"),
		subscriptions:   set.NewCounter("felix_broker_subscriptions_total"),
		eventFrames:     set.NewCounter("felix_broker_event_frames_total"),
		slowSubscribers: set.NewCounter("felix_broker_slow_subscribers_total"),
		unknownErrors:   set.NewCounter("felix_broker_unclassified_errors_total"),
		authTimeouts:    set.NewCounter("felix_broker_auth_timeouts_total"),
		authEvictions:   set.NewCounter("felix_broker_auth_evictions_total"),
	}
}

// registerOps adds the operations endpoints (spec/config.md §7):
//
//	GET /live                200 "ok" for the whole process life, also while draining
//	GET /ready               200 "ok" once serving (then a "damaged: ..." line per damaged shard);
//	                         503 "draining" after SIGTERM (and before ready)
//	GET /metrics             Prometheus text: broker, engine and Go runtime metrics
//	GET /replication/halted  JSON list of halted replicas (replicate.go): [] on a single node
//	/debug/pprof/...         Go profiler, only with FELIX_PPROF (admin token: admin_pprof.go)
func (s *Server) registerOps(mux *http.ServeMux) {
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) {
		if !s.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			if s.draining.Load() {
				io.WriteString(w, "draining\n")
			} else {
				io.WriteString(w, "starting\n")
			}
			return
		}
		io.WriteString(w, "ok\n")
		writeDamaged(w, s.engine.Damaged())
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		s.metrics.WritePrometheus(w)
		metrics.WriteProcessMetrics(w)
	})
	mux.HandleFunc("GET /replication/halted", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.repl.haltedList()) // replicate.go
	})
	s.registerPprof(mux) // admin_pprof.go: only with FELIX_PPROF
}

// writeDamaged is /ready's detail (issue 23): one line per stream or cache shard whose log
// holds damage, "damaged: stream|cache <t/ns/name> shard <n>: <kind> in segment <file> at
// byte <pos> (offset <o> unreadable)". The broker stays ready: it serves every other shard, and the
// damaged one answers storage_failed.
func writeDamaged(w io.Writer, damaged []*core.DamageError) {
	for _, d := range damaged {
		fmt.Fprintf(w, "damaged: %s: %s in segment %s at byte %d (offset %d unreadable)\n",
			d.Where(), d.Damage, d.Segment, d.Position, d.Offset)
	}
}

// ShardDamage is one damaged shard of a stream as GET .../streams/{s} shows it in
// "damaged" (issue 23; `felix stream describe`): the shard, the segment file, the byte
// position, the corruption kind and the first offset the damage makes unreadable.
type ShardDamage struct {
	Shard    int    `json:"shard"`
	Segment  string `json:"segment"`
	AtByte   int64  `json:"at_byte"`
	Kind     string `json:"kind"`
	Offset   uint64 `json:"offset"`
	Readable bool   `json:"readable"` // false: the shard's log did not open (every request answers storage_failed)
}

// describedStream is a stream's catalog entry with its damaged shards.
type describedStream struct {
	Stream
	Damaged []ShardDamage `json:"damaged,omitempty"`
}

// streamDamage is Admin.Damage: the engine's damaged shards of one stream.
func (s *Server) streamDamage(tenant, namespace, stream string) []ShardDamage {
	if s.engine == nil { // not open yet
		return nil
	}
	var out []ShardDamage
	for _, d := range s.engine.Damaged() {
		if d.Kind != core.ShardStream || d.Stream != streamName(tenant, namespace, stream) {
			continue
		}
		out = append(out, ShardDamage{Shard: d.Shard, Segment: d.Segment, AtByte: d.Position, Kind: d.Damage.String(),
			Offset: d.Offset, Readable: !d.Unservable})
	}
	return out
}

// storageFailedText is the text of a storage_failed answer (errcodes.go): never the
// server's file path (issue 23; the broker's log line names it). A *core.DamageError or
// *core.WriteError speaks for itself (stream or cache, shard, segment or errno); an
// error wrapping a *seglog.StorageError or *seglog.CorruptionError is reduced to the
// operation and errno, or the kind, segment and byte; anything else keeps its text.
func storageFailedText(err error) string {
	var (
		de *core.DamageError
		we *core.WriteError
		se *seglog.StorageError
		ce *seglog.CorruptionError
	)
	switch {
	case errors.As(err, &de), errors.As(err, &we):
		return err.Error()
	case errors.As(err, &ce):
		return fmt.Sprintf("storage failed: log damaged: %s in segment %s at byte %d",
			ce.Kind, seglog.SegmentFileName(uint64(max(ce.Segment, 0))), ce.Position)
	case errors.As(err, &se):
		var errno syscall.Errno
		text := "I/O failure"
		if errors.As(se.Err, &errno) {
			text = errno.Error()
		}
		return fmt.Sprintf("storage failed: %s: %s", se.Op, text)
	}
	return err.Error()
}

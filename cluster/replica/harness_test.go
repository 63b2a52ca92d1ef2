package replica

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

// Shared parsing for the datadriven files of this package.

// kindByName maps every FLXI kind's name ("ReplicateRecords", ...) to the kind.
var kindByName = func() map[string]proto.Kind {
	m := map[string]proto.Kind{}
	for k := proto.Kind(0); k.Known(); k++ {
		m[k.String()] = k
	}
	return m
}()

// logByName maps "stream", "cache", ... to the log.
var logByName = func() map[string]proto.ReplicaLog {
	m := map[string]proto.ReplicaLog{}
	for l := proto.LogStream; l <= proto.LogLast; l++ {
		m[l.String()] = l
	}
	return m
}()

// args reads a case's key=value arguments.
type args struct {
	t *testing.T
	d *datadriven.TestData
}

func (a args) has(key string) bool { return a.d.HasArg(key) }

func (a args) str(key, def string) string {
	if v, ok := a.d.Arg(key); ok && len(v.Vals) > 0 {
		return v.Vals[0]
	}
	return def
}

func (a args) list(key string) []string {
	if v, ok := a.d.Arg(key); ok {
		return v.Vals
	}
	return nil
}

func (a args) u64(key string, def uint64) uint64 {
	s := a.str(key, "")
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.d.Pos, key, s, err)
	}
	return n
}

// epochs parses (1@0, 3@5) into a history.
func (a args) epochs(key string) []Epoch {
	var h []Epoch
	for _, v := range a.list(key) {
		g, s, found := strings.Cut(v, "@")
		gen, err1 := strconv.ParseUint(g, 10, 64)
		start, err2 := strconv.ParseUint(s, 10, 64)
		if !found || err1 != nil || err2 != nil {
			a.t.Fatalf("%s: bad epoch %q (want G@OFFSET)", a.d.Pos, v)
		}
		h = append(h, Epoch{Generation: gen, StartOffset: start})
	}
	return h
}

func fmtEpochs(h []Epoch) string {
	parts := make([]string, len(h))
	for i, e := range h {
		parts[i] = fmt.Sprintf("%d@%d", e.Generation, e.StartOffset)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func fmtPayloads(p [][]byte) string {
	parts := make([]string, len(p))
	for i, b := range p {
		parts[i] = string(b)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// fmtMessage renders an answer in one line.
func fmtMessage(m proto.InternalMessage) string {
	switch a := m.(type) {
	case *proto.ReplicateOk:
		return fmt.Sprintf("ReplicateOk{durable_offset=%d}", a.DurableOffset)
	case *proto.ReplicateError:
		if a.Code == proto.InternalLogGap {
			return fmt.Sprintf("ReplicateError{%s expected_offset=%d}", codeName(a.Code), a.ExpectedOffset)
		}
		return fmt.Sprintf("ReplicateError{%s}", codeName(a.Code))
	case *proto.FenceOk:
		return fmt.Sprintf("FenceOk{log=%v generation=%d durable_offset=%d}", a.Log, a.Generation, a.DurableOffset)
	case *proto.UnsupportedKind:
		return fmt.Sprintf("UnsupportedKind{%v}", a.RefusedKind)
	case nil:
		return "none"
	}
	return fmt.Sprintf("%T", m)
}

func codeName(c proto.InternalCode) string {
	names := map[proto.InternalCode]string{
		proto.InternalStaleRoute: "StaleRoute", proto.InternalUnavailable: "Unavailable",
		proto.InternalUnauthorized: "Unauthorized", proto.InternalOverload: "Overload",
		proto.InternalProtocolVersion: "ProtocolVersion", proto.InternalMalformed: "Malformed",
		proto.InternalStorageFailed: "StorageFailed", proto.InternalLogGap: "LogGap",
		proto.InternalLogConflict: "LogConflict", proto.InternalFencedEpoch: "FencedEpoch",
		proto.InternalUnsupportedKind: "UnsupportedKind",
	}
	if n, ok := names[c]; ok {
		return n
	}
	return fmt.Sprintf("code %d", c)
}

// memReader is a Reader over records held in memory from offset start.
type memReader struct {
	start uint64
	recs  [][]byte
	fail  bool
}

func (r *memReader) ReadRecords(from, to uint64) ([][]byte, error) {
	if r.fail {
		return nil, fmt.Errorf("injected read error")
	}
	if from < r.start || to > r.start+uint64(len(r.recs)) || from > to {
		return nil, fmt.Errorf("read [%d, %d) outside [%d, %d)", from, to, r.start, r.start+uint64(len(r.recs)))
	}
	return r.recs[from-r.start : to-r.start], nil
}

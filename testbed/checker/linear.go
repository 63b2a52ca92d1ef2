package checker

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"felix/testbed/history"
)

// LinearOptions configures CheckLinearizable.
type LinearOptions struct {
	// Timeout bounds the search per object (0: none). An object whose
	// search times out is listed in LinearResult.Unknown, not as a finding.
	Timeout time.Duration
	// VisualizationPath, when not empty, is where porcupine's HTML
	// visualization of every non-linearizable object is written (one file,
	// one partition per object) when any is found.
	VisualizationPath string
}

// LinearResult is what CheckLinearizable found.
type LinearResult struct {
	Findings      []Finding // one per non-linearizable object, sorted
	Objects       int       // objects checked
	Unknown       []string  // objects whose search timed out
	Visualization string    // the file written, or ""
}

// linObject is one independently checked object: a partition.
type linObject struct {
	anomaly   Anomaly
	name      string // unique: "cache c key \"k\"", "stream s shard 0 offset 3", ...
	display   string // Finding.Object: the name without the stream shard
	stream    string
	shard     int
	ops       []porcupine.Operation
	positions []int // position in h.Ops of each entry of ops
}

// CheckLinearizable checks, with porcupine, that every object of h is
// linearizable on its own: each cache key (values are byte strings; a miss
// is distinct from an empty value), each counter (an absent counter is
// distinct from 0; add answers the new sum), each catalog entry (create,
// delete, get), and each stream offset a stream-read read (the ok publish
// acked there and any info publish whose payload was read there are its
// writes). Fail operations are left out (they did nothing); info writes are
// open-ended (they may take effect at any time after their invocation, or
// never); info reads are left out. A finding names the object and the
// operations the search got stuck on. Errors: only writing the
// visualization; the findings are returned with the error.
func CheckLinearizable(h *history.History, opts LinearOptions) (LinearResult, error) {
	objects := linObjects(h)
	res := LinearResult{Objects: len(objects)}
	model := linModel()
	var failing []*linObject
	for _, obj := range objects {
		switch porcupine.CheckOperationsTimeout(model, obj.ops, opts.Timeout) {
		case porcupine.Illegal:
			failing = append(failing, obj)
		case porcupine.Unknown:
			res.Unknown = append(res.Unknown, obj.name)
		}
	}
	if len(failing) == 0 {
		return res, nil
	}
	return explainFailures(h, failing, res, opts)
}

// explainFailures re-checks the failing objects verbosely, names the
// operations outside every partial linearization and writes the
// visualization.
func explainFailures(h *history.History, failing []*linObject, res LinearResult, opts LinearOptions) (LinearResult, error) {
	parts := make([][]porcupine.Operation, len(failing))
	var flat []porcupine.Operation
	for i, obj := range failing {
		parts[i] = obj.ops
		flat = append(flat, obj.ops...)
	}
	model := linModel()
	model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return parts }
	_, info := porcupine.CheckOperationsVerbose(model, flat, opts.Timeout)
	partials := info.PartialLinearizations()
	var err error
	if opts.VisualizationPath != "" {
		if err = porcupine.VisualizePath(model, info, opts.VisualizationPath); err == nil {
			res.Visualization = opts.VisualizationPath
		} else {
			err = fmt.Errorf("checker: writing the linearizability visualization: %w", err)
		}
	}
	for i, obj := range failing {
		var placed [][]int
		if i < len(partials) {
			placed = partials[i]
		}
		stuck, count := unplaced(obj, placed)
		res.Findings = append(res.Findings, Finding{
			Anomaly: obj.anomaly, Stream: obj.stream, Shard: obj.shard, Object: obj.display,
			Ops: opIndices(h, stuck), Visualization: res.Visualization,
			Detail: fmt.Sprintf("no linearization of its %d operations; %d could not be placed, "+
				"the search got stuck first at the ops listed", len(obj.ops), count),
		})
	}
	sortFindings(res.Findings)
	return res, err
}

// unplaced returns the positions of obj's operations that no partial
// linearization could place and that were invoked before the first of them
// returned: the operations the search got stuck on (all of obj's operations
// when every one is placed somewhere, which a timed-out search can leave).
// The count is of every unplaced operation.
func unplaced(obj *linObject, partials [][]int) ([]int, int) {
	in := map[int]bool{}
	for _, p := range partials {
		for _, id := range p {
			in[id] = true
		}
	}
	var ids []int
	firstReturn := int64(math.MaxInt64)
	for id := range obj.ops {
		if !in[id] {
			ids = append(ids, id)
			firstReturn = min(firstReturn, obj.ops[id].Return)
		}
	}
	if len(ids) == 0 {
		return append([]int(nil), obj.positions...), 0
	}
	var stuck []int
	for _, id := range ids {
		if obj.ops[id].Call <= firstReturn {
			stuck = append(stuck, obj.positions[id])
		}
	}
	return stuck, len(ids)
}

// linBuilder gathers the objects of one history.
type linBuilder struct {
	h       *history.History
	objects map[string]*linObject
	open    int64 // a Return time after every operation: "never returned"
}

// linObjects splits h into its objects, sorted by name.
func linObjects(h *history.History) []*linObject {
	b := &linBuilder{h: h, objects: map[string]*linObject{}}
	for i := range h.Ops {
		b.open = max(b.open, h.Ops[i].CompleteNS)
	}
	if b.open < math.MaxInt64 {
		b.open++
	}
	for pos := range h.Ops {
		b.addOp(pos)
	}
	b.addStreamWrites()
	out := make([]*linObject, 0, len(b.objects))
	for _, obj := range b.objects {
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// object returns (creating) the object called name.
func (b *linBuilder) object(name string, a Anomaly, stream string, shard int) *linObject {
	obj := b.objects[name]
	if obj == nil {
		obj = &linObject{anomaly: a, name: name, display: name, stream: stream, shard: shard}
		if stream != "" {
			obj.display = name[strings.LastIndex(name, " offset ")+1:]
		}
		b.objects[name] = obj
	}
	return obj
}

// add appends one operation at position pos with the given input and output.
func (obj *linObject) add(b *linBuilder, pos int, in linInput, out linOutput) {
	op := &b.h.Ops[pos]
	ret := op.CompleteNS
	if !out.known {
		ret = b.open
	}
	in.index = op.Index
	obj.ops = append(obj.ops, porcupine.Operation{ClientId: op.Process, Input: in, Call: op.InvokeNS,
		Output: out, Return: ret, Metadata: op.Index})
	obj.positions = append(obj.positions, pos)
}

// isRead reports whether kind only reads its object.
func isRead(kind history.Kind) bool {
	switch kind {
	case history.KindCacheGet, history.KindCounterGet, history.KindCatalogGet, history.KindStreamRead:
		return true
	}
	return false
}

// addOp adds the operation at pos to its object, if it belongs to one.
func (b *linBuilder) addOp(pos int) {
	op := &b.h.Ops[pos]
	if op.Outcome == history.Fail || (op.Outcome == history.Info && isRead(op.Kind)) {
		return
	}
	in := linInput{kind: op.Kind, value: string(op.In.Value), delta: op.In.Delta}
	out := linOutput{known: op.Outcome == history.OK, found: op.Out.Found, value: string(op.Out.Value),
		valueKnown: op.Out.Value != nil || op.Kind == history.KindCacheGet, sum: op.Out.Sum}
	var obj *linObject
	switch op.Kind {
	case history.KindCachePut, history.KindCacheGet, history.KindCacheDelete:
		obj = b.object(fmt.Sprintf("cache %s key %q", op.In.Cache, op.In.Key), NonLinearCache, "", 0)
	case history.KindCounterAdd, history.KindCounterGet:
		obj = b.object(fmt.Sprintf("counter %s key %q", op.In.Cache, op.In.Key), NonLinearCounter, "", 0)
	case history.KindCatalogCreate, history.KindCatalogDelete, history.KindCatalogGet:
		in.value = op.In.Spec
		out.value, out.valueKnown = op.Out.Spec, op.Out.Spec != ""
		obj = b.object(fmt.Sprintf("catalog %q", op.In.Entry), NonLinearCatalog, "", 0)
	case history.KindStreamRead:
		if op.Out.Found && len(op.Out.Records) > 0 {
			out.value, out.valueKnown = string(op.Out.Records[0].Payload), true
		}
		obj = b.object(streamObjectName(op.In.Stream, op.In.Shard, op.In.Offset), NonLinearStream, op.In.Stream, op.In.Shard)
	default:
		return
	}
	obj.add(b, pos, in, out)
}

func streamObjectName(stream string, shard int, offset uint64) string {
	return fmt.Sprintf("stream %s shard %d offset %d", stream, shard, offset)
}

// addStreamWrites adds to every stream-offset object its writes: the ok
// publish acked at that offset and each info publish of a payload some read
// found there.
func (b *linBuilder) addStreamWrites() {
	ix := newStreamIndex(b.h)
	for at, sightings := range ix.atOffset {
		obj := b.objects[streamObjectName(at.stream, at.shard, at.offset)]
		if obj == nil {
			continue
		}
		done := map[int]bool{}
		for _, s := range sightings {
			pubs := []int{s.pos}
			if s.read {
				pubs = ix.publishes[payloadKey{at.stream, s.payload}]
			}
			for _, pos := range pubs {
				op := &b.h.Ops[pos]
				if done[pos] || op.Outcome == history.Fail || (s.read && op.Outcome != history.Info) {
					continue
				}
				done[pos] = true
				obj.add(b, pos, linInput{kind: history.KindPublish, value: s.payload},
					linOutput{known: op.Outcome == history.OK})
			}
		}
	}
}

package placement

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

// The datadriven files of testdata/: each case names the seed's row or the known gap it
// shows ("# seed: ..." / "# gap: ..."). One script state per file.

type script struct {
	t      *testing.T
	det    *Detector
	shard  Shard
	cfg    Config
	round  *FenceRound
	fcfg   FenceConfig
	lease  LeaseConfig
	held   Lease
	reads  *ReadConfirmer
	rounds []RoundID
}

func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &script{t: t}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return s.run(args{t: t, d: d})
		})
	})
}

func (s *script) run(a args) string {
	handlers := map[string]func(args) string{
		"detector": s.detector, "heartbeat": s.heartbeat, "state": s.state,
		"shard": s.newShard, "replica": s.replica, "report": s.report, "entry": s.entry,
		"refusal": s.refusal, "decide": s.decide,
		"fence": s.fence, "answer": s.answer, "refuse": s.refuse,
		"lease": s.leaseCmd, "grant": s.grant, "at": s.leaseAt,
		"reads": s.readsCmd, "take": s.take, "start-round": s.startRound, "round-answer": s.roundAnswer,
		"round-failed": s.roundFailed, "mark": s.mark,
	}
	h, ok := handlers[a.d.Cmd]
	if !ok {
		a.t.Fatalf("%s: unknown command %q", a.d.Pos, a.d.Cmd)
	}
	return h(a)
}

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

// nanos reads a duration since the start ("1500ms") as nanoseconds.
func (a args) nanos(key string, def time.Duration) int64 {
	s := a.str(key, "")
	if s == "" {
		return int64(def)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		a.t.Fatalf("%s: %s=%q: %v", a.d.Pos, key, s, err)
	}
	return int64(d)
}

// position reads DURABLE@GENERATION.
func (a args) position(key string) Position {
	return parsePosition(a, a.str(key, "0@0"))
}

func parsePosition(a args, s string) Position {
	d, g, found := strings.Cut(s, "@")
	durable, err1 := strconv.ParseUint(d, 10, 64)
	gen, err2 := strconv.ParseUint(g, 10, 64)
	if !found || err1 != nil || err2 != nil {
		a.t.Fatalf("%s: bad position %q (want DURABLE@GENERATION)", a.d.Pos, s)
	}
	return Position{LastGeneration: gen, Durable: durable}
}

// without reads the switches that turn a gap's fix off.
func (a args) without() gaps {
	var g gaps
	for _, w := range a.list("without") {
		switch w {
		case "furthest-ahead":
			g.furthestAhead = true
		case "rebuild-incarnation":
			g.rebuildIncarnate = true
		case "generation-floor":
			g.generationFloor = true
		case "fence-before-open":
			g.fenceBeforeOpen = true
		case "ahead-refusal":
			g.aheadRefusal = true
		case "late-round":
			g.lateRound = true
		case "mark-wait":
			g.markWait = true
		default:
			a.t.Fatalf("%s: unknown switch %q", a.d.Pos, w)
		}
	}
	return g
}

var logByName = func() map[string]proto.ReplicaLog {
	m := map[string]proto.ReplicaLog{}
	for l := proto.LogStream; l <= proto.LogLast; l++ {
		m[l.String()] = l
	}
	return m
}()

func (a args) log(key string) proto.ReplicaLog {
	l, ok := logByName[a.str(key, "stream")]
	if !ok {
		a.t.Fatalf("%s: unknown log %q", a.d.Pos, a.str(key, ""))
	}
	return l
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error: " + err.Error()
}

func fmtDecision(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "action: %v\n", d.Action)
	if d.Action == Promote || d.Action == Keep {
		fmt.Fprintf(&b, "leader: %s at generation %d\n", d.Leader, d.Generation)
	}
	if d.Action == Promote {
		fmt.Fprintf(&b, "followers: %v\n", d.Followers)
	}
	fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	for _, r := range d.Rejected {
		fmt.Fprintf(&b, "rejected %s: %s\n", r.NodeID, r.Reason)
	}
	return b.String()
}

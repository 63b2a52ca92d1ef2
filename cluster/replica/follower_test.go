package replica

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"felix/proto"
)

// TestFollower runs testdata/follower/*.txt: each case is one follower state and one
// message; the output is the decision. Each case's header names the seed table and row it
// covers. Regenerate with -rewrite and review the diff like code.
func TestFollower(t *testing.T) {
	datadriven.Walk(t, "testdata/follower", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			a := args{t: t, d: d}
			st := followerState(a)
			msg, kind := followerMessage(a, st)
			return fmtDecision(st, DecideFollower(st, a.str("from", "A"), kind, msg))
		})
	})
}

// followerState builds the state: shard=stream|cache log=NAME start=N held=(…) durable=N
// epochs=(G@O,…) ballot=G:LEADER nolog outsider readfail.
func followerState(a args) *FollowerState {
	kind := ShardStream
	if a.str("shard", "stream") == "cache" {
		kind = ShardCache
	}
	defLog := "stream"
	if kind == ShardCache {
		defLog = "cache"
	}
	log, ok := logByName[a.str("log", defLog)]
	if !ok {
		a.t.Fatalf("%s: unknown log", a.d.Pos)
	}
	r := &memReader{start: a.u64("start", 0), fail: a.has("readfail")}
	for _, p := range a.list("held") {
		r.recs = append(r.recs, []byte(p))
	}
	tail := r.start + uint64(len(r.recs))
	st := &FollowerState{Kind: kind, Log: log, Member: !a.has("outsider"), HasLog: !a.has("nolog"),
		Start: r.start, Tail: tail, Durable: a.u64("durable", tail), Epochs: a.epochs("epochs"), Records: r}
	if c := a.epochs("compared"); len(c) == 1 {
		st.Compared = Compared{Generation: c[0].Generation, Offset: c[0].StartOffset}
	}
	if a.has("genstart") {
		st.GenerationStart = parseGenerationStart
	}
	g, leader, _ := strings.Cut(a.str("ballot", "1:A"), ":")
	fmt.Sscan(g, &st.Ballot.Generation)
	st.Ballot.Leader = leader
	return st
}

// followerMessage builds the message named by the command (records, bootstrap, rebuild,
// fence) and the kind it arrives as (kind=NAME, else the log's own kind).
func followerMessage(a args, st *FollowerState) (proto.InternalMessage, proto.Kind) {
	log := st.Log
	if v := a.str("msglog", ""); v != "" {
		log = logByName[v]
	}
	arrive := func(def proto.Kind) proto.Kind {
		if v := a.str("kind", ""); v != "" {
			k, ok := kindByName[v]
			if !ok {
				a.t.Fatalf("%s: unknown kind %q", a.d.Pos, v)
			}
			return k
		}
		return def
	}
	switch a.d.Cmd {
	case "records":
		m := &proto.ReplicateRecords{Log: log, CorrelationID: 7, Epoch: a.u64("epoch", 1), FirstOffset: a.u64("first", 0)}
		for _, p := range a.list("payloads") {
			m.Payloads = append(m.Payloads, []byte(p))
		}
		m.Checksum = proto.BatchChecksum(m.Payloads)
		if a.has("badsum") {
			m.Checksum ^= 1
		}
		return m, arrive(log.RecordsKind())
	case "bootstrap":
		return &proto.ReplicateBootstrap{Log: log, CorrelationID: 7, Epoch: a.u64("epoch", 1),
			BaseOffset: a.u64("base", 0)}, arrive(log.BootstrapKind())
	case "rebuild":
		return &proto.ReplicateRebuild{Log: log, CorrelationID: 7, Generation: a.u64("gen", 1),
			BaseOffset: a.u64("base", 0)}, arrive(proto.KindReplicateRebuild)
	case "fence":
		return &proto.Fence{Log: log, CorrelationID: 7, Generation: a.u64("gen", 1)}, arrive(proto.KindFence)
	}
	a.t.Fatalf("%s: unknown command %q", a.d.Pos, a.d.Cmd)
	return nil, 0
}

func fmtDecision(st *FollowerState, d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "action: %v\nanswer: %s", d.Action, fmtMessage(d.Answer))
	if d.Sync {
		b.WriteString(" after fdatasync")
	}
	b.WriteString("\n")
	if d.Action == ActTruncateStore {
		fmt.Fprintf(&b, "truncate: at %d\n", d.TruncateAt)
	}
	if d.Create {
		b.WriteString("create: empty log at 0\n")
	}
	if len(d.Store) > 0 {
		fmt.Fprintf(&b, "store: %s at %d\n", fmtPayloads(d.Store), d.StoreAt)
	}
	if d.Action == ActPlace || d.Action == ActRebuild {
		fmt.Fprintf(&b, "place: empty log at %d\n", d.PlaceAt)
	}
	if d.Epochs != nil {
		fmt.Fprintf(&b, "epochs: %s -> %s\n", fmtEpochs(st.Epochs), fmtEpochs(d.Epochs))
	}
	if d.Ballot != nil {
		fmt.Fprintf(&b, "ballot: %d:%s -> %d:%s\n", st.Ballot.Generation, st.Ballot.Leader, d.Ballot.Generation, d.Ballot.Leader)
	}
	if d.Compared != nil {
		fmt.Fprintf(&b, "compared: below %d at generation %d\n", d.Compared.Offset, d.Compared.Generation)
	}
	fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	return b.String()
}

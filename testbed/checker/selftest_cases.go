package checker

import (
	"felix/testbed/history"
)

// Case is one selftest case: a history built twice, with its anomaly planted
// (Build(true)) and as its clean twin (Build(false)), which differs only
// where the anomaly is.
type Case struct {
	Name    string
	Anomaly Anomaly
	Build   func(planted bool) *history.History
}

// SelfTestCases returns the selftest's cases: one per anomaly the checkers
// report, plus the miss-versus-empty cache case.
func SelfTestCases() []Case {
	return []Case{
		{"lost write", LostWrite, caseLostWrite},
		{"duplicate", Duplicate, caseDuplicate},
		{"inconsistent offset", InconsistentOffset, caseInconsistentOffset},
		{"non-monotonic reader", NonMonotonicRead, caseNonMonotonic},
		{"skipping reader", SkippedRead, caseSkip},
		{"dirty read", DirtyRead, caseDirtyRead},
		{"unseen at the end", Unseen, caseUnseen},
		{"diverged replicas", ReplicasDiverged, caseReplicas},
		{"stale cache read", NonLinearCache, caseStaleCache},
		{"cache miss is not an empty value", NonLinearCache, caseCacheMissVsEmpty},
		{"non-linearizable counter", NonLinearCounter, caseCounter},
		{"non-linearizable catalog", NonLinearCatalog, caseCatalog},
		{"stale stream point read", NonLinearStream, caseStreamRead},
		{"group skip", GroupSkip, caseGroupSkip},
		{"group undelivered", GroupUndelivered, caseGroupUndelivered},
		{"early dead letter", GroupEarlyDead, caseEarlyDeadLetter},
	}
}

// The planted histories use stream "s", shard 0, unless said otherwise.
const (
	caseStream = "s"
	caseCache  = "c"
)

// rec returns a record at off with payload.
func rec(off uint64, payload string) history.Record {
	return history.Record{Offset: off, Payload: history.Bytes(payload)}
}

// publish adds one publish of payload by process 0; ok ones acked at off.
func publish(b *history.Builder, payload string, off uint64, outcome history.Outcome) int {
	op := history.Op{Process: 0, Kind: history.KindPublish, Outcome: outcome,
		In: history.Input{Stream: caseStream, Payloads: history.Payloads(payload)}}
	if outcome == history.OK {
		op.Out = history.Output{Offsets: []uint64{off}}
	}
	return b.Add(op)
}

// publishAll adds ok publishes of payloads at offsets 0, 1, 2, ...
func publishAll(b *history.Builder, payloads ...string) {
	for i, p := range payloads {
		publish(b, p, uint64(i), history.OK)
	}
}

// read adds one ok subscribe-read of subscription sub (process 1), from
// offset from when from >= 0.
func read(b *history.Builder, sub string, from int, final bool, recs ...history.Record) int {
	in := history.Input{Stream: caseStream, Subscription: sub, Final: final}
	if from >= 0 {
		in.From = history.Offset(uint64(from))
	}
	return b.Add(history.Op{Process: 1, Kind: history.KindSubscribeRead, In: in,
		Out: history.Output{Records: recs}})
}

func caseLostWrite(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1", "p2")
	if planted {
		read(b, "a", 0, false, rec(0, "p0"))
	} else {
		read(b, "a", 0, false, rec(0, "p0"), rec(1, "p1"))
	}
	read(b, "b", 2, false, rec(2, "p2"))
	return b.History()
}

func caseDuplicate(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1")
	recs := []history.Record{rec(0, "p0"), rec(1, "p1")}
	if planted {
		recs = append(recs, rec(2, "p0"))
	}
	read(b, "a", 0, false, recs...)
	return b.History()
}

func caseInconsistentOffset(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1")
	publish(b, "p2", 0, history.Info)
	read(b, "a", 0, false, rec(0, "p0"), rec(1, "p1"))
	if planted {
		read(b, "b", 0, false, rec(0, "p0"), rec(1, "p2"))
	} else {
		read(b, "b", 0, false, rec(0, "p0"), rec(1, "p1"), rec(2, "p2"))
	}
	return b.History()
}

func caseNonMonotonic(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1", "p2")
	read(b, "a", 0, false, rec(0, "p0"), rec(1, "p1"))
	if planted {
		read(b, "a", 0, false, rec(1, "p1"), rec(2, "p2"))
	} else {
		read(b, "a", 0, false, rec(2, "p2"))
	}
	return b.History()
}

// caseSkip: offset 1 holds no deliverable record (nothing was published
// there); the clean twin's delivery carries the broker's skipped flag.
func caseSkip(planted bool) *history.History {
	b := history.NewBuilder()
	publish(b, "p0", 0, history.OK)
	publish(b, "p2", 2, history.OK)
	read(b, "a", 0, false, rec(0, "p0"))
	op := history.Op{Process: 1, Kind: history.KindSubscribeRead,
		In:  history.Input{Stream: caseStream, Subscription: "a"},
		Out: history.Output{Records: []history.Record{rec(2, "p2")}}}
	if !planted {
		op.Out.Skipped = []history.OffsetRange{{From: 1, To: 2}}
	}
	b.Add(op)
	return b.History()
}

func caseDirtyRead(planted bool) *history.History {
	b := history.NewBuilder()
	publish(b, "p0", 0, history.OK)
	if planted {
		publish(b, "p1", 0, history.Fail)
	} else {
		publish(b, "p1", 1, history.OK)
	}
	read(b, "a", 0, false, rec(0, "p0"), rec(1, "p1"))
	return b.History()
}

func caseUnseen(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1", "p2")
	if planted {
		read(b, "final", 0, true, rec(0, "p0"), rec(1, "p1"))
	} else {
		read(b, "final", 0, true, rec(0, "p0"), rec(1, "p1"), rec(2, "p2"))
	}
	return b.History()
}

func caseReplicas(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1")
	second := "p1"
	if planted {
		second = "px"
	}
	for _, r := range []struct {
		name string
		recs []history.Record
	}{{"n1", []history.Record{rec(0, "p0"), rec(1, "p1"), rec(2, "p2")}}, {"n2", []history.Record{rec(0, "p0"), rec(1, second)}}} {
		b.Add(history.Op{Process: 9, Kind: history.KindReplicaLog,
			In:  history.Input{Stream: caseStream, Replica: r.name},
			Out: history.Output{Committed: 2, Records: r.recs}})
	}
	return b.History()
}

package checker

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"felix/testbed/history"
)

// checkerFor runs the one checker responsible for anomaly a.
func checkerFor(t *testing.T, a Anomaly, h *history.History) []Finding {
	t.Helper()
	switch a {
	case ReplicasDiverged:
		return CheckReplicas(h)
	case GroupSkip, GroupUndelivered, GroupEarlyDead:
		return CheckGroups(h)
	case NonLinearCache, NonLinearCounter, NonLinearCatalog, NonLinearStream:
		res, err := CheckLinearizable(h, LinearOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Findings
	}
	return CheckStreams(h)
}

// TestEachCheckerHasTeeth: every planted anomaly is found by its own
// checker alone, and that checker finds nothing in the clean twin.
func TestEachCheckerHasTeeth(t *testing.T) {
	for _, c := range SelfTestCases() {
		t.Run(c.Name, func(t *testing.T) {
			found := false
			for _, f := range checkerFor(t, c.Anomaly, c.Build(true)) {
				found = found || f.Anomaly == c.Anomaly
				if f.Anomaly == c.Anomaly && (len(f.Ops) == 0 || f.Detail == "") {
					t.Errorf("finding without ops or detail: %s", f)
				}
			}
			if !found {
				t.Errorf("planted %s not found", c.Anomaly)
			}
			if fs := checkerFor(t, c.Anomaly, c.Build(false)); len(fs) > 0 {
				t.Errorf("clean twin: %v", fs)
			}
		})
	}
}

func TestLostWriteNamesShardOffsetAndOp(t *testing.T) {
	fs := CheckStreams(caseLostWrite(true))
	want := []Finding{{Anomaly: LostWrite, Stream: "s", Shard: 0, Offsets: []uint64{1}, Ops: []int{1}}}
	for i := range fs {
		fs[i].Detail = ""
	}
	if !reflect.DeepEqual(fs, want) {
		t.Fatalf("got %+v, want %+v", fs, want)
	}
}

func TestUnseenOnlyWithFinalReads(t *testing.T) {
	h := caseUnseen(true)
	for i := range h.Ops {
		h.Ops[i].In.Final = false
	}
	if fs := CheckStreams(h); len(fs) != 0 {
		t.Fatalf("unseen reported without final reads: %v", fs)
	}
}

func TestSkipAtSubscriptionStartAndLargeFlaggedGap(t *testing.T) {
	b := history.NewBuilder()
	publish(b, "p9", 9, history.OK)
	read(b, "a", 5, false, rec(9, "p9")) // from 5, first record 9: 5..8 skipped
	b.Add(history.Op{Kind: history.KindSubscribeRead, In: history.Input{Stream: caseStream, Subscription: "a"},
		Out: history.Output{Records: []history.Record{rec(1<<40, "far")}, Skipped: []history.OffsetRange{{From: 10, To: 1 << 40}}}})
	fs := CheckStreams(b.History())
	if len(fs) != 1 || fs[0].Anomaly != SkippedRead || !reflect.DeepEqual(fs[0].Offsets, []uint64{5, 6, 7, 8}) {
		t.Fatalf("got %v", fs)
	}
}

func TestFailedReadsAndInfoReads(t *testing.T) {
	b := history.NewBuilder()
	publish(b, "p0", 0, history.OK)
	// A failed read's records are ignored; an info read's records count.
	b.Add(history.Op{Kind: history.KindSubscribeRead, Outcome: history.Fail,
		In: history.Input{Stream: caseStream, Subscription: "x"}, Out: history.Output{Records: []history.Record{rec(0, "bogus")}}})
	b.Add(history.Op{Kind: history.KindSubscribeRead, Outcome: history.Info,
		In: history.Input{Stream: caseStream, Subscription: "y", Final: true}, Out: history.Output{Records: []history.Record{rec(0, "p0")}}})
	if fs := CheckStreams(b.History()); len(fs) != 0 {
		t.Fatalf("got %v", fs)
	}
}

func TestReplicasRetentionAndMissing(t *testing.T) {
	b := history.NewBuilder()
	add := func(name string, from *uint64, committed uint64, recs ...history.Record) {
		b.Add(history.Op{Kind: history.KindReplicaLog, In: history.Input{Stream: "s", Replica: name, From: from},
			Out: history.Output{Committed: committed, Records: recs}})
	}
	add("n1", nil, 3, rec(0, "a"), rec(1, "b"), rec(2, "c"))
	add("n2", history.Offset(1), 3, rec(1, "b"), rec(2, "c")) // trimmed below 1: fine
	if fs := CheckReplicas(b.History()); len(fs) != 0 {
		t.Fatalf("trimmed replica reported: %v", fs)
	}
	add("n3", nil, 3, rec(0, "a"), rec(2, "c")) // lacks 1
	fs := CheckReplicas(b.History())
	if len(fs) != 1 || !reflect.DeepEqual(fs[0].Offsets, []uint64{1}) || !reflect.DeepEqual(fs[0].Ops, []int{0, 1, 2}) {
		t.Fatalf("got %v", fs)
	}
}

func TestGroupAckOfUndeliveredOffset(t *testing.T) {
	b := history.NewBuilder()
	publishAll(b, "p0")
	groupOp(b, history.KindGroupAck, false, []uint64{0})
	fs := CheckGroups(b.History())
	if len(fs) != 1 || fs[0].Anomaly != GroupSkip || fs[0].Object != "group g" {
		t.Fatalf("got %v", fs)
	}
}

func TestGroupInfoPollsExcuseUnseenDeliveries(t *testing.T) {
	b := history.NewBuilder()
	publishAll(b, "p0")
	groupOp(b, history.KindGroupPoll, false, nil, rec(0, "p0"))
	for i := 0; i < 2; i++ { // two polls whose answers were lost
		b.Add(history.Op{Process: 4, Kind: history.KindGroupPoll, Outcome: history.Info,
			In: history.Input{Stream: caseStream, Group: "g", MaxDeliveries: 3}})
	}
	groupOp(b, history.KindGroupDeadLetters, false, nil, rec(0, "p0"))
	if fs := CheckGroups(b.History()); len(fs) != 0 {
		t.Fatalf("got %v", fs)
	}
}

func TestLinearizableFailedAndInfoWrites(t *testing.T) {
	b := history.NewBuilder()
	cacheOp(b, 0, history.KindCachePut, history.Fail, history.Input{Value: history.Bytes("gone")}, history.Output{})
	cacheOp(b, 0, history.KindCachePut, history.Info, history.Input{Value: history.Bytes("maybe")}, history.Output{})
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{})
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{Found: true, Value: history.Bytes("maybe")})
	h := b.History()
	if res, _ := CheckLinearizable(h, LinearOptions{}); len(res.Findings) != 0 || res.Objects != 1 {
		t.Fatalf("info put: %+v", res)
	}
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{Found: true, Value: history.Bytes("gone")})
	if res, _ := CheckLinearizable(b.History(), LinearOptions{}); len(res.Findings) != 1 {
		t.Fatalf("a read of a failed put's value passed: %+v", res)
	}
}

func TestCounterAbsentIsNotZero(t *testing.T) {
	b := history.NewBuilder()
	cacheOp(b, 0, history.KindCounterAdd, history.OK, history.Input{Delta: 2}, history.Output{Sum: 2})
	cacheOp(b, 0, history.KindCounterAdd, history.OK, history.Input{Delta: -2}, history.Output{Sum: 0})
	cacheOp(b, 0, history.KindCounterGet, history.OK, history.Input{}, history.Output{Found: true, Sum: 0})
	if res, _ := CheckLinearizable(b.History(), LinearOptions{}); len(res.Findings) != 0 {
		t.Fatalf("present 0: %v", res.Findings)
	}
	cacheOp(b, 0, history.KindCounterGet, history.OK, history.Input{}, history.Output{Found: false})
	if res, _ := CheckLinearizable(b.History(), LinearOptions{}); len(res.Findings) != 1 {
		t.Fatalf("an absent answer for a present 0 passed: %v", res.Findings)
	}
}

func TestVisualizationWriteErrorKeepsFindings(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "viz.html")
	res, err := CheckLinearizable(caseStaleCache(true), LinearOptions{VisualizationPath: path})
	if err == nil || len(res.Findings) != 1 || res.Visualization != "" {
		t.Fatalf("err %v, result %+v", err, res)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v does not wrap the path error", err)
	}
}

func TestCheckAllReportPrint(t *testing.T) {
	rep, err := CheckAll(caseGroupSkip(true), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sb stringsBuilder
	passed, failed := rep.Print(&sb)
	// The group skip is also a lost write (offset 1 never read, reads reached 2).
	if passed != 2 || failed != 2 || !rep.Has(GroupSkip) || !rep.Has(LostWrite) {
		t.Fatalf("%d passed, %d failed:\n%s", passed, failed, sb.s)
	}
}

type stringsBuilder struct{ s string }

func (b *stringsBuilder) Write(p []byte) (int, error) { b.s += string(p); return len(p), nil }

package checker

import (
	"felix/testbed/history"
)

// cacheOp adds one cache or counter operation on key "k" by process p.
func cacheOp(b *history.Builder, p int, kind history.Kind, outcome history.Outcome, in history.Input, out history.Output) int {
	in.Cache, in.Key = caseCache, history.Bytes("k")
	return b.Add(history.Op{Process: p, Kind: kind, Outcome: outcome, In: in, Out: out})
}

// caseStaleCache: after put v1 and put v2 completed, a get answers v1. The
// clean twin also carries an info put that may or may not have happened.
func caseStaleCache(planted bool) *history.History {
	b := history.NewBuilder()
	cacheOp(b, 0, history.KindCachePut, history.OK, history.Input{Value: history.Bytes("v1")}, history.Output{})
	cacheOp(b, 0, history.KindCachePut, history.OK, history.Input{Value: history.Bytes("v2")}, history.Output{})
	cacheOp(b, 2, history.KindCachePut, history.Info, history.Input{Value: history.Bytes("v3")}, history.Output{})
	seen := "v2"
	if planted {
		seen = "v1"
	}
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{Found: true, Value: history.Bytes(seen)})
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{Found: true, Value: history.Bytes("v3")})
	cacheOp(b, 1, history.KindCacheDelete, history.OK, history.Input{}, history.Output{Found: true, Value: history.Bytes("v3")})
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{})
	return b.History()
}

// caseCacheMissVsEmpty: after a put of the empty value, a get misses.
func caseCacheMissVsEmpty(planted bool) *history.History {
	b := history.NewBuilder()
	cacheOp(b, 0, history.KindCacheGet, history.OK, history.Input{}, history.Output{})
	cacheOp(b, 0, history.KindCachePut, history.OK, history.Input{Value: history.Bytes{}}, history.Output{})
	cacheOp(b, 1, history.KindCacheGet, history.OK, history.Input{}, history.Output{Found: !planted})
	return b.History()
}

// caseCounter: add +1 -> 1, then add +2 answers 4; the clean twin answers 3
// and carries concurrent adds whose order the checker must find.
func caseCounter(planted bool) *history.History {
	b := history.NewBuilder()
	cacheOp(b, 0, history.KindCounterGet, history.OK, history.Input{}, history.Output{})
	cacheOp(b, 0, history.KindCounterAdd, history.OK, history.Input{Delta: 1}, history.Output{Sum: 1})
	sum := int64(3)
	if planted {
		sum = 4
	}
	cacheOp(b, 0, history.KindCounterAdd, history.OK, history.Input{Delta: 2}, history.Output{Sum: sum})
	// Two concurrent adds, [100, 200] and [150, 250]: either order answers.
	b.Add(history.Op{Process: 1, Kind: history.KindCounterAdd, InvokeNS: 100, CompleteNS: 200,
		In: history.Input{Cache: caseCache, Key: history.Bytes("k"), Delta: 10}, Out: history.Output{Sum: sum + 15}})
	b.Add(history.Op{Process: 2, Kind: history.KindCounterAdd, InvokeNS: 150, CompleteNS: 250,
		In: history.Input{Cache: caseCache, Key: history.Bytes("k"), Delta: 5}, Out: history.Output{Sum: sum + 5}})
	cacheOp(b, 3, history.KindCounterAdd, history.Info, history.Input{Delta: 100}, history.Output{})
	cacheOp(b, 0, history.KindCounterGet, history.OK, history.Input{}, history.Output{Found: true, Sum: sum + 15})
	return b.History()
}

// caseCatalog: after a create of entry "stream/orders" completed, a get
// does not find it.
func caseCatalog(planted bool) *history.History {
	b := history.NewBuilder()
	entry := func(p int, kind history.Kind, outcome history.Outcome, spec string, out history.Output) {
		b.Add(history.Op{Process: p, Kind: kind, Outcome: outcome,
			In: history.Input{Entry: "stream/orders", Spec: spec}, Out: out})
	}
	entry(0, history.KindCatalogCreate, history.OK, "shards=2", history.Output{})
	entry(1, history.KindCatalogCreate, history.OK, "shards=4", history.Output{Found: true})
	entry(1, history.KindCatalogGet, history.OK, "", history.Output{Found: !planted, Spec: "shards=2"})
	entry(0, history.KindCatalogDelete, history.Info, "", history.Output{})
	entry(1, history.KindCatalogCreate, history.Fail, "shards=8", history.Output{})
	return b.History()
}

// caseStreamRead: a point read of offset 0 after its publish was acked
// finds nothing.
func caseStreamRead(planted bool) *history.History {
	b := history.NewBuilder()
	point := func(found bool) {
		op := history.Op{Process: 1, Kind: history.KindStreamRead, In: history.Input{Stream: caseStream, Offset: 0}}
		if found {
			op.Out = history.Output{Found: true, Records: []history.Record{rec(0, "p0")}}
		}
		b.Add(op)
	}
	point(false)
	publish(b, "p0", 0, history.OK)
	point(!planted)
	return b.History()
}

// groupOp adds one operation of group "g" (max_deliveries 3) by consumer "c1".
func groupOp(b *history.Builder, kind history.Kind, final bool, offsets []uint64, recs ...history.Record) {
	b.Add(history.Op{Process: 4, Kind: kind,
		In:  history.Input{Stream: caseStream, Group: "g", Consumer: "c1", MaxDeliveries: 3, Offsets: offsets, Final: final},
		Out: history.Output{Records: recs}})
}

// caseGroupSkip: the group acks offsets 0 and 2 but never delivered 1.
func caseGroupSkip(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1", "p2")
	if planted {
		groupOp(b, history.KindGroupPoll, false, nil, rec(0, "p0"), rec(2, "p2"))
		groupOp(b, history.KindGroupAck, false, []uint64{0, 2})
		return b.History()
	}
	groupOp(b, history.KindGroupPoll, false, nil, rec(0, "p0"), rec(1, "p1"))
	groupOp(b, history.KindGroupNack, false, []uint64{1})
	groupOp(b, history.KindGroupPoll, false, nil, rec(1, "p1"), rec(2, "p2")) // a redelivery: allowed
	groupOp(b, history.KindGroupAck, false, []uint64{0, 1, 2})
	return b.History()
}

// caseGroupUndelivered: offset 1 is never delivered though the final poll ran.
func caseGroupUndelivered(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0", "p1")
	groupOp(b, history.KindGroupPoll, false, nil, rec(0, "p0"))
	groupOp(b, history.KindGroupAck, false, []uint64{0})
	if planted {
		groupOp(b, history.KindGroupPoll, true, nil)
	} else {
		groupOp(b, history.KindGroupPoll, true, nil, rec(1, "p1"))
		groupOp(b, history.KindGroupAck, false, []uint64{1})
	}
	return b.History()
}

// caseEarlyDeadLetter: offset 0 is dead-lettered after one delivery of 3.
func caseEarlyDeadLetter(planted bool) *history.History {
	b := history.NewBuilder()
	publishAll(b, "p0")
	deliveries := 3
	if planted {
		deliveries = 1
	}
	for i := 1; i <= deliveries; i++ {
		groupOp(b, history.KindGroupPoll, false, nil, history.Record{Offset: 0, Payload: history.Bytes("p0"), Deliveries: i})
		groupOp(b, history.KindGroupNack, false, []uint64{0})
	}
	groupOp(b, history.KindGroupDeadLetters, false, nil, history.Record{Offset: 0, Payload: history.Bytes("p0"), Deliveries: deliveries})
	return b.History()
}

package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// publishSync publishes and waits for the ack (retrying an overloaded inbox).
func publishSync(t testing.TB, e *Engine, req *PublishRequest) (PublishResult, error) {
	t.Helper()
	type answer struct {
		res PublishResult
		err error
	}
	ch := make(chan answer, 1)
	for {
		err := e.Publish(req, func(res PublishResult, err error) { ch <- answer{res, err} })
		if errors.Is(err, ErrOverloaded) {
			continue
		}
		if err != nil {
			return PublishResult{}, err
		}
		a := <-ch
		return a.res, a.err
	}
}

// readShard subscribes from earliest and reads until the shard's tail.
func readShard(t *testing.T, e *Engine, name StreamName, shard int, withOffsets bool) []string {
	t.Helper()
	info, err := e.StreamInfo(name)
	if err != nil {
		t.Fatal(err)
	}
	tail := info.NextOffsets[shard]
	sub, err := e.Subscribe(SubscribeRequest{Stream: name, Shard: shard, Start: StartEarliest, WithOffsets: withOffsets})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var got []string
	next := info.EarliestOffsets[shard]
	for next < tail {
		d, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("Next at %d of %d: %v", next, tail, err)
		}
		if d.BaseOffset != next {
			t.Fatalf("delivery at %d, want %d", d.BaseOffset, next)
		}
		got = append(got, records(t, d)...)
		next += uint64(d.Count)
	}
	return got
}

func TestRestartKeepsEveryAcknowledgedRecordOnDisk(t *testing.T) {
	dir := t.TempDir()
	spec := StreamSpec{Name: testStream, Shards: 3, Durable: true}
	open := func() *Engine {
		e, err := NewEngine(Config{Cores: 2, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateStream(spec); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	const publishers, batches = 4, 25
	acked := make([][]string, spec.Shards)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				req := routed(t, e, &PublishRequest{Stream: testStream, Payloads: payloads(fmt.Sprintf("p%d-b%d", p, b), 1+b%3)}, []byte(fmt.Sprint(p)))
				res, err := publishSync(t, e, req)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[res.Shard] = append(acked[res.Shard], fmt.Sprintf("%d:%d", res.FirstOffset, len(req.Payloads)))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	before := make([][]string, spec.Shards)
	for s := range spec.Shards {
		before[s] = readShard(t, e, testStream, s, true)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close(context.Background())
	total := 0
	for s := range spec.Shards {
		after := readShard(t, e, testStream, s, true)
		if fmt.Sprint(after) != fmt.Sprint(before[s]) {
			t.Fatalf("shard %d after restart:\n%v\nbefore:\n%v", s, after, before[s])
		}
		n := 0
		for _, a := range acked[s] {
			var first, count int
			fmt.Sscanf(a, "%d:%d", &first, &count)
			n += count
		}
		if len(after) != n {
			t.Fatalf("shard %d holds %d records, %d were acknowledged", s, len(after), n)
		}
		total += n
	}
	if want := publishers * 49; total != want { // 25 batches of 1, 2, 3, 1, ... records
		t.Fatalf("%d records, want %d", total, want)
	}
	seen := map[string]bool{}
	for s := range spec.Shards {
		for _, r := range readShard(t, e, testStream, s, false) {
			if seen[r] {
				t.Fatalf("record %s stored twice", r)
			}
			seen[r] = true
		}
	}
}

func TestCrashKeepsAcknowledgedRecordsOnly(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	committed := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("c", 3)})
	h.step(1)
	h.hold(true)
	lost := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("l", 2)})
	h.step(1)
	if committed.calls != 1 || lost.calls != 0 {
		t.Fatalf("acks %+v %+v", committed, lost)
	}
	store.crash()
	h2 := newHarness(t, 1, store, nil)
	h2.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	sub, err := h2.e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartEarliest})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := collect(t, sub, 0)
	if fmt.Sprint(got) != "[c-0 c-1 c-2]" {
		t.Fatalf("after the crash: %v", got)
	}
	next := h2.publish(&PublishRequest{Stream: testStream, Payloads: payloads("n", 1)})
	h2.step(1)
	if next.res.FirstOffset != 3 {
		t.Fatalf("first offset after the crash %d, want 3", next.res.FirstOffset)
	}
}

func TestIdempotentProducer(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	req := func(seq uint64) *PublishRequest {
		return &PublishRequest{Stream: testStream, Payloads: payloads(fmt.Sprint(seq), 2), ProducerID: "prod-1", Sequence: seq}
	}
	h.hold(true)
	first := h.publish(req(7))
	h.step(1)
	inflightDup := h.publish(req(7))
	h.step(1)
	if first.calls != 0 || inflightDup.calls != 0 {
		t.Fatalf("answered before the commit: %+v %+v", first, inflightDup)
	}
	h.hold(false)
	h.step(1)
	want := PublishResult{FirstOffset: 0, LastOffset: 1, Committed: true}
	if first.res != want || first.err != nil {
		t.Fatalf("original: %+v", first)
	}
	want.Duplicate = true
	if inflightDup.res != want || inflightDup.calls != 1 {
		t.Fatalf("duplicate of an in-flight publish: %+v", inflightDup)
	}
	other := h.publish(req(8))
	late := h.publish(req(7))
	h.step(2)
	if other.res.FirstOffset != 2 || other.res.Duplicate || late.res != want {
		t.Fatalf("next sequence %+v, late duplicate %+v", other, late)
	}
	h.close()
	store.crash()
	h2 := newHarness(t, 1, store, nil)
	h2.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	again := h2.publish(req(7))
	h2.step(2)
	if again.res != want {
		t.Fatalf("duplicate after a restart: %+v", again)
	}
	info, err := h2.e.StreamInfo(testStream)
	if err != nil || info.NextOffsets[0] != 4 {
		t.Fatalf("log grew on a duplicate: %+v %v", info, err)
	}
}

func TestIdempotentProducerInMemory(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), nil)
	h.create(StreamSpec{Name: testStream, Shards: 1})
	a := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1})
	b := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1})
	h.step(1)
	if a.res.Duplicate || !b.res.Duplicate || b.res.FirstOffset != a.res.FirstOffset {
		t.Fatalf("%+v %+v", a, b)
	}
}

func TestProducerWindowIsBounded(t *testing.T) {
	h := newHarness(t, 1, newFakeStore(), func(c *Config) { c.ProducerWindow = 2 })
	h.create(StreamSpec{Name: testStream, Shards: 1})
	for seq := range uint64(3) {
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: seq})
	}
	old := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 0})
	recent := h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 2})
	h.step(1)
	if old.res.Duplicate || !recent.res.Duplicate {
		t.Fatalf("window of 2: evicted key answered %+v, recent key %+v", old.res, recent.res)
	}
}

func TestProducerRecordRoundTrip(t *testing.T) {
	want := producerKey{"prod", 9}
	b := appendProducerRecord(nil, want, 10, 12)
	key, first, last, err := decodeProducerRecord(b)
	if err != nil || key != want || first != 10 || last != 12 {
		t.Fatalf("%v %d %d %v", key, first, last, err)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(b, 0)} {
		if _, _, _, err := decodeProducerRecord(bad); !errors.Is(err, errBadProducerRecord) {
			t.Fatalf("bad record accepted: %x", bad)
		}
	}
	if _, _, _, err := decodeProducerRecord(appendProducerRecord(nil, want, 12, 10)); err == nil {
		t.Fatal("record with last < first accepted")
	}
}

func TestDeleteDurableStreamRemovesItsLogs(t *testing.T) {
	dir := t.TempDir()
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	spec := StreamSpec{Name: testStream, Shards: 2, Durable: true}
	if err := e.CreateStream(spec); err != nil {
		t.Fatal(err)
	}
	for shard := range 2 {
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: shard, Payloads: payloads("x", 3), ProducerID: "p", Sequence: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteStream(testStream); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateStream(spec); err != nil {
		t.Fatal(err)
	}
	info, err := e.StreamInfo(testStream)
	if err != nil || info.NextOffsets[0] != 0 || info.NextOffsets[1] != 0 {
		t.Fatalf("recreated stream is not empty: %+v %v", info, err)
	}
	res, err := publishSync(t, e, &PublishRequest{Stream: testStream, Shard: 0, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1})
	if err != nil || res.Duplicate || res.FirstOffset != 0 {
		t.Fatalf("producer window survived the delete: %+v %v", res, err)
	}
}

func TestProducerLogIsCompactedAndStillRecovers(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, func(c *Config) { c.ProducerWindow = 8 })
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	const n = 600
	for seq := range uint64(n) {
		h.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: seq})
		h.step(1)
	}
	h.step(2)
	plog := store.logs[fakeLogKey(logProducers, testStream, 0)]
	if held := plog.NextOffset() - plog.EarliestOffset(); held > producerCompactFactor*64+8 {
		t.Fatalf("producers log holds %d records after %d publishes", held, n)
	}
	if plog.EarliestOffset() == 0 {
		t.Fatal("producers log never compacted")
	}
	h.close()
	h2 := newHarness(t, 1, store, func(c *Config) { c.ProducerWindow = 8 })
	h2.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	recent := h2.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: n - 1})
	old := h2.publish(&PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 0})
	h2.step(2)
	if !recent.res.Duplicate || recent.res.FirstOffset != n-1 || old.res.Duplicate {
		t.Fatalf("after compaction and restart: recent %+v, old %+v", recent.res, old.res)
	}
}

func TestIdempotentPublishThatFailsFailsItsDuplicates(t *testing.T) {
	store := newFakeStore()
	h := newHarness(t, 1, store, nil)
	h.create(StreamSpec{Name: testStream, Shards: 1, Durable: true})
	h.hold(true)
	req := func() *PublishRequest {
		return &PublishRequest{Stream: testStream, Payloads: payloads("x", 1), ProducerID: "p", Sequence: 1}
	}
	original := h.publish(req())
	h.step(1)
	dup := h.publish(req())
	h.step(1)
	store.completeErr = errors.New("injected EIO")
	h.hold(false)
	h.step(2)
	if !errors.Is(original.err, ErrStorageFailed) || !errors.Is(dup.err, ErrStorageFailed) || dup.calls != 1 {
		t.Fatalf("original %+v, duplicate %+v", original, dup)
	}
	if _, ok := h.e.lookup(testStream).shards[0].producers.entries[producerKey{"p", 1}]; ok {
		t.Fatal("a failed key stays in the window")
	}
}

func TestRetentionDropsHeadSegmentsAndAnswersTooOld(t *testing.T) {
	e, err := NewEngine(Config{Cores: 1, DataDir: t.TempDir(), Fsync: FsyncOnCommit, NoPinning: true,
		SegmentBytes: 4096, RetentionBytes: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		t.Fatal(err)
	}
	record := make([]byte, 1000)
	for range 40 {
		if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: [][]byte{record}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = e.runOn(e.cores[0], func(c *core) error { c.enforceRetention(time.Now()); return nil })
	info, err := e.StreamInfo(testStream)
	if err != nil {
		t.Fatal(err)
	}
	earliest := info.EarliestOffsets[0]
	if earliest == 0 || info.NextOffsets[0] != 40 || 40-earliest > 16 {
		t.Fatalf("after retention of 8 KiB: earliest %d, next %d", earliest, info.NextOffsets[0])
	}
	_, err = e.Subscribe(SubscribeRequest{Stream: testStream, Start: StartOffset, Offset: 0})
	var cerr *CursorError
	if !errors.As(err, &cerr) || cerr.Reason != CursorTooOld || cerr.Available != earliest {
		t.Fatalf("subscribe below the retained head: %v", err)
	}
	if got := readShard(t, e, testStream, 0, true); uint64(len(got)) != 40-earliest {
		t.Fatalf("read %d records from the retained head %d", len(got), earliest)
	}
}

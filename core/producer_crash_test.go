package core

import (
	"context"
	"fmt"
	"testing"

	"felix/internal/vfs/vfstest"
)

// TestIdempotentResendAfterCrashStoresOnce is the regression test of the
// CI crash test's duplicates (docs/soak.md, "Failure history"): a SIGKILL
// that lands after a batch's records reached the data log but before its
// producer key reached the producers log left records without a key, and
// the SDK's re-send of the same (producer id, sequence) after the restart
// was stored a second time. The test kills the "process" after every write
// in turn (and in the middle of each write), restarts on the same files,
// re-sends every batch with its original key, and checks that every batch
// is stored exactly once and every batch acknowledged before the kill is
// there, at the offsets its ack named.
func TestIdempotentResendAfterCrashStoresOnce(t *testing.T) {
	const batches, perBatch = 4, 3
	for _, pipelined := range []bool{false, true} {
		for _, partial := range []int{0, 40} {
			for budget := 1; ; budget++ {
				// The shared fault FS (was the private crashFS of this file): a
				// SIGKILL after budget writes, buffered writes only.
				fs := &vfstest.FaultFS{NoDirect: true}
				fs.CrashAfterWrites(budget, partial)
				dir := t.TempDir()
				acked, crashed := crashRun(t, dir, fs, pipelined, batches, perBatch)
				if !crashed {
					if budget < 4 {
						t.Fatalf("budget %d: the run did not reach the kill", budget)
					}
					break // every write of the run landed: all crash points covered
				}
				name := fmt.Sprintf("pipelined=%v/partial=%d/kill-after-write-%d", pipelined, partial, budget)
				t.Run(name, func(t *testing.T) { resendAndCheck(t, dir, acked, batches, perBatch) })
			}
		}
	}
}

// crashRun publishes batches idempotent batches of perBatch records (all in
// flight at once when pipelined, else one after the other) on an engine over
// fs in dir, then closes it (nothing more lands once fs crashed). It returns
// the results of the batches acknowledged and whether the kill came.
func crashRun(t *testing.T, dir string, fs *vfstest.FaultFS, pipelined bool, batches, perBatch int) (map[uint64]PublishResult, bool) {
	acked := map[uint64]PublishResult{}
	e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, fs: fs})
	if err != nil {
		if fs.Crashed() {
			return acked, true
		}
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
		if fs.Crashed() {
			return acked, true
		}
		t.Fatal(err)
	}
	type answer struct {
		seq uint64
		res PublishResult
		err error
	}
	ch := make(chan answer, batches)
	for seq := range uint64(batches) {
		req := &PublishRequest{Stream: testStream, Payloads: payloads(fmt.Sprint("b", seq), perBatch),
			ProducerID: "p", Sequence: seq}
		if err := e.Publish(req, func(res PublishResult, err error) { ch <- answer{seq, res, err} }); err != nil {
			ch <- answer{seq: seq, err: err}
		}
		if !pipelined {
			if a := <-ch; a.err == nil {
				acked[a.seq] = a.res
			}
		}
	}
	for i := 0; pipelined && i < batches; i++ {
		if a := <-ch; a.err == nil {
			acked[a.seq] = a.res
		}
	}
	return acked, fs.Crashed()
}

// resendAndCheck reopens dir and publishes one batch without a key (it takes
// the offsets of whatever the kill left unwritten), reopens again, re-sends
// every batch with its original key and checks the shard holds each batch
// once, in full, where its acks say.
func resendAndCheck(t *testing.T, dir string, acked map[uint64]PublishResult, batches, perBatch int) {
	open := func() *Engine {
		e, err := NewEngine(Config{Cores: 1, DataDir: dir, Fsync: FsyncOnCommit, NoPinning: true, fs: &vfstest.FaultFS{}})
		if err != nil {
			t.Fatalf("restart: %v", err)
		}
		if err := e.CreateStream(StreamSpec{Name: testStream, Shards: 1, Durable: true}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := open()
	if _, err := publishSync(t, e, &PublishRequest{Stream: testStream, Payloads: payloads("u", perBatch)}); err != nil {
		t.Fatalf("publish without a key after the restart: %v", err)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e = open()
	defer e.Close(context.Background())
	resent := map[uint64]PublishResult{}
	for seq := range uint64(batches) {
		res, err := publishSync(t, e, &PublishRequest{Stream: testStream,
			Payloads: payloads(fmt.Sprint("b", seq), perBatch), ProducerID: "p", Sequence: seq})
		if err != nil {
			t.Fatalf("re-send of batch %d: %v", seq, err)
		}
		resent[seq] = res
	}
	got := readShard(t, e, testStream, 0, false)
	count := map[string]int{}
	for _, r := range got {
		count[r]++
	}
	for i := range perBatch {
		if r := fmt.Sprintf("u-%d", i); count[r] != 1 {
			t.Errorf("record %s stored %d times (log: %v)", r, count[r], got)
		}
	}
	for seq := range uint64(batches) {
		for i := range perBatch {
			if r := fmt.Sprintf("b%d-%d", seq, i); count[r] != 1 {
				t.Errorf("record %s stored %d times (log: %v; acked before the kill: %v)", r, count[r], got, acked)
			}
		}
		if a, ok := acked[seq]; ok && (resent[seq].FirstOffset != a.FirstOffset || !resent[seq].Duplicate) {
			t.Errorf("batch %d acked at %d before the kill; its re-send answered %+v", seq, a.FirstOffset, resent[seq])
		}
	}
}

package core

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchCase is one publish → commit → fanout configuration.
type benchCase struct {
	cores   int
	batch   int
	fanout  int
	durable bool
	fsync   FsyncMode
	window  int // publishes in flight per publisher
}

func (c benchCase) name() string {
	kind := "memory"
	if c.durable {
		kind = map[FsyncMode]string{FsyncPeriodic: "periodic", FsyncOnCommit: "on_commit", FsyncNone: "none"}[c.fsync]
	}
	return fmt.Sprintf("%s/cores=%d/batch=%d/fanout=%d/window=%d", kind, c.cores, c.batch, c.fanout, c.window)
}

// BenchmarkPublishFanout measures records delivered per second from
// publishers through the cores to subscribers (256-byte payloads, one shard
// and one publisher per core, Block subscribers so nothing is dropped).
// ns/op is per published batch; records/s counts deliveries (batch × fanout).
func BenchmarkPublishFanout(b *testing.B) {
	var cases []benchCase
	for _, cores := range []int{1, 2} {
		for _, batch := range []int{1, 64} {
			for _, fanout := range []int{1, 10} {
				cases = append(cases, benchCase{cores: cores, batch: batch, fanout: fanout, window: 64})
			}
		}
	}
	for _, fsync := range []FsyncMode{FsyncPeriodic, FsyncOnCommit} {
		for _, batch := range []int{1, 64} {
			cases = append(cases, benchCase{cores: 1, batch: batch, fanout: 1, durable: true, fsync: fsync, window: 64})
		}
	}
	// No subscriber: the durable publish path alone (allocations per batch
	// must be 0 here; with subscribers, 1 per batch for the shared frame).
	cases = append(cases, benchCase{cores: 1, batch: 64, fanout: 0, durable: true, fsync: FsyncPeriodic, window: 64})
	for _, bc := range cases {
		b.Run(bc.name(), func(b *testing.B) { runPublishBench(b, bc) })
	}
}

// BenchmarkPublishLatency is the round trip of one batch at a time:
// publish → commit → ack, with one subscriber receiving it, or none (ns/op).
func BenchmarkPublishLatency(b *testing.B) {
	for _, bc := range []benchCase{
		{cores: 1, batch: 1, fanout: 1, window: 1},
		{cores: 1, batch: 1, fanout: 0, window: 1},
		{cores: 1, batch: 64, fanout: 1, window: 1},
		{cores: 1, batch: 1, fanout: 1, durable: true, fsync: FsyncPeriodic, window: 1},
		{cores: 1, batch: 1, fanout: 1, durable: true, fsync: FsyncOnCommit, window: 1},
	} {
		b.Run(bc.name(), func(b *testing.B) { runPublishBench(b, bc) })
	}
}

func runPublishBench(b *testing.B, bc benchCase) {
	cfg := Config{Cores: bc.cores, NoPinning: runtime.NumCPU() < bc.cores, SubscriberQueueCapacity: 1024, BlockTimeout: time.Minute}
	if bc.durable {
		cfg.DataDir, cfg.Fsync = b.TempDir(), bc.fsync
	}
	e, err := NewEngine(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(context.Background())
	name := StreamName{Tenant: "bench", Namespace: "default", Stream: "s"}
	if err := e.CreateStream(StreamSpec{Name: name, Shards: bc.cores, Durable: bc.durable}); err != nil {
		b.Fatal(err)
	}
	perShard := make([]int, bc.cores) // batches each publisher sends
	for i := range b.N {
		perShard[i%bc.cores]++
	}
	var delivered atomic.Int64
	var readers sync.WaitGroup
	for shard := range bc.cores {
		want := int64(perShard[shard] * bc.batch)
		for range bc.fanout {
			sub, err := e.Subscribe(SubscribeRequest{Stream: name, Shard: shard, Policy: Block, WithOffsets: bc.durable})
			if err != nil {
				b.Fatal(err)
			}
			readers.Add(1)
			go benchConsume(b, sub, want, &delivered, &readers)
		}
	}
	payload := make([]byte, 256)
	b.SetBytes(int64(bc.batch * len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var publishers sync.WaitGroup
	for shard := range bc.cores {
		publishers.Add(1)
		go benchPublish(b, e, name, shard, perShard[shard], bc, payload, &publishers)
	}
	publishers.Wait()
	readers.Wait()
	if bc.fanout == 0 {
		delivered.Store(int64(b.N * bc.batch)) // acknowledged records
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(delivered.Load())/elapsed.Seconds(), "records/s")
	b.ReportMetric(float64(delivered.Load())/elapsed.Seconds()/float64(bc.cores), "records/s/core")
	if bc.durable && bc.fsync == FsyncOnCommit {
		fanIn := 0.0
		_ = e.runOn(e.cores[0], func(c *core) error {
			fanIn = c.disk.(*seglogDisk).disk.Stats().GroupCommitFanIn()
			return nil
		})
		b.ReportMetric(fanIn, "appends/fsync")
	}
}

// benchPublish sends batches to one shard with up to bc.window in flight,
// reusing its requests (no allocation per publish).
func benchPublish(b *testing.B, e *Engine, name StreamName, shard, batches int, bc benchCase, payload []byte, wg *sync.WaitGroup) {
	defer wg.Done()
	free := make(chan *PublishRequest, bc.window)
	dones := map[*PublishRequest]func(PublishResult, error){}
	for range bc.window {
		req := &PublishRequest{Stream: name, Shard: shard, Payloads: make([][]byte, bc.batch)}
		for i := range req.Payloads {
			req.Payloads[i] = payload
		}
		dones[req] = func(_ PublishResult, err error) {
			if err != nil {
				b.Error(err)
			}
			free <- req
		}
		free <- req
	}
	for range batches {
		req := <-free
		for {
			err := e.Publish(req, dones[req])
			if err == nil {
				break
			}
			if !errors.Is(err, ErrOverloaded) {
				b.Error(err)
				return
			}
			runtime.Gosched()
		}
	}
	for range bc.window {
		<-free
	}
}

func benchConsume(b *testing.B, sub *Subscription, want int64, delivered *atomic.Int64, wg *sync.WaitGroup) {
	defer wg.Done()
	defer sub.Close()
	for got := int64(0); got < want; {
		d, err := sub.Next(context.Background())
		if err != nil {
			b.Error(err)
			return
		}
		got += int64(d.Count)
		delivered.Add(int64(d.Count))
	}
}

package groups

import (
	"fmt"
	"testing"
)

// BenchmarkPollAck measures the state machine alone: each op is one round in which every
// consumer polls a batch of 100 and acks it, and the effects are taken and marked
// durable, as the core does. Payloads are not touched here (the core reads them);
// see core/group_ops_test.go for the engine-level figure with 1 KiB records.
func BenchmarkPollAck(b *testing.B) {
	for _, consumers := range []int{1, 4} {
		b.Run(fmt.Sprintf("consumers=%d/batch=100", consumers), func(b *testing.B) {
			benchPollAck(b, consumers, 100)
		})
	}
}

func benchPollAck(b *testing.B, consumers, batch int) {
	s, err := NewShard(Options{}, 0)
	if err != nil {
		b.Fatal(err)
	}
	leases := make([][]Lease, consumers)
	refs := make([]Ref, 0, batch)
	var end uint64
	now := int64(1_000_000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		end += uint64(consumers * batch)
		for c := range leases {
			var err error
			leases[c], _, err = s.Poll(leases[c][:0], PollRequest{Group: "g", Consumer: ConsumerID(c + 1), MaxRecords: batch, NowMillis: now, Window: Window{End: end}})
			if err != nil || len(leases[c]) != batch {
				b.Fatalf("poll: %d leases, %v", len(leases[c]), err)
			}
		}
		for c := range leases {
			refs = refs[:0]
			for _, l := range leases[c] {
				refs = append(refs, Ref{Offset: l.Offset, Delivery: l.Delivery})
			}
			if _, err := s.Ack("g", ConsumerID(c+1), refs, now); err != nil {
				b.Fatal(err)
			}
		}
		fx := s.TakeEffects()
		s.MarkDurable(fx.Token)
		now++
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*consumers*batch)/b.Elapsed().Seconds(), "records/s")
}

package meta

import (
	"fmt"
	"sync"
	"testing"
)

// benchStates caches benchFSM's snapshot bytes per size: building a state
// of 1000 streams applies 9000 entries, restoring it is one pass.
var benchStates sync.Map

// benchState gives a fresh FSM restored from benchFSM(streams)'s snapshot.
func benchState(b *testing.B, streams int) *FSM {
	b.Helper()
	data, ok := benchStates.Load(streams)
	if !ok {
		d, err := benchFSM(b, streams).Snapshot().Encode()
		if err != nil {
			b.Fatal(err)
		}
		benchStates.Store(streams, d)
		data = d
	}
	f := New(Config{})
	if err := f.Restore(data.([]byte)); err != nil {
		b.Fatal(err)
	}
	return f
}

// benchFSM builds a state of 3 brokers, one tenant and namespace, and
// streams streams of 8 shards at replication factor 3 (streams*8
// assignments), each shard with a replica report.
func benchFSM(b *testing.B, streams int) *FSM {
	b.Helper()
	f := New(Config{})
	apply := func(cmd Command) {
		entry, err := f.Propose(cmd, nil)
		if err != nil {
			b.Fatal(err)
		}
		res, err := f.Apply(f.State().Index()+1, entry)
		if err != nil || res.Err != nil {
			b.Fatalf("%s: %v %v", cmd.Kind(), err, res.Err)
		}
	}
	apply(&CreateTenant{TenantID: "t"})
	apply(&CreateNamespace{TenantID: "t", Namespace: "ns"})
	for i := 1; i <= 3; i++ {
		apply(&RegisterBroker{NodeID: fmt.Sprintf("b%d", i), ClientAddr: "c", InternalAddr: "i", MaxLevel: BuildMaxLevel,
			Features: []string{FeatureStreamIncarnations}, AtMs: 1000})
	}
	apply(&FinalizeFeature{Feature: FeatureStreamIncarnations, AtMs: 1000}) // a deleted name may be created again
	for s := 0; s < streams; s++ {
		name := fmt.Sprintf("s%05d", s)
		apply(&CreateStream{TenantID: "t", Namespace: "ns", Stream: name, Shards: 8, ReplicationFactor: 3, Durable: true, AtMs: 1000})
		for sh := uint32(0); sh < 8; sh++ {
			a, _ := f.State().Assignment(ShardRef{Kind: "stream", TenantID: "t", Namespace: "ns", Name: name, Shard: sh})
			apply(&ReplicaReport{ShardRef: a.ShardRef, Leader: a.Leader, Generation: a.Generation,
				Replicas: []ReplicaState{{NodeID: a.Followers[0], DurableOffset: 1}}, AtMs: 1000})
		}
	}
	return f
}

func benchApply(b *testing.B, f *FSM, entries [][]byte) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := f.Apply(f.State().Index()+1, entries[i%len(entries)])
		if err != nil || res.Err != nil {
			b.Fatal(err, res.Err)
		}
	}
}

// BenchmarkApplyReport: one replica_report (the steady write: one row of
// the reports table replaced) against states of 1, 100 and 1000 streams.
func BenchmarkApplyReport(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			f := benchState(b, n)
			a, _ := f.State().Assignment(ShardRef{Kind: "stream", TenantID: "t", Namespace: "ns", Name: "s00000", Shard: 0})
			var entries [][]byte
			for off := uint64(0); off < 64; off++ {
				e, err := f.Propose(&ReplicaReport{ShardRef: a.ShardRef, Leader: a.Leader, Generation: a.Generation,
					Replicas: []ReplicaState{{NodeID: a.Followers[0], DurableOffset: off}}, AtMs: 2000}, nil)
				if err != nil {
					b.Fatal(err)
				}
				entries = append(entries, e)
			}
			benchApply(b, f, entries)
		})
	}
}

// BenchmarkApplyHeartbeat: a broker heartbeat naming two shards'
// generations (the brokers and generations tables).
func BenchmarkApplyHeartbeat(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			f := benchState(b, n)
			e, err := f.Propose(&Heartbeat{NodeID: "b1", AtMs: 2000,
				Generations: map[string]uint64{"stream/t/ns/s00000/0": 0, "stream/t/ns/s00000/1": 0}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchApply(b, f, [][]byte{e})
		})
	}
}

// BenchmarkApplyCreateStream: create_stream of 8 shards at factor 3 (the
// catalog, the assignments and the generations tables, and placement's scan
// of every assignment), then its delete, in turn.
func BenchmarkApplyCreateStream(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			f := benchState(b, n)
			cr, err := f.Propose(&CreateStream{TenantID: "t", Namespace: "ns", Stream: "x", Shards: 8, ReplicationFactor: 3, Durable: true, AtMs: 2000}, nil)
			if err != nil {
				b.Fatal(err)
			}
			del, err := f.Propose(&DeleteStream{TenantID: "t", Namespace: "ns", Stream: "x"}, nil)
			if err != nil {
				b.Fatal(err)
			}
			benchApply(b, f, [][]byte{cr, del})
		})
	}
}

// BenchmarkSnapshot: taking a point-in-time snapshot (O(1) either way).
func BenchmarkSnapshot(b *testing.B) {
	f := benchState(b, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if f.Snapshot().State == nil {
			b.Fatal("nil state")
		}
	}
}

// BenchmarkSnapshotEncode: a snapshot of 1000 streams (8000 assignments and
// reports) encoded to its bytes.
func BenchmarkSnapshotEncode(b *testing.B) {
	sn := benchState(b, 1000).Snapshot()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		data, err := sn.Encode()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(data)))
	}
}

// BenchmarkRestore: the same snapshot's bytes decoded into a new state.
func BenchmarkRestore(b *testing.B) {
	data, err := benchState(b, 1000).Snapshot().Encode()
	if err != nil {
		b.Fatal(err)
	}
	f := New(Config{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := f.Restore(data); err != nil {
			b.Fatal(err)
		}
	}
}

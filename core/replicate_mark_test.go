package core_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"felix/core"
)

// openQuorum opens shard 0 of replStream (durable, Quorum) on a new engine over dir.
func openQuorum(t *testing.T, dir string) *replTestEngine {
	t.Helper()
	e, err := core.NewEngine(core.Config{Cores: 1, DataDir: dir, Fsync: core.FsyncOnCommit})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	spec := core.StreamSpec{Name: replStream, Shards: 1, Durable: true, SyncOnCommit: true, Consistency: core.ConsistencyQuorum}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 0, core.RoleLeader, 1); err != nil {
		t.Fatal(err)
	}
	return &replTestEngine{Engine: e, t: t}
}

func replState(t *testing.T, e *replTestEngine) core.ReplicaState {
	t.Helper()
	st, err := e.ReplicaState(replAddr())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// A Quorum shard that had a replica set attached reopens attached with its release mark
// where the release-mark file says (the attach's, then the close's), not at its
// recovered tail: nothing above it is readable until Release, which hands a live
// subscriber the recovered records; once
// detached, it reopens releasing at its tail (a single node's rule). A damaged file
// reads as never attached.
func TestReopenedQuorumShardHoldsItsRecoveredTail(t *testing.T) {
	dir := t.TempDir()
	ref := core.ShardRef{Kind: core.ShardStream, Name: replStream}
	e := openQuorum(t, dir)
	if err := e.SetReplicated(ref, true); err != nil {
		t.Fatal(err)
	}
	acked := publish(t, e, "a", "b", "c")
	waitUntilState(t, e, func(st core.ReplicaState) bool { return st.Committed == 3 })
	_ = e.Close(context.Background())
	select {
	case err := <-acked:
		if err == nil {
			t.Fatal("acknowledged without a Release")
		}
	default:
	}

	e = openQuorum(t, dir)
	if st := replState(t, e); !st.Replicated || st.Released != 0 || st.Committed != 3 {
		t.Fatalf("reopened: %+v, want attached, released 0, committed 3", st)
	}
	sub, err := e.Subscribe(core.SubscribeRequest{Stream: replStream, Start: core.StartEarliest, WithOffsets: true})
	if err != nil {
		t.Fatal(err)
	}
	now, cancelNow := context.WithCancel(context.Background())
	cancelNow() // Next answers what is queued, without waiting
	if d, err := sub.Next(now); err == nil {
		t.Fatalf("an unreleased recovered record delivered: %+v", d)
	}
	if err := e.Release(replStream, 0, 3); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d, err := sub.Next(ctx); err != nil || d.BaseOffset != 0 || d.Count != 3 {
		t.Fatalf("after Release: %+v %v, want records 0..2", d, err)
	}
	publish(t, e, "d")
	waitUntilState(t, e, func(st core.ReplicaState) bool { return st.Committed == 4 })
	_ = e.Close(context.Background()) // the close records the mark it reached
	e = openQuorum(t, dir)
	if st := replState(t, e); !st.Replicated || st.Released != 3 || st.Committed != 4 {
		t.Fatalf("reopened after a release: %+v, want attached, released 3, committed 4", st)
	}
	if err := e.SetReplicated(ref, false); err != nil {
		t.Fatal(err)
	}
	_ = e.Close(context.Background())
	e = openQuorum(t, dir)
	if st := replState(t, e); st.Replicated || st.Released != 4 {
		t.Fatalf("reopened after detaching: %+v, want detached, released 4", st)
	}
	if err := e.SetReplicated(ref, true); err != nil {
		t.Fatal(err)
	}
	_ = e.Close(context.Background())
	matches := findFiles(t, dir, core.ReleaseMarkFileName)
	if len(matches) != 1 {
		t.Fatalf("release-mark files: %v", matches)
	}
	if err := os.WriteFile(matches[0], []byte("FLRM junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	e = openQuorum(t, dir)
	if st := replState(t, e); st.Replicated || st.Released != 4 {
		t.Fatalf("reopened with a damaged file: %+v, want detached, released 4", st)
	}
}

// waitUntilState polls e's state until cond holds (10 s deadline).
func waitUntilState(t *testing.T, e *replTestEngine, cond func(core.ReplicaState) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(replState(t, e)) {
		if time.Now().After(deadline) {
			t.Fatalf("state never reached: %+v", replState(t, e))
		}
		time.Sleep(time.Millisecond) // polling the core's state
	}
}

// findFiles lists every file named name under dir.
func findFiles(t *testing.T, dir, name string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			out = append(out, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

package core_test

// The per-shard engine API from outside package core, as the broker's
// reconciler uses it: on coretest's manual engine over the production disk
// (recovery through CloseShard and OpenShard), and on a running engine
// (ErrMoved wakes a Next blocked on another goroutine).

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"felix/core"
	"felix/core/coretest"
)

var apiStream = core.StreamName{Tenant: "t1", Namespace: "default", Stream: "orders"}

func TestShardAPIOnTheProductionDisk(t *testing.T) {
	e := coretest.New(t, core.Config{Cores: 2, DataDir: t.TempDir(), Fsync: core.FsyncOnCommit})
	spec := core.StreamSpec{Name: apiStream, Shards: 2, Durable: true}
	ref := core.ShardRef{Kind: core.ShardStream, Name: apiStream, Shard: 1}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 1, core.RoleFollower, 3); err != nil {
		t.Fatal(err)
	}
	publish := func(shard int) error {
		return e.Publish(&core.PublishRequest{Stream: apiStream, Shard: shard, Payloads: [][]byte{[]byte("x")}}, func(core.PublishResult, error) {})
	}
	for shard, what := range []string{"not open here", "a follower"} {
		if err := publish(shard); !errors.Is(err, core.ErrNotHere) {
			t.Fatalf("publish to shard %d (%s): %v", shard, what, err)
		}
	}
	if err := e.SetRole(ref, core.RoleLeader, 4); err != nil {
		t.Fatal(err)
	}
	var acked error = errors.New("no answer")
	if err := e.Publish(&core.PublishRequest{Stream: apiStream, Shard: 1, Payloads: [][]byte{[]byte("a"), []byte("b")}},
		func(_ core.PublishResult, err error) { acked = err }); err != nil {
		t.Fatal(err)
	}
	e.StepUntil(func() bool { return acked == nil })
	if err := e.CloseShard(ref); err != nil {
		t.Fatal(err)
	}
	if got := e.Shards(); len(got) != 0 {
		t.Fatalf("Shards() after CloseShard: %v", got)
	}
	if err := e.OpenShard(core.ShardSpec{Stream: &spec}, 1, core.RoleFollower, 4); err != nil {
		t.Fatal(err)
	}
	info, err := e.StreamInfo(apiStream)
	if err != nil || !reflect.DeepEqual(info.NextOffsets, []uint64{0, 2}) {
		t.Fatalf("after reopening as a follower: %+v, %v", info, err)
	}
	want := []core.ShardState{{Ref: ref, Role: core.RoleFollower, Generation: 4}}
	if got := e.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Shards() = %v, want %v", got, want)
	}
}

func TestMovedWakesABlockedNext(t *testing.T) {
	e, err := core.NewEngine(core.Config{Cores: 1, NoPinning: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	if err := e.CreateStream(core.StreamSpec{Name: apiStream, Shards: 1}); err != nil {
		t.Fatal(err)
	}
	name := core.CacheName{Tenant: "t1", Namespace: "default", Cache: "c"}
	if err := e.CreateCache(core.CacheSpec{Name: name, Shards: 2}); err != nil {
		t.Fatal(err)
	}
	sub, err := e.Subscribe(core.SubscribeRequest{Stream: apiStream})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.CacheWatch(core.CacheWatchRequest{Cache: name, Shard: core.AllCacheShards, Prefix: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ended := make(chan error, 2)
	go func() { _, err := sub.Next(ctx); ended <- err }()
	go func() { _, err := w.Next(ctx); ended <- err }()
	if err := e.SetRole(core.ShardRef{Kind: core.ShardStream, Name: apiStream}, core.RoleFollower, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.CloseShard(core.ShardRef{Kind: core.ShardCache, Name: core.StreamName{Tenant: "t1", Namespace: "default", Stream: "c"}, Shard: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-ended; !errors.Is(err, core.ErrMoved) {
			t.Fatalf("blocked Next ended with %v, want ErrMoved", err)
		}
	}
}

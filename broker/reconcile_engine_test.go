package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"felix/core"
)

func newTestEngine(t *testing.T, dataDir string) *core.Engine {
	t.Helper()
	e, err := core.NewEngine(core.Config{Cores: 2, NoPinning: true, DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// publishTo publishes one record to shard of t/ns/a and waits for its answer.
func publishTo(e *core.Engine, shard int) error {
	done := make(chan error, 1)
	req := &core.PublishRequest{Stream: streamName("t", "ns", "a"), Shard: shard, Payloads: [][]byte{[]byte("x")}, Ack: core.AckOnCommit}
	if err := e.Publish(req, func(_ core.PublishResult, err error) { done <- err }); err != nil {
		return err
	}
	return <-done
}

// The reconciler against a real engine: an ownership table where n1 leads some shards,
// follows one and holds none of the rest opens exactly those, in those roles; moving
// leadership moves the engine's shards, and only a led shard takes publishes.
func TestReconcilerDrivesTheEngine(t *testing.T) {
	cat, owners, _, _ := reconcileFixture(t)
	e := newTestEngine(t, t.TempDir())
	r := NewReconciler(ReconcilerConfig{Node: "n1", Engine: e, Catalog: cat, Owners: owners})
	owners.Replace(Ownership{
		sref("a", 0): {Leader: "n1", ReplicaSet: []string{"n2"}, Generation: 2},
		sref("a", 1): {Leader: "n2", ReplicaSet: []string{"n1"}, Generation: 4},
		sref("a", 2): {Leader: "n2", ReplicaSet: []string{"n3"}},
		cref("c", 0): {Leader: "n3"},
		cref("c", 1): {Leader: "n1", Generation: 1},
	})
	mustReconcile(t, r)
	want := []core.ShardState{{Ref: sref("a", 0), Role: core.RoleLeader, Generation: 2},
		{Ref: sref("a", 1), Role: core.RoleFollower, Generation: 4}, {Ref: cref("c", 1), Role: core.RoleLeader, Generation: 1}}
	if got := e.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("engine shards %+v, want %+v", got, want)
	}
	if err := publishTo(e, 0); err != nil {
		t.Fatalf("publish to the led shard: %v", err)
	}
	for _, shard := range []int{1, 2} {
		if err := publishTo(e, shard); !errors.Is(err, core.ErrNotHere) {
			t.Fatalf("publish to shard %d: %v, want ErrNotHere", shard, err)
		}
	}
	if err := r.Reconcile(); err != nil || !reflect.DeepEqual(e.Shards(), want) {
		t.Fatalf("second pass: %v, shards %+v", err, e.Shards())
	}
	// Leadership of a#1 comes to n1; a#0 and c#1 go elsewhere entirely.
	owners.Replace(Ownership{sref("a", 1): {Leader: "n1", Generation: 5}, sref("a", 0): {Leader: "n2", Generation: 3}})
	mustReconcile(t, r)
	want = []core.ShardState{{Ref: sref("a", 1), Role: core.RoleLeader, Generation: 5}}
	if got := e.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the move: %+v, want %+v", got, want)
	}
	if err := publishTo(e, 1); err != nil {
		t.Fatalf("publish to the promoted shard: %v", err)
	}
}

// A single node's server opens every catalog shard as leader at generation 0, a create
// through the admin API opens the new shards before answering and a delete closes them;
// the ownership table follows the catalog.
func TestSingleNodeServerReconcilesTheCatalog(t *testing.T) {
	srv, stop := startInProcess(t, nil)
	defer stop()
	base := "/v1/tenants/default/namespaces/default/"
	if code, out := adminPost(t, srv, "POST", base+"streams", map[string]any{"stream": "r", "shards": 3}); code != http.StatusCreated {
		t.Fatalf("create stream: %d %s", code, out)
	}
	if code, out := adminPost(t, srv, "POST", base+"caches", map[string]any{"cache": "k", "shards": 2}); code != http.StatusCreated {
		t.Fatalf("create cache: %d %s", code, out)
	}
	if n := len(srv.engine.Shards()); n != 5 {
		t.Fatalf("%d shards open after the creates answered, want 5", n)
	}
	for _, st := range srv.engine.Shards() {
		if st.Role != core.RoleLeader || st.Generation != 0 {
			t.Fatalf("%+v: want leader at generation 0", st)
		}
	}
	ref := core.ShardRef{Kind: core.ShardStream, Name: streamName("default", "default", "r"), Shard: 2}
	waitUntil(t, 10*time.Second, "the ownership table to name the new stream", func() bool {
		a, ok := srv.owners.Lookup(ref)
		return ok && a.Leader == singleNodeID
	})
	if code, out := adminPost(t, srv, "DELETE", base+"streams/r", nil); code != http.StatusNoContent {
		t.Fatalf("delete stream: %d %s", code, out)
	}
	if n := len(srv.engine.Shards()); n != 2 {
		t.Fatalf("%d shards open after the delete answered, want 2 (the cache's)", n)
	}
	waitUntil(t, 10*time.Second, "the ownership table to drop the stream", func() bool {
		_, ok := srv.owners.Lookup(ref)
		return !ok
	})
	if err := srv.reconciler.Reconcile(); err != nil || len(srv.engine.Shards()) != 2 {
		t.Fatalf("a pass after the delete: %v, %d shards", err, len(srv.engine.Shards()))
	}
}

// A stream whose shards cannot open fails its create (here: durable without a data dir,
// ErrInvalid as before), is not in the catalog, and leaves nothing open or registered in
// the engine.
func TestCreateFailsWhenTheShardsCannotOpen(t *testing.T) {
	cat, err := OpenCatalog(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.EnsureNamespace(Namespace{TenantID: "t", Namespace: "ns"}); err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: &Config{}, engine: newTestEngine(t, ""), catalog: cat, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if err := s.openShards(); err != nil {
		t.Fatal(err)
	}
	defer s.stopShards()
	_, err = cat.CreateStream(Stream{TenantID: "t", Namespace: "ns", Stream: "d", Shards: 2, Durable: true}, s.ApplyCreate)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), core.ErrNoDurableStorage.Error()) {
		t.Fatalf("create: %v, want ErrInvalid naming core.ErrNoDurableStorage", err)
	}
	if _, err := cat.Stream("t", "ns", "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the failed stream is in the catalog: %v", err)
	}
	if len(s.engine.Shards()) != 0 || len(s.engine.ListStreams()) != 0 {
		t.Fatalf("left behind: shards %+v streams %+v", s.engine.Shards(), s.engine.ListStreams())
	}
	if _, err := cat.CreateStream(Stream{TenantID: "t", Namespace: "ns", Stream: "d", Shards: 3}, s.ApplyCreate); err != nil {
		t.Fatalf("in-memory stream under the same name: %v", err)
	}
	if n := len(s.engine.Shards()); n != 3 {
		t.Fatalf("%d shards open, want 3", n)
	}
}

// At start the reconciler's first pass reopens every catalog shard as leader at
// generation 0 with its records (the catalog is the authority for names).
func TestRestartReopensTheCatalogShards(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"FELIX_DURABLE_STORAGE_DIR": dir}
	srv, stop := startInProcess(t, env)
	base := "/v1/tenants/default/namespaces/default/"
	if code, out := adminPost(t, srv, "POST", base+"streams", map[string]any{"stream": "r", "shards": 2}); code != http.StatusCreated {
		t.Fatalf("create stream: %d %s", code, out)
	}
	if code, out := adminPost(t, srv, "POST", base+"caches", map[string]any{"cache": "k"}); code != http.StatusCreated {
		t.Fatalf("create cache: %d %s", code, out)
	}
	name := streamName("default", "default", "r")
	done := make(chan error, 1)
	req := &core.PublishRequest{Stream: name, Shard: 1, Payloads: [][]byte{[]byte("a"), []byte("b")}, Ack: core.AckOnCommit}
	if err := srv.engine.Publish(req, func(_ core.PublishResult, err error) { done <- err }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	stop()

	srv, stop = startInProcess(t, env)
	defer stop()
	want := []core.ShardState{{Ref: core.ShardRef{Kind: core.ShardStream, Name: name, Shard: 0}, Role: core.RoleLeader},
		{Ref: core.ShardRef{Kind: core.ShardStream, Name: name, Shard: 1}, Role: core.RoleLeader},
		{Ref: cacheRef(Cache{TenantID: "default", Namespace: "default", Cache: "k"}, 0), Role: core.RoleLeader}}
	if got := srv.engine.Shards(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the restart: %+v, want %+v", got, want)
	}
	info, err := srv.engine.StreamInfo(name)
	if err != nil || info.NextOffsets[1] != 2 || info.NextOffsets[0] != 0 {
		t.Fatalf("records after the restart: %+v %v", info, err)
	}
	if a, ok := srv.owners.Lookup(want[2].Ref); !ok || a.Leader != singleNodeID {
		t.Fatalf("ownership of the cache shard: %+v %v", a, ok)
	}
}

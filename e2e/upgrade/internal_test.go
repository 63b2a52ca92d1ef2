package upgrade

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/cluster/transport"
	"felix/proto"
)

// authorizedForward is the commit that brought kind 22 (AuthorizedForwardPublish) in.
const authorizedForward = "23e1f78"

// storageHello is the commit that brought StorageHello (kinds 32/33) in.
const storageHello = "aa889a8"

// staticCluster starts one broker per build of bs as a static cluster (FELIX_CLUSTER_PEERS
// naming every one of ids, and extra peers that are not brokers of the rig, e.g. a stand-in
// owner), each ready. extra maps a node id to its "internal/client" addresses.
func (r *rig) staticCluster(ctx context.Context, ids []string, bs []build, extra map[string]string) []*brokerProc {
	r.t.Helper()
	var peers []string
	brokers := make([]*brokerProc, len(ids))
	for i, id := range ids {
		brokers[i] = &brokerProc{name: strings.TrimSuffix(id, ".felix"), nodeID: id, addr: freeAddr(r.t), internal: freeAddr(r.t), built: bs[i]}
		peers = append(peers, id+"="+brokers[i].internal+"/"+brokers[i].addr)
	}
	for id, addrs := range extra {
		peers = append(peers, id+"="+addrs)
	}
	for _, b := range brokers {
		spec := r.brokerSpec(b.built, b.name, b.addr, "FELIX_INTERNAL_BIND="+b.internal, "FELIX_NODE_ID="+b.nodeID,
			"FELIX_CLUSTER_PEERS="+strings.Join(peers, ","))
		var err error
		if b.proc, err = r.sup.Start(ctx, spec); err != nil {
			r.t.Fatalf("start %s (%s): %v", b.name, b.built.name, err)
		}
	}
	return brokers
}

// staticOwner is the leader of shard 0 of default/default/stream in a static cluster of ids
// (broker.StaticPlacement: sorted[fnv32a(name) mod n]).
func staticOwner(ids []string, stream string) string {
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, func(a, b string) int { return strings.Compare(strings.ToLower(a), strings.ToLower(b)) })
	h := fnv.New32a()
	h.Write([]byte("default/default/" + stream))
	return sorted[h.Sum32()%uint32(len(sorted))]
}

// streamOwnedBy is the first name "prefix-N" whose shard 0 owner is id.
func streamOwnedBy(ids []string, prefix, id string) string {
	for n := 0; ; n++ {
		if s := fmt.Sprintf("%s-%d", prefix, n); staticOwner(ids, s) == id {
			return s
		}
	}
}

// TestInternalProtocol (seed "Internal protocol: a version bump is a cutover", "A note on
// credentialed forwards"): a static cluster of one broker of each build. A kind neither
// build knows is answered UnsupportedKind by each, on a connection that stays up for the
// next request; the current dialler's StorageHello falls back to Hello when the previous
// release predates it (the old broker's identity then unknown); a publish forwarded in
// each direction is acknowledged by the owner and read back from it.
func TestInternalProtocol(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRig(t)
	old := predates(t, storageHello, "StorageHello (kinds 32/33)")
	ids := []string{"old.felix", "new.felix"}
	brokers := r.staticCluster(ctx, ids, []build{oldBuild, newBuild}, nil)
	pool := probePool(t)
	for _, b := range brokers {
		peer := transport.Peer{NodeID: b.nodeID, Addr: b.internal}
		id := unknownKindKept(ctx, t, pool, peer, b.built.name)
		switch {
		case b.built.name == oldBuild.name && old && !id.IsZero():
			t.Fatalf("%s predates StorageHello but named storage id %s", b.name, id)
		case b.built.name == newBuild.name && id.IsZero():
			t.Fatalf("the current broker named no storage id to StorageHello")
		}
		named := id.String()
		if id.IsZero() {
			named = "unknown (the dialler fell back to Hello)"
		}
		t.Logf("%s (%s): storage id at the handshake: %s", b.name, b.built.name, named)
	}
	for _, dir := range []struct{ via, owner *brokerProc }{{brokers[1], brokers[0]}, {brokers[0], brokers[1]}} {
		stream := streamOwnedBy(ids, "fwd", dir.owner.nodeID)
		for _, b := range brokers {
			r.mustFelix(ctx, b.built, b, "stream", "create", stream)
		}
		out := r.mustFelix(ctx, dir.via.built, dir.via, "pub", stream, "forwarded")
		if !strings.Contains(out, "published 1 record") {
			t.Fatalf("publish through %s (%s) to %s's shard: %q", dir.via.name, dir.via.built.name, dir.owner.name, out)
		}
		got := r.mustFelix(ctx, dir.owner.built, dir.owner, "sub", stream, "--from", "earliest", "--count", "1")
		if got != "forwarded\n" {
			t.Fatalf("%s read from its owner %s: %q", stream, dir.owner.name, got)
		}
		t.Logf("a publish through %s (%s) forwarded to its owner %s (%s): acked and read back", dir.via.name, dir.via.built.name,
			dir.owner.name, dir.owner.built.name)
	}
}

// probePool is a current-build internal transport pool (a self-signed identity), closed at
// cleanup.
func probePool(t *testing.T) *transport.Pool {
	t.Helper()
	creds, err := transport.LoadCredentials("probe.felix", transport.TLSFiles{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := transport.NewPool(creds, transport.PoolOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// unknownKind is a kind number no build allocates (docs/internal-protocol.md, §2).
const unknownKind proto.Kind = 999

// unknownKindKept sends a request of unknownKind to peer twice: each must be answered
// UnsupportedKind naming it, on the same connection (the pool dials no second one). It
// returns the storage identity the peer named at the handshake.
func unknownKindKept(ctx context.Context, t *testing.T, pool *transport.Pool, peer transport.Peer, built string) transport.StorageID {
	t.Helper()
	var id transport.StorageID
	conns := pool.Conns()
	for i := range 2 {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		m, sid, err := pool.RequestWithStorageID(ctx, peer, &proto.Unknown{RawKind: unknownKind, Body: make([]byte, 8)})
		cancel()
		u, ok := m.(*proto.UnsupportedKind)
		if err != nil || !ok || u.RefusedKind != unknownKind {
			t.Fatalf("kind %d to %s (%s), request %d: %v %#v; want UnsupportedKind(%d)", unknownKind, peer.NodeID, built, i+1, err, m, unknownKind)
		}
		id = sid
	}
	if n := pool.Conns(); n != conns+1 {
		t.Fatalf("connections after two unknown kinds to %s: %d, want %d (the stream and connection kept)", peer.NodeID, n, conns+1)
	}
	return id
}

// fakeOwner is a stand-in for an owner whose build predates kind 22 (AuthorizedForwardPublish):
// the current transport with a handler for the legacy ForwardPublish (2) only, so kind 22 is
// answered UnsupportedKind by the dispatcher. It records the kinds it was sent.
type fakeOwner struct {
	mu    sync.Mutex
	kinds []proto.Kind
	next  uint64 // the next offset it acknowledges
}

// serve listens at addr as node id until the test ends.
func (f *fakeOwner) serve(t *testing.T, id, addr string) {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler) // its "internal transport unauthenticated" warning is the setup's
	creds, err := transport.LoadCredentials(id, transport.TLSFiles{}, nil, quiet)
	if err != nil {
		t.Fatal(err)
	}
	l, err := transport.Listen(addr, creds, transport.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	d := transport.NewDispatcher()
	d.Register(proto.KindForwardPublish, func(_ context.Context, _ string, req proto.InternalMessage) proto.InternalMessage {
		m := req.(*proto.ForwardPublish)
		f.mu.Lock()
		defer f.mu.Unlock()
		first := f.next
		f.next += uint64(len(m.Payloads))
		return &proto.ForwardPublishOk{CorrelationID: m.CorrelationID, FirstOffset: first, LastOffset: f.next - 1}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Serve(ctx, func(ctx context.Context, peer string, req proto.InternalMessage) proto.InternalMessage {
			f.mu.Lock()
			f.kinds = append(f.kinds, req.Kind())
			f.mu.Unlock()
			return d.Handle(ctx, peer, req)
		})
	}()
	t.Cleanup(func() { cancel(); l.Close(); <-done })
}

// TestForwarderLegacyResend (seed "A note on credentialed forwards": "The old owner answers
// UnsupportedKind. The forwarder sends the legacy kind once instead, and the publish goes
// through"). The previous release has kind 22 already, so its owner never answers that: the
// owner is a stand-in, the current transport without a handler for 22 (fakeOwner). The
// current broker forwards a publish to it: 22 refused, one legacy 2, acknowledged.
func TestForwarderLegacyResend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := newRig(t)
	if predates(t, authorizedForward, "AuthorizedForwardPublish (22)") {
		t.Logf("%s has no kind 22 either; the stand-in plays it as well as it would", from.tag)
	} else {
		t.Logf("%s answers 22 itself: a stand-in owner without 22 plays a build before it", from.tag)
	}
	ids := []string{"new.felix", "legacy.felix"}
	fake := &fakeOwner{}
	fakeAddr := freeAddr(t)
	fake.serve(t, "legacy.felix", fakeAddr)
	brokers := r.staticCluster(ctx, ids[:1], []build{newBuild}, map[string]string{"legacy.felix": fakeAddr + "/" + freeAddr(t)})
	stream := streamOwnedBy(ids, "legacy", "legacy.felix")
	r.mustFelix(ctx, newBuild, brokers[0], "stream", "create", stream)
	out := r.mustFelix(ctx, newBuild, brokers[0], "pub", stream, "one")
	if !regexp.MustCompile(`published 1 record to \S+ at offset 0`).MatchString(out) {
		t.Fatalf("publish forwarded to the stand-in owner: %q", out)
	}
	fake.mu.Lock()
	kinds := slices.Clone(fake.kinds)
	fake.mu.Unlock()
	if !slices.Equal(kinds, []proto.Kind{proto.KindAuthorizedForwardPublish, proto.KindForwardPublish}) {
		t.Fatalf("kinds the owner was sent: %v, want [%v %v] (22 refused, one legacy re-send)", kinds,
			proto.KindAuthorizedForwardPublish, proto.KindForwardPublish)
	}
	t.Logf("the owner was sent %v: UnsupportedKind to 22, one legacy 2, acknowledged (%q)", kinds, strings.TrimSpace(out))
}

package broker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"felix/core"
	"felix/proto"
)

// movedSubscriber subscribes to shard of stream on srv listing features and returns the
// auth_ok and a reader of the event stream's frames after its hello.
func movedSubscriber(t *testing.T, srv *Server, stream string, shard uint32, features ...string) (*proto.AuthOK, func() (uint16, []byte, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, r := dialStream(ctx, t, srv)
	flags := uint16(0x003F)
	r.send(&proto.Auth{TenantID: "default", ClientFlags: &flags, Features: features})
	ok, isOK := r.next().(*proto.AuthOK)
	if !isOK {
		t.Fatal("auth refused")
	}
	frame := subscribeEvents(ctx, t, conn, r, &proto.Subscribe{TenantID: "default", Namespace: "default", Stream: stream, Shard: &shard})
	return ok, frame
}

// A live subscription whose shard moves (the table names another leader and the shard
// closes here: core.ErrMoved) ends with not_leader naming the new owner: the message for a
// client listing redirects (which auth_ok now lists back), error{code: not_leader}
// otherwise. Fails without route_moved.go: the stream just ends.
func TestLiveSubscriptionMovedEndsNotLeader(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.create(streamsPath, map[string]any{"stream": "s", "shards": 4})
	a, b := c.brokers[0], c.brokers[1]
	shard := shardLedBy(t, a.srv, "s", 4, a.srv.cfg.NodeID)
	ref := core.ShardRef{Kind: core.ShardStream, Name: core.StreamName{Tenant: "default", Namespace: "default", Stream: "s"}, Shard: shard}
	ok, withRedirects := movedSubscriber(t, a.srv, "s", uint32(shard), proto.FeatureErrorCodes, proto.FeatureRedirects)
	if !slices.Contains(ok.Features, proto.FeatureRedirects) {
		t.Fatalf("auth_ok features %v do not list redirects", ok.Features)
	}
	_, plain := movedSubscriber(t, a.srv, "s", uint32(shard), proto.FeatureErrorCodes)
	holdTable(a.srv, func(o Ownership) { o[ref] = Assignment{Leader: b.srv.cfg.NodeID, Generation: 3} })
	if err := a.srv.engine.CloseShard(ref); err != nil {
		t.Fatal(err)
	}
	m := lastJSON(t, withRedirects)
	nl, isNL := m.(*proto.NotLeader)
	if !isNL || nl.Owner.NodeID != b.srv.cfg.NodeID || nl.Owner.Address != b.srv.QUICAddr().String() ||
		nl.Shard != uint32(shard) || nl.Generation != 3 || nl.Stream != "s" {
		t.Fatalf("moved subscription with redirects ended with %#v", m)
	}
	e, isErr := lastJSON(t, plain).(*proto.Error)
	if !isErr || e.Code != proto.CodeNotLeader || !strings.Contains(e.Message, b.srv.QUICAddr().String()) ||
		!strings.Contains(e.Message, "generation 3") {
		t.Fatalf("moved subscription without redirects ended with %#v", e)
	}
}

// lastJSON reads an event stream to its end and returns its JSON frame (the stream
// must carry exactly one, its last).
func lastJSON(t *testing.T, frame func() (uint16, []byte, error)) proto.Message {
	t.Helper()
	var last proto.Message
	for {
		flags, body, err := frame()
		if err != nil {
			if last == nil {
				t.Fatalf("event stream ended (%v) without a JSON frame", err)
			}
			return last
		}
		if flags == 0 {
			if last, err = proto.DecodeMessage(body); err != nil {
				t.Fatal(err)
			}
		}
	}
}

package client

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"felix/proto"
)

// Consumer groups and cache watches through a broker that does not lead the shard, on
// three brokers of a static cluster (issue 19): every group operation of a shard led
// elsewhere is answered not_leader and the SDK follows it to the owner, where the group's
// consumer is one connection (records polled there are acked there; a second poll leases
// nothing more); a watch of a key on a shard led elsewhere is registered at its owner and
// sees a put sent through the dialled broker (forwarded to the same owner).
func TestGroupsAndWatchFollowRedirects(t *testing.T) {
	bs := startStaticCluster(t, 3)
	const shards = 6
	for _, b := range bs {
		if _, err := b.admin().CreateStream(testCtx(t), StreamInfo{Name: "jobs", Shards: shards, Durable: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.admin().CreateCache(testCtx(t), CacheInfo{Name: "cfg", Shards: 4}); err != nil {
			t.Fatal(err)
		}
	}
	c := bs[0].dial(WithConnPool(2))
	ctx := testCtx(t)
	routes, err := c.RouteLookup(ctx, "jobs")
	if err != nil {
		t.Fatal(err)
	}
	subscribeWhenOpen(ctx, t, c, "jobs", SubscribeOptions{Shards: []uint32{0, 1, 2, 3, 4, 5}}).Close() // every shard open
	p, err := c.NewPublisher("jobs", PublisherOptions{Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[uint32]int{}
	for i := range 60 {
		res, err := p.PublishKeyedSync(ctx, fmt.Appendf(nil, "job-%d", i), []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		perShard[res.Shard]++
	}
	p.Close(ctx)
	remote := 0
	for shard := range uint32(shards) {
		recs, err := c.Poll(ctx, "jobs", shard, "g", 1000, time.Second)
		if err != nil || len(recs) != perShard[shard] {
			t.Fatalf("poll shard %d (owner %s): %d records, want %d: %v", shard, routes[shard].Address, len(recs), perShard[shard], err)
		}
		offs := make([]uint64, len(recs))
		for i, r := range recs {
			offs[i] = r.Offset
		}
		if err := c.Ack(ctx, "jobs", shard, "g", offs...); err != nil {
			t.Fatalf("ack shard %d at its owner: %v", shard, err)
		}
		if again, err := c.Poll(ctx, "jobs", shard, "g", 1000, 0); err != nil || len(again) != 0 {
			t.Fatalf("poll shard %d after the ack: %d records, %v", shard, len(again), err)
		}
		if routes[shard].Address != bs[0].info.QUICAddr {
			remote++
		}
	}
	if remote == 0 || metricValue(t, bs[0], "felix_broker_redirects_sent_total") < float64(remote) {
		t.Fatalf("%d shards led elsewhere; the dialled broker redirected %v requests", remote, metricValue(t, bs[0], "felix_broker_redirects_sent_total"))
	}
	watchThroughNonOwner(t, c)
}

// watchThroughNonOwner watches keys of cache cfg through c (each key led by one of the
// three brokers) and puts them through c: every watch sees its put.
func watchThroughNonOwner(t *testing.T, c *Client) {
	t.Helper()
	ctx := testCtx(t)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	watches := map[string]*Watch{}
	for _, k := range keys {
		w, err := c.Watch(ctx, "cfg", k, WatchOptions{})
		for errors.Is(err, ErrNotFound) && ctx.Err() == nil { // the owner has not opened the shard yet
			w, err = c.Watch(ctx, "cfg", k, WatchOptions{})
		}
		if err != nil {
			t.Fatalf("watch %s: %v", k, err)
		}
		defer w.Close(ctx)
		watches[k] = w
	}
	for _, k := range keys {
		if err := c.Put(ctx, "cfg", k, []byte("v-"+k), 0); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
	}
	var got []string
	for _, k := range keys {
		ch, err := watches[k].Next(ctx)
		if err != nil || ch.Key != k || string(ch.Value) != "v-"+k || ch.Op != ChangePut {
			t.Fatalf("watch %s: %+v %v", k, ch, err)
		}
		got = append(got, ch.Key)
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Fatalf("changes %v", got)
	}
}

// Two brokers that name each other for a group's shard: the poll ends with the
// *RedirectError (a loop, errors.Is ErrNotLeader) after following one hop each way.
func TestGroupRedirectLoopRefused(t *testing.T) {
	var addrs [2]string
	var fbs [2]*fakeBroker
	for i := range fbs {
		fbs[i] = startFake(t, func(x *exchange, m proto.Message) {
			if p, ok := m.(*proto.GroupPoll); ok {
				id := p.RequestID
				x.reply(&proto.NotLeader{RequestID: &id, TenantID: p.TenantID, Namespace: p.Namespace, Stream: p.Stream, Shard: p.Shard,
					Owner: proto.Owner{NodeID: "other", Address: addrs[1-i]}, Generation: 3})
			}
		})
		addrs[i] = fbs[i].ln.Addr().String()
	}
	_, err := dialAny(t, fbs[0]).Poll(testCtx(t), "jobs", 2, "g", 1, 0)
	var re *RedirectError
	if !errors.As(err, &re) || !re.Loop || !errors.Is(err, ErrNotLeader) {
		t.Fatalf("poll between two brokers naming each other: %v (%T), want a redirect loop", err, err)
	}
	if a, b := fbs[0].count(proto.TypeGroupPoll), fbs[1].count(proto.TypeGroupPoll); a != 2 || b != 1 {
		t.Fatalf("polls sent: %d and %d, want 2 and 1", a, b)
	}
}

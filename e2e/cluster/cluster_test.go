package cluster

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/client"
	"felix/cluster/meta"
	"felix/core"
)

// snapshotBody is the part of the control plane's GET /v1/snapshot the test reads.
type snapshotBody struct {
	Seq         uint64            `json:"seq"`
	Assignments []meta.Assignment `json:"assignments"`
	Brokers     []meta.Broker     `json:"brokers"`
}

// clusterView is a broker's GET /cluster/ownership (broker.ClusterView's JSON).
type clusterView struct {
	NodeID    string `json:"node_id"`
	Seq       uint64 `json:"seq"`
	Ownership []struct {
		Shard      string   `json:"shard"`
		Leader     string   `json:"leader"`
		ReplicaSet []string `json:"replica_set"`
		Generation uint64   `json:"generation"`
	} `json:"ownership"`
	Open []struct {
		Shard     string `json:"shard"`
		Role      string `json:"role"`
		Committed uint64 `json:"committed"`
		Durable   uint64 `json:"durable_offset"`
	} `json:"open"`
}

// view reads broker b's ownership, after waiting (≤ wait) for its feed to reach minSeq.
func (f *fixture) view(ctx context.Context, b *brokerProc, minSeq uint64, wait time.Duration) clusterView {
	f.t.Helper()
	var v clusterView
	url := fmt.Sprintf("http://%s/cluster/ownership?min_seq=%d&wait=%s", b.addr, minSeq, wait)
	if code, out := call(ctx, f.t, "GET", url, "", nil, &v); code != http.StatusOK {
		f.t.Fatalf("%s: %d %s", url, code, out)
	}
	return v
}

const (
	tenant, namespace = "t1", "n1"
	streamName        = "orders"
	shards            = 3
	perShard          = 20 // records published to each shard's leader
)

// TestClusterModeAcceptance is issue 17's third acceptance bullet with real processes (the
// package doc): registration, a replication-factor-3 stream created through one broker,
// every broker's table equal to the control plane's placement, replication to the
// followers' durable offsets, and the feed lag over ≥ 50 changes.
func TestClusterModeAcceptance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := startControlPlane(ctx, t)
	for i := range 3 {
		f.startBroker(ctx, i)
	}
	var brokers []meta.Broker
	if code, out := call(ctx, t, "GET", f.cpURL+"/v1/brokers", "", nil, &brokers); code != 200 || len(brokers) != 3 {
		t.Fatalf("registered brokers: %d %s", code, out)
	}
	f.checkFeatures(ctx)
	admin := "http://" + f.brokers[0].addr
	for _, p := range []string{"/v1/tenants", "/v1/tenants/" + tenant + "/namespaces"} {
		if code, out := call(ctx, t, "POST", admin+p, "", map[string]any{"tenant_id": tenant, "namespace": namespace}, nil); code != http.StatusCreated {
			t.Fatalf("POST %s through broker 0: %d %s", p, code, out)
		}
	}
	var created meta.Stream
	code, out := call(ctx, t, "POST", admin+"/v1/tenants/"+tenant+"/namespaces/"+namespace+"/streams", "",
		map[string]any{"stream": streamName, "shards": shards, "replication_factor": 3}, &created)
	if code != http.StatusCreated || created.ReplicationFactor != 3 || created.CreatedIndex == 0 {
		t.Fatalf("create the stream through broker 0: %d %s", code, out)
	}
	var snap snapshotBody
	if code, out := call(ctx, t, "GET", f.cpURL+"/v1/snapshot", "", nil, &snap); code != 200 {
		t.Fatalf("snapshot: %d %s", code, out)
	}
	placement := f.checkOwnership(ctx, snap, created.CreatedIndex)
	routing := core.RoutingModulo
	if created.Routing == "jump_hash" {
		routing = core.RoutingJumpHash
	}
	f.publishToLeaders(ctx, snap, placement, routing)
	f.checkReplicated(placement)
	f.measureFeedLag(ctx)
}

// featureView is a row of the control plane's GET /v1/fleet/features.
type featureView struct {
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
}

// checkFeatures waits until the new cluster finalized the features the brokers report
// (jump_hash_routing and group_cursor_dependencies; the control plane retries every
// 500 ms until its member reported its level) and every broker's
// felix_broker_fleet_feature_enabled agrees with GET /v1/fleet/features.
func (f *fixture) checkFeatures(ctx context.Context) {
	f.t.Helper()
	var views []featureView
	waitFor(f.t, 30*time.Second, "the new cluster's features finalized", func() bool {
		call(ctx, f.t, "GET", f.cpURL+"/v1/fleet/features", "", nil, &views)
		return slices.Contains(views, featureView{Name: meta.FeatureJumpHashRouting, Enabled: true})
	})
	for _, b := range f.brokers {
		waitFor(f.t, 30*time.Second, b.id+"'s felix_broker_fleet_feature_enabled equal to the control plane's", func() bool {
			_, text := call(ctx, f.t, "GET", "http://"+b.addr+"/metrics", "", nil, nil)
			for _, v := range views {
				line := fmt.Sprintf("felix_broker_fleet_feature_enabled{feature=%q} %d", v.Name, map[bool]int{true: 1}[v.Enabled])
				if !strings.Contains(text, line+"\n") {
					return false
				}
			}
			return true
		})
	}
}

// checkOwnership waits until every broker's table holds exactly the control plane's
// assignments of the stream, and every broker opened each shard in its role; it returns
// the placement by shard key.
func (f *fixture) checkOwnership(ctx context.Context, snap snapshotBody, minSeq uint64) map[string]meta.Assignment {
	f.t.Helper()
	want := map[string]meta.Assignment{}
	for _, a := range snap.Assignments {
		if a.Name == streamName {
			want[a.Key()] = a
		}
	}
	if len(want) != shards {
		f.t.Fatalf("the control plane placed %d shards, want %d: %+v", len(want), shards, snap.Assignments)
	}
	for _, b := range f.brokers {
		waitFor(f.t, 30*time.Second, b.id+"'s table equal to the placement, every shard open in its role", func() bool {
			v := f.view(ctx, b, minSeq, 10*time.Second)
			return sameOwnership(v, want) && openInRole(v, b.id, want)
		})
	}
	return want
}

func sameOwnership(v clusterView, want map[string]meta.Assignment) bool {
	n := 0
	for _, row := range v.Ownership {
		a, ok := want[row.Shard]
		if !strings.Contains(row.Shard, "/"+streamName+"/") {
			continue
		}
		n++
		if !ok || a.Leader != row.Leader || !slices.Equal(a.Followers, row.ReplicaSet) || a.Generation != row.Generation {
			return false
		}
	}
	return n == len(want)
}

func openInRole(v clusterView, id string, want map[string]meta.Assignment) bool {
	n := 0
	for _, o := range v.Open {
		a, ok := want[o.Shard]
		if !ok {
			continue
		}
		n++
		if role := map[bool]string{true: "leader", false: "follower"}[a.Leader == id]; o.Role != role {
			return false
		}
	}
	return n == len(want)
}

// publishToLeaders publishes perShard keyed records to each shard through its leader
// (keys chosen so the stream's routing sends them to that shard).
func (f *fixture) publishToLeaders(ctx context.Context, snap snapshotBody, placement map[string]meta.Assignment, routing core.Routing) {
	f.t.Helper()
	addr := map[string]string{}
	for _, b := range snap.Brokers {
		addr[b.NodeID] = b.ClientAddr
	}
	for _, a := range placement {
		cl, err := client.Dial(ctx, addr[a.Leader], client.WithFingerprint(f.cert.Fingerprint), client.WithTenant(tenant),
			client.WithNamespace(namespace), client.WithDialTimeout(5*time.Second))
		if err != nil {
			f.t.Fatalf("dial the leader %s of shard %d: %v", a.Leader, a.Shard, err)
		}
		pub, err := cl.NewPublisher(streamName, client.PublisherOptions{})
		if err != nil {
			f.t.Fatal(err)
		}
		sent := 0
		for k := 0; sent < perShard; k++ {
			key := []byte("key-" + strconv.Itoa(k))
			if core.RouteKey(routing, key, shards) != int(a.Shard) {
				continue
			}
			res, err := pub.PublishKeyedSync(ctx, key, []byte(fmt.Sprintf("record %d of shard %d", sent, a.Shard)))
			if err != nil || (res.HasShard && res.Shard != a.Shard) {
				f.t.Fatalf("publish to shard %d through %s: %+v %v", a.Shard, a.Leader, res, err)
			}
			sent++
		}
		_ = pub.Close(ctx)
		_ = cl.Close()
	}
}

// checkReplicated waits until, for every shard, the leader committed every record and each
// follower's durable offset reached the leader's committed offset.
func (f *fixture) checkReplicated(placement map[string]meta.Assignment) {
	f.t.Helper()
	byID := map[string]*brokerProc{}
	for _, b := range f.brokers {
		byID[b.id] = b
	}
	offsets := func(b *brokerProc, shard string) (committed, durable uint64) {
		for _, o := range f.view(context.Background(), b, 0, 0).Open {
			if o.Shard == shard {
				return o.Committed, o.Durable
			}
		}
		return 0, 0
	}
	for key, a := range placement {
		var last string
		defer func() {
			if f.t.Failed() {
				f.t.Logf("%s: last seen %s", key, last)
			}
		}()
		waitFor(f.t, 30*time.Second, "the followers of "+key+" durable at the leader's commit", func() bool {
			committed, _ := offsets(byID[a.Leader], key)
			last = fmt.Sprintf("leader %s committed %d", a.Leader, committed)
			if committed < perShard {
				return false
			}
			for _, fl := range a.Followers {
				if _, durable := offsets(byID[fl], key); durable < committed {
					last += fmt.Sprintf(", %s durable %d", fl, durable)
					return false
				}
			}
			return true
		})
		f.t.Logf("%s: %s; followers %v durable at it", key, last, a.Followers)
	}
}

// measureFeedLag creates changes (streams of replication factor 1) through the control
// plane one at a time; for each, from the control plane's answer until each broker's feed
// reached the change's Raft index (a long poll of its /cluster/ownership). The lag of a
// change is the time until the last of the three brokers has it.
func (f *fixture) measureFeedLag(ctx context.Context) {
	f.t.Helper()
	n := 50
	if v := os.Getenv("FELIX_CLUSTER_FEED_CHANGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			f.t.Fatalf("FELIX_CLUSTER_FEED_CHANGES=%q: want a positive integer", v)
		}
	}
	var all, per []time.Duration
	for k := range n {
		var st meta.Stream
		url := f.cpURL + "/v1/tenants/" + tenant + "/namespaces/" + namespace + "/streams"
		if code, out := call(ctx, f.t, "POST", url, f.token, map[string]any{"stream": fmt.Sprintf("feed-%03d", k)}, &st); code != http.StatusCreated {
			f.t.Fatalf("change %d: %d %s", k, code, out)
		}
		start := time.Now()
		lags := make([]time.Duration, len(f.brokers))
		var wg sync.WaitGroup
		for i, b := range f.brokers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if v := f.view(ctx, b, st.CreatedIndex, 10*time.Second); v.Seq >= st.CreatedIndex {
					lags[i] = time.Since(start)
				} else {
					lags[i] = -1
				}
			}()
		}
		wg.Wait()
		if slices.Contains(lags, -1) {
			f.t.Fatalf("change %d (index %d) did not reach every broker within 10 s: %v", k, st.CreatedIndex, lags)
		}
		all = append(all, slices.Max(lags))
		per = append(per, lags...)
	}
	f.t.Logf("feed lag to all three brokers over %d changes: p50 %v p99 %v max %v; per broker (%d samples): p50 %v p99 %v",
		n, quantile(all, 0.50), quantile(all, 0.99), slices.Max(all), len(per), quantile(per, 0.50), quantile(per, 0.99))
}

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s))*q+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

package broker

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"felix/core"
	"felix/proto"
)

// Under fsync none and under periodic (an hour's interval), followers of a
// Leader-consistency stream still reach a durable_offset at the leader's commit: their
// replicated batches are fdatasynced on demand (seglog.Log.SyncNow), so they acknowledge
// and shipping does not stall at the first batch.
func TestReplicationFollowerSyncsWhateverTheFsyncMode(t *testing.T) {
	for _, mode := range []string{"none", "periodic"} {
		t.Run(mode, func(t *testing.T) {
			c := newReplCluster(t, map[string]string{"FELIX_DURABLE_FSYNC_MODE": mode, "FELIX_DURABLE_FSYNC_INTERVAL_MS": "3600000"})
			events := core.StreamName{Tenant: "default", Namespace: "default", Stream: "events"}
			addr := core.LogAddr{Kind: core.ShardStream, Name: events, Log: proto.LogStream}
			for i := range c.brokers {
				createLeaderStream(t, c.brokers[i].srv, addr)
			}
			for k := range 3 {
				ch := make(chan error, 1)
				req := &core.PublishRequest{Stream: events, Payloads: [][]byte{[]byte(fmt.Sprintf("e%d", k))}, Ack: core.AckOnCommit}
				if err := c.brokers[0].srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
					t.Fatal(err)
				}
				c.acked(ch, "Leader-consistency publish")
			}
			for _, i := range []int{1, 2} {
				srv := c.brokers[i].srv
				// Without the on-demand fdatasync, none never gets there and periodic
				// only after the hour.
				waitUntil(t, 20*time.Second, replNodes[i]+" durable at the leader's commit", func() bool {
					st, err := srv.engine.ReplicaState(addr)
					return err == nil && st.Durable == 3
				})
			}
		})
	}
}

// createLeaderStream creates addr's stream (durable, Leader consistency, one shard) on
// srv and waits until it holds the shard at generation 1.
func createLeaderStream(t *testing.T, srv *Server, addr core.LogAddr) {
	t.Helper()
	st := Stream{TenantID: addr.Name.Tenant, Namespace: addr.Name.Namespace, Stream: addr.Name.Stream, Kind: KindStream,
		Shards: 1, Durable: true, Consistency: ConsistencyLeader, Delivery: DeliveryAtMostOnce, Routing: "modulo"}
	if _, err := srv.catalog.CreateStream(st, srv.ApplyCreate); err != nil && !errors.Is(err, ErrExists) {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "holding "+addr.Name.Stream+" at generation 1", func() bool {
		st, err := srv.engine.ReplicaState(addr)
		return err == nil && st.Generation == 1
	})
}

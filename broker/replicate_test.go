package broker

// Replication end to end in one process (issue 18 item 4): three broker.Servers on
// 127.0.0.1 with FELIX_INTERNAL_BIND and FELIX_NODE_ID, the same Quorum stream created on
// each, and the same fixed placement installed with SetPlacement (leader n1, replica set
// n2 and n3, generation 1). Every wait is bounded; a failure prints every broker's log.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"felix/cluster/transport"
	"felix/core"
	"felix/proto"
	"felix/seglog"
)

var replNodes = []string{"n1.felix.test", "n2.felix.test", "n3.felix.test"}

var replOrders = core.StreamName{Tenant: "default", Namespace: "default", Stream: "orders"}

func replOrdersAddr() core.LogAddr {
	return core.LogAddr{Kind: core.ShardStream, Name: replOrders, Log: proto.LogStream}
}

// replCluster is three brokers sharing one placement.
type replCluster struct {
	t       *testing.T
	dirs    []string
	binds   []string // the internal address each broker keeps across restarts
	brokers []*internalBroker
	logs    []*syncBuffer     // every run's log, kept across restarts
	env     map[string]string // settings over the test defaults
}

// replPlacement leads every shard of every stream from n1 with n2 and n3 as its replica
// set, at generation 1.
func replPlacement(v CatalogView) Ownership {
	out := Ownership{}
	for _, st := range v.Streams("", "") {
		for i := 0; i < int(st.Shards); i++ {
			ref := core.ShardRef{Kind: core.ShardStream, Name: streamName(st.TenantID, st.Namespace, st.Stream), Shard: i}
			out[ref] = Assignment{Leader: replNodes[0], ReplicaSet: replNodes[1:], Generation: 1}
		}
	}
	return out
}

func newReplCluster(t *testing.T, env map[string]string) *replCluster {
	c := &replCluster{t: t, dirs: make([]string, 3), binds: make([]string, 3), brokers: make([]*internalBroker, 3),
		logs: make([]*syncBuffer, 3), env: env}
	t.Cleanup(func() {
		if t.Failed() {
			for i, l := range c.logs {
				t.Logf("---- %s log ----\n%s", replNodes[i], l.String())
			}
		}
	})
	for i := range c.dirs {
		c.dirs[i] = t.TempDir()
		c.binds[i] = "127.0.0.1:0"
		c.logs[i] = &syncBuffer{}
		c.start(i)
		c.binds[i] = c.brokers[i].srv.InternalAddr().String()
	}
	for i := range c.brokers {
		c.place(i)
	}
	return c
}

// start runs broker i on its data dir and internal address and creates the stream on it
// (a no-op when its catalog already holds it).
func (c *replCluster) start(i int) {
	t := c.t
	t.Helper()
	env := map[string]string{"FELIX_QUIC_BIND": "127.0.0.1:0", "FELIX_BROKER_METRICS_BIND": "127.0.0.1:0",
		"FELIX_DURABLE_STORAGE_DIR": filepath.Join(c.dirs[i], "data"), "FELIX_AUTH": "off", "FELIX_CORE_SHARDS": "1",
		"FELIX_DURABLE_SEGMENT_BYTES": "1048576", "FELIX_READY_FILE": filepath.Join(c.dirs[i], "ready.json"),
		"FELIX_INTERNAL_BIND": c.binds[i], "FELIX_NODE_ID": replNodes[i]}
	for k, v := range c.env {
		env[k] = v
	}
	cfg, _, err := LoadConfig(nil, envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(cfg.ReadyFile)
	srv, err := New(cfg, slog.New(slog.NewTextHandler(c.logs[i], nil)))
	if err != nil {
		t.Fatalf("%s: %v", replNodes[i], err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	b := &internalBroker{srv: srv, logs: c.logs[i]}
	var once sync.Once
	b.stop = func() error {
		var runErr error
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(20 * time.Second):
				runErr = errors.New("Run did not return within 20 s")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = b.stop() })
	waitUntil(t, 20*time.Second, "the ready file of "+replNodes[i], func() bool {
		data, err := os.ReadFile(cfg.ReadyFile)
		return err == nil && json.Unmarshal(data, &b.ready) == nil
	})
	c.brokers[i] = b
	st := Stream{TenantID: "default", Namespace: "default", Stream: "orders", Kind: KindStream, Shards: 1, Durable: true,
		Consistency: ConsistencyQuorum, Delivery: DeliveryAtMostOnce, Routing: "modulo"}
	if _, err := srv.catalog.CreateStream(st, srv.ApplyCreate); err != nil && !errors.Is(err, ErrExists) {
		t.Fatalf("%s: create the stream: %v", replNodes[i], err)
	}
}

// place installs the shared placement on broker i and waits for its shard's role.
func (c *replCluster) place(i int) {
	c.t.Helper()
	peers := map[string]string{}
	for j, n := range replNodes {
		peers[n] = c.binds[j]
	}
	srv := c.brokers[i].srv
	srv.SetPlacement(replPlacement, peers)
	want := core.RoleFollower
	if i == 0 {
		want = core.RoleLeader
	}
	waitUntil(c.t, 20*time.Second, replNodes[i]+" holding the shard at generation 1", func() bool {
		for _, st := range srv.engine.Shards() {
			if st.Ref.Name == replOrders && st.Role == want && st.Generation == 1 {
				return true
			}
		}
		return false
	})
}

// restart stops broker i (if running) and starts it again on the same data dir and
// internal address, with the placement.
func (c *replCluster) restart(i int) {
	c.t.Helper()
	if err := c.brokers[i].stop(); err != nil {
		c.t.Fatalf("stop %s: %v", replNodes[i], err)
	}
	c.start(i)
	c.place(i)
}

// publish publishes one record to the leader; the channel carries its answer.
func (c *replCluster) publish(payload string) <-chan error {
	c.t.Helper()
	ch := make(chan error, 1)
	req := &core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte(payload)}, Ack: core.AckOnCommit}
	if err := c.brokers[0].srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
		c.t.Fatal(err)
	}
	return ch
}

// acked waits (bounded) for a publish's answer, which must be a success.
func (c *replCluster) acked(ch <-chan error, what string) {
	c.t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			c.t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s: not acknowledged within 30 s", what)
	}
}

// state is broker i's view of the replicated log.
func (c *replCluster) state(i int) core.ReplicaState {
	st, err := c.brokers[i].srv.engine.ReplicaState(replOrdersAddr())
	if err != nil {
		return core.ReplicaState{}
	}
	return st
}

// rawLog is every record of broker i's log, each in its replicated encoding.
func (c *replCluster) rawLog(i int) [][]byte {
	c.t.Helper()
	return c.rawLogFrom(i, 0)
}

// rawLogFrom is the records of broker i's log from offset from.
func (c *replCluster) rawLogFrom(i int, from uint64) [][]byte {
	c.t.Helper()
	out, err := c.tryRawLog(i, from)
	if err != nil {
		c.t.Fatalf("%s: read: %v", replNodes[i], err)
	}
	return out
}

// identical waits until follower i holds, durably, every record the leader committed,
// record for record and byte for byte (from the later of the two earliest offsets:
// retention runs on each replica), and fails naming the first difference.
func (c *replCluster) identical(i int) {
	c.t.Helper()
	lead := c.state(0).Committed
	var diff string
	deadline := time.Now().Add(30 * time.Second)
	for diff = c.logDiff(i, lead); diff != "" && time.Now().Before(deadline); diff = c.logDiff(i, lead) {
		time.Sleep(time.Millisecond) // polling the logs, as waitUntil does
	}
	if diff != "" {
		c.t.Fatalf("%s not identical to the leader after 30 s: %s", replNodes[i], diff)
	}
}

// logDiff describes how follower i's log differs from the leader's up to lead ("" when
// identical and durable there).
func (c *replCluster) logDiff(i int, lead uint64) string {
	st0, st := c.state(0), c.state(i)
	if st.Durable < lead {
		return fmt.Sprintf("durable at %d, the leader committed %d", st.Durable, lead)
	}
	from := max(st0.Earliest, st.Earliest)
	want, err0 := c.tryRawLog(0, from)
	got, err := c.tryRawLog(i, from)
	switch {
	case err0 != nil || err != nil:
		return fmt.Sprintf("read: %v / %v", err0, err)
	case len(got) != len(want):
		return fmt.Sprintf("%d records from %d, the leader %d", len(got), from, len(want))
	}
	for k := range want {
		if !bytes.Equal(want[k], got[k]) {
			return fmt.Sprintf("record %d differs:\n%x\n%x", from+uint64(k), got[k], want[k])
		}
	}
	return ""
}

// tryRawLog is rawLogFrom returning the read error.
func (c *replCluster) tryRawLog(i int, from uint64) ([][]byte, error) {
	var out [][]byte
	for next := from; ; {
		n := 0
		err := c.brokers[i].srv.engine.ReadReplica(replOrdersAddr(), next, 1<<20, func(r *seglog.Record) bool {
			out = append(out, core.AppendReplicaPayload(nil, r))
			next, n = r.Offset+1, n+1
			return true
		})
		if err != nil || n == 0 {
			return out, err
		}
	}
}

// notReleased checks that the leader committed offset off's record and holds it
// unreleased (unacknowledged): nothing can release it without a follower.
func (c *replCluster) notReleased(ch <-chan error, off uint64) {
	c.t.Helper()
	waitUntil(c.t, 20*time.Second, fmt.Sprintf("the leader durable past %d", off), func() bool {
		return c.state(0).Durable > off
	})
	if st := c.state(0); st.Released > off {
		c.t.Fatalf("released to %d with both followers down", st.Released)
	}
	select {
	case err := <-ch:
		c.t.Fatalf("acknowledged with both followers down: %v", err)
	default:
	}
}

// Quorum acks need a majority; followers hold the leader's log byte for byte; a stopped
// follower catches up from its durable offset once restarted.
func TestReplicationQuorumAcksAndCatchUp(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 5 {
		c.acked(c.publish(fmt.Sprintf("r%d", k)), "publish with all three up")
	}
	c.identical(1)
	c.identical(2)

	if err := c.brokers[2].stop(); err != nil {
		t.Fatal(err)
	}
	c.acked(c.publish("r5"), "publish with n3 stopped")
	if err := c.brokers[1].stop(); err != nil {
		t.Fatal(err)
	}
	held := c.publish("r6")
	c.notReleased(held, 6)

	c.start(1)
	c.place(1)
	c.acked(held, "publish held while both followers were down, once n2 is back")
	c.identical(1)
	c.start(2)
	c.place(2)
	c.acked(c.publish("r7"), "publish with all three back")
	c.identical(1)
	c.identical(2)
	if got := len(c.rawLog(2)); got != 8 {
		t.Fatalf("n3 holds %d records after catching up, want 8", got)
	}
}

// A follower given a batch past its tail answers LogGap with its tail as
// expected_offset. The leader, whose next batch lies past a wiped follower's tail, gets
// that answer on a new connection under the follower's new storage identity: it fences the
// follower again under it (issue 20 gap 4, replicate_identity.go) instead of resuming from
// the gap, and the follower ends identical.
func TestReplicationLogGapResumes(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 3 {
		c.acked(c.publish(fmt.Sprintf("g%d", k)), "publish")
	}
	c.identical(2)

	// A batch past n3's tail, sent as the leader (without mTLS a node id is a claim).
	pool := replPeer(t, replNodes[0])
	rec := seglog.Record{Offset: 10, TimestampMicros: 1, Kind: seglog.KindData, Payload: []byte("x")}
	msg := &proto.ReplicateRecords{Log: proto.LogStream, Shard: wireRef(core.ShardRef{Kind: core.ShardStream, Name: replOrders}),
		Epoch: 1, FirstOffset: 10, Payloads: [][]byte{core.AppendReplicaPayload(nil, &rec)}}
	ctx := testCtx(t)
	ans, err := pool.Request(ctx, transport.Peer{NodeID: replNodes[2], Addr: c.binds[2]}, msg)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ans.(*proto.ReplicateError); !ok || e.Code != proto.InternalLogGap || e.ExpectedOffset != 3 {
		t.Fatalf("batch past the tail answered %#v, want LogGap expected_offset 3", ans)
	}

	// n3 loses everything (a new disk): the leader's next batch lies past its tail.
	c.wipe(2)
	c.acked(c.publish("g3"), "publish after n3 was wiped")
	c.identical(2)
	fresh := hex.EncodeToString(c.brokers[2].srv.storageID[:])
	waitUntil(t, 20*time.Second, "the leader counting n3 under its new storage identity", func() bool {
		_, id, _ := c.leaderHeld(replNodes[2])
		return id == fresh
	})
	if h := halted(t, c.brokers[0]); len(h) != 0 {
		t.Fatalf("halted replicas: %+v", h)
	}
}

// replPeer is a transport Pool dialling as node id id.
func replPeer(t *testing.T, id string) *transport.Pool {
	t.Helper()
	creds, err := transport.LoadCredentials(id, transport.TLSFiles{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := transport.NewPool(creds, transport.PoolOptions{LocalAddr: "127.0.0.1:0", HandshakeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// metricValue is the value of the records log's series name whose labels mention
// follower (0 if absent).
func metricValue(text, name, follower string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, follower) && strings.Contains(line, `log="stream"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				return v
			}
		}
	}
	return 0
}

// halted is GET /replication/halted of b.
func halted(t *testing.T, b *internalBroker) []HaltedReplica {
	t.Helper()
	resp, err := http.Get("http://" + b.srv.HTTPAddr().String() + "/replication/halted")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []HaltedReplica
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("/replication/halted: %v: %s", err, body)
	}
	return out
}

// replRequest sends msg to broker i as node id from and returns the answer.
func (c *replCluster) replRequest(from string, i int, msg proto.InternalMessage) proto.InternalMessage {
	c.t.Helper()
	ans, err := replPeer(c.t, from).Request(testCtx(c.t), transport.Peer{NodeID: replNodes[i], Addr: c.binds[i]}, msg)
	if err != nil {
		c.t.Fatal(err)
	}
	return ans
}

// replBatch is a ReplicateRecords of one data record at off, at epoch.
func replBatch(epoch, off uint64, payload string) *proto.ReplicateRecords {
	rec := seglog.Record{Offset: off, TimestampMicros: 1, Kind: seglog.KindData, Payload: []byte(payload)}
	return &proto.ReplicateRecords{Log: proto.LogStream, Shard: wireRef(core.ShardRef{Kind: core.ShardStream, Name: replOrders}),
		Epoch: epoch, FirstOffset: off, Payloads: [][]byte{core.AppendReplicaPayload(nil, &rec)}}
}

func wantReplicateError(t *testing.T, what string, ans proto.InternalMessage, code proto.InternalCode) {
	t.Helper()
	if e, ok := ans.(*proto.ReplicateError); !ok || e.Code != code {
		t.Fatalf("%s answered %#v, want ReplicateError %v", what, ans, code)
	}
}

// The follower answers the fence's rows (older epoch FencedEpoch, newer StaleRoute, the
// same epoch from another leader FencedEpoch), Malformed for a payload that is not a
// record, UnsupportedKind for a log not replicated yet and FenceOk with its
// durable_offset; a batch that disagrees with stored bytes halts that follower on the
// leader (counted) and the rebuild policy rebuilds it; a follower refusing as outside the
// replica set stays halted, listed by /replication/halted, while the other keeps the
// quorum.
func TestReplicationRefusalsAndHalt(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 2 {
		c.acked(c.publish(fmt.Sprintf("h%d", k)), "publish")
	}
	c.identical(2)
	lead, other := replNodes[0], replNodes[1]
	wantReplicateError(t, "an older epoch", c.replRequest(lead, 2, replBatch(0, 2, "x")), proto.InternalFencedEpoch)
	wantReplicateError(t, "a newer epoch", c.replRequest(lead, 2, replBatch(2, 2, "x")), proto.InternalStaleRoute)
	wantReplicateError(t, "another leader at the epoch", c.replRequest(other, 2, replBatch(1, 2, "x")), proto.InternalFencedEpoch)
	junk := replBatch(1, 2, "x")
	junk.Payloads = [][]byte{[]byte("not a record")}
	wantReplicateError(t, "a payload that is not a record", c.replRequest(lead, 2, junk), proto.InternalMalformed)
	fence := &proto.Fence{Shard: junk.Shard, Log: proto.LogStream, Generation: 1}
	if ans, ok := c.replRequest(lead, 2, fence).(*proto.FenceOk); !ok || ans.DurableOffset != 2 || ans.Generation != 1 {
		t.Fatalf("fence answered %#v, want FenceOk durable_offset 2", ans)
	}
	if got := len(c.rawLog(2)); got != 2 {
		t.Fatalf("n3 holds %d records after the refusals, want 2", got)
	}

	// n3 takes a record at its tail that the leader never wrote: the leader's own record
	// at that offset then conflicts, n3 halts as diverged, and the rebuild policy (a
	// majority without n3 holds the leader's log past its generation start) rebuilds it.
	if ans, ok := c.replRequest(lead, 2, replBatch(1, 2, "not the leader's")).(*proto.ReplicateOk); !ok || ans.DurableOffset != 3 {
		t.Fatalf("a batch at the tail answered %#v, want ReplicateOk durable_offset 3", ans)
	}
	c.acked(c.publish("h2"), "publish while n3 diverges (n2 is the majority)")
	c.identical(2)
	text := c.brokers[0].metricsText(t)
	for _, name := range []string{"felix_replication_conflicts_total", "felix_replication_halts_total"} {
		if metricValue(text, name, replNodes[2]) < 1 {
			t.Fatalf("%s for n3 not counted:\n%s", name, text)
		}
	}
	if !strings.Contains(c.logs[0].String(), "rebuilding a halted follower") {
		t.Fatal("n3 caught up without a rebuild")
	}
	if h := halted(t, c.brokers[0]); len(h) != 0 {
		t.Fatalf("halted after the rebuild: %+v", h)
	}

	// n3's own table no longer names it: it closes the shard and refuses the leader
	// (Unauthorized), a halt no rebuild resolves: listed until the leader stops shipping.
	drop := func(v CatalogView) Ownership {
		out := replPlacement(v)
		for ref, a := range out {
			a.ReplicaSet = []string{replNodes[1]}
			out[ref] = a
		}
		return out
	}
	c.brokers[2].srv.SetPlacement(drop, nil)
	c.acked(c.publish("h3"), "publish while n3 refuses")
	waitUntil(t, 20*time.Second, "n3 listed halted", func() bool {
		h := halted(t, c.brokers[0])
		return len(h) == 1 && h[0].Follower == replNodes[2] && h[0].Reason == "unauthorized" && h[0].Log == "stream" &&
			h[0].Shard == "stream:default/default/orders#0" && h[0].Since != ""
	})
	c.identical(1)
}

// A follower that lost its disk while the leader's retention dropped the head of the log
// is bootstrapped: LogGap to 0, below the leader's earliest offset, so ReplicateBootstrap
// places its log at that offset and shipping resumes from there.
func TestReplicationBootstrapsBelowTheLeadersEarliest(t *testing.T) {
	c := newReplCluster(t, map[string]string{"FELIX_DURABLE_SEGMENT_BYTES": "4096",
		"FELIX_DURABLE_RETENTION_BYTES": "8192", "FELIX_DURABLE_RETENTION_INTERVAL_SECONDS": "1"})
	payload := strings.Repeat("b", 1000)
	for range 4 {
		c.acked(c.publish(payload), "publish")
	}
	c.identical(2)
	if err := c.brokers[2].stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(c.dirs[2], "data")); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		c.acked(c.publish(payload), "publish while n3 is away")
	}
	waitUntil(t, 30*time.Second, "the leader's retention past offset 4", func() bool { return c.state(0).Earliest > 4 })
	c.start(2)
	c.place(2)
	c.acked(c.publish(payload), "publish once n3 is back")
	c.identical(2)
	if st := c.state(2); st.Earliest == 0 || st.Tail != c.state(0).Committed {
		t.Fatalf("n3 after the bootstrap: %+v, leader %+v", st, c.state(0))
	}
	if h := halted(t, c.brokers[0]); len(h) != 0 {
		t.Fatalf("halted replicas: %+v", h)
	}
}

// A leadership change through the table: n2 leads at generation 2 with n1 and n3 as its
// replica set. n1 stops shipping and follows; n2 ships what it holds and acknowledges
// once a majority holds it; all three logs end identical.
func TestReplicationLeaderChange(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 3 {
		c.acked(c.publish(fmt.Sprintf("l%d", k)), "publish to n1")
	}
	c.identical(1)
	peers := map[string]string{}
	for j, n := range replNodes {
		peers[n] = c.binds[j]
	}
	moved := func(v CatalogView) Ownership {
		out := replPlacement(v)
		for ref := range out {
			out[ref] = Assignment{Leader: replNodes[1], ReplicaSet: []string{replNodes[0], replNodes[2]}, Generation: 2}
		}
		return out
	}
	for i, b := range c.brokers {
		b.srv.SetPlacement(moved, peers)
		want := core.RoleFollower
		if i == 1 {
			want = core.RoleLeader
		}
		waitUntil(t, 20*time.Second, replNodes[i]+" at generation 2", func() bool {
			st := c.state(i)
			return st.Role == want && st.Generation == 2
		})
	}
	waitUntil(t, 20*time.Second, "n1's shippers stopped", func() bool {
		c.brokers[0].srv.repl.mu.Lock()
		defer c.brokers[0].srv.repl.mu.Unlock()
		return len(c.brokers[0].srv.repl.leaders) == 0
	})
	ch := make(chan error, 1)
	req := &core.PublishRequest{Stream: replOrders, Payloads: [][]byte{[]byte("on n2")}, Ack: core.AckOnCommit}
	if err := c.brokers[1].srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	c.acked(ch, "publish to n2 at generation 2")
	lead := c.state(1).Committed
	for _, i := range []int{0, 2} {
		waitUntil(t, 30*time.Second, fmt.Sprintf("%s durable at %d", replNodes[i], lead), func() bool { return c.state(i).Durable >= lead })
		want, got := c.rawLog(1), c.rawLog(i)
		if len(got) != len(want) || len(want) != 4 {
			t.Fatalf("%s holds %d records, n2 %d (want 4)", replNodes[i], len(got), len(want))
		}
		for k := range want {
			if !bytes.Equal(want[k], got[k]) {
				t.Fatalf("%s record %d differs from n2's", replNodes[i], k)
			}
		}
	}
}

// A Leader-consistency stream with a replica set is acknowledged at the leader's local
// commit, even with both followers stopped, and still shipped: the followers catch up.
func TestReplicationLeaderConsistencyShips(t *testing.T) {
	c := newReplCluster(t, nil)
	events := core.StreamName{Tenant: "default", Namespace: "default", Stream: "events"}
	addr := core.LogAddr{Kind: core.ShardStream, Name: events, Log: proto.LogStream}
	createEvents := func(i int) {
		srv := c.brokers[i].srv
		st := Stream{TenantID: "default", Namespace: "default", Stream: "events", Kind: KindStream, Shards: 1, Durable: true,
			Consistency: ConsistencyLeader, Delivery: DeliveryAtMostOnce, Routing: "modulo"}
		if _, err := srv.catalog.CreateStream(st, srv.ApplyCreate); err != nil && !errors.Is(err, ErrExists) {
			t.Fatal(err)
		}
		waitUntil(t, 20*time.Second, replNodes[i]+" holding events at generation 1", func() bool {
			st, err := srv.engine.ReplicaState(addr)
			return err == nil && st.Generation == 1
		})
	}
	for i := range c.brokers {
		createEvents(i)
	}
	for _, i := range []int{1, 2} {
		if err := c.brokers[i].stop(); err != nil {
			t.Fatal(err)
		}
	}
	ch := make(chan error, 1)
	req := &core.PublishRequest{Stream: events, Payloads: [][]byte{[]byte("e0"), []byte("e1")}, Ack: core.AckOnCommit}
	if err := c.brokers[0].srv.engine.Publish(req, func(_ core.PublishResult, err error) { ch <- err }); err != nil {
		t.Fatal(err)
	}
	c.acked(ch, "Leader-consistency publish with both followers stopped")
	for _, i := range []int{1, 2} {
		c.start(i)
		c.place(i)
		createEvents(i)
		waitUntil(t, 30*time.Second, replNodes[i]+" caught up on events", func() bool {
			st, err := c.brokers[i].srv.engine.ReplicaState(addr)
			return err == nil && st.Durable == 2
		})
	}
	if logs := c.logs[0].String(); strings.Contains(logs, "release failed") {
		t.Fatalf("the leader released a Leader stream through Release:\n%s", logs)
	}
}

// A table that empties the shard's replica set stops its shippers and detaches it: a
// publish held for the quorum mark is then acknowledged at the local commit.
func TestReplicationReplicaSetRemoved(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("s0"), "publish")
	for _, i := range []int{1, 2} {
		if err := c.brokers[i].stop(); err != nil {
			t.Fatal(err)
		}
	}
	held := c.publish("s1")
	c.notReleased(held, 1)
	alone := func(v CatalogView) Ownership {
		out := replPlacement(v)
		for ref := range out {
			out[ref] = Assignment{Leader: replNodes[0], Generation: 1}
		}
		return out
	}
	c.brokers[0].srv.SetPlacement(alone, nil)
	c.acked(held, "held publish once the replica set is empty")
	if st := c.state(0); st.Released != 2 {
		t.Fatalf("leader after the replica set was removed: %+v", st)
	}
}

// The leader restarts: its shippers fence the followers again and new publishes are
// acknowledged at the majority; the logs stay identical.
func TestReplicationLeaderRestart(t *testing.T) {
	c := newReplCluster(t, nil)
	for k := range 3 {
		c.acked(c.publish(fmt.Sprintf("b%d", k)), "publish before the restart")
	}
	c.identical(1)
	c.identical(2)
	c.restart(0)
	c.acked(c.publish("b3"), "publish after the leader restarted")
	c.identical(1)
	c.identical(2)
	if got := len(c.rawLog(1)); got != 4 {
		t.Fatalf("n2 holds %d records, want 4", got)
	}
}

// A fence at a newer generation is accepted before the reconciler moves the shard: from
// then on the old leader is refused FencedEpoch (its shipper to that follower stops) and
// the new one StaleRoute until the shard is open at its generation.
func TestReplicationFenceAcceptsANewerGeneration(t *testing.T) {
	c := newReplCluster(t, nil)
	c.acked(c.publish("f0"), "publish")
	c.identical(2)
	fence := &proto.Fence{Shard: wireRef(core.ShardRef{Kind: core.ShardStream, Name: replOrders}), Log: proto.LogStream, Generation: 2}
	if ans, ok := c.replRequest(replNodes[1], 2, fence).(*proto.FenceOk); !ok || ans.Generation != 2 || ans.DurableOffset != 1 {
		t.Fatalf("fence at generation 2 answered %#v", ans)
	}
	wantReplicateError(t, "the old leader's batch", c.replRequest(replNodes[0], 2, replBatch(1, 1, "old")), proto.InternalFencedEpoch)
	next := replBatch(2, 0, "new") // the stored record 0 (compared), then a new one at 1
	rec := seglog.Record{Offset: 1, TimestampMicros: 1, Kind: seglog.KindData, Payload: []byte("new")}
	next.Payloads = [][]byte{c.rawLog(0)[0], core.AppendReplicaPayload(nil, &rec)}
	wantReplicateError(t, "the new leader's batch before the move", c.replRequest(replNodes[1], 2, next), proto.InternalStaleRoute)
	c.acked(c.publish("f1"), "publish to the old leader (n2 still follows it)")
	waitUntil(t, 20*time.Second, "n1's shipper to n3 fenced", func() bool {
		return strings.Contains(c.logs[0].String(), "fenced by a follower")
	})
	if st := c.state(2); st.Tail != 1 {
		t.Fatalf("n3 stored past the fence: %+v", st)
	}
	c.identical(1)
}

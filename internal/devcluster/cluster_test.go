package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOneAndOneResumes starts one member and one broker, creates a stream, publishes and
// reads back, stops with SIGTERM (no process left), starts again on the same data dir and
// reads the same records: the same cluster resumed.
func TestOneAndOneResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cfg := testConfig(t, 1, 1)
	c, pids := start(ctx, t, cfg)
	l := c.Layout
	createStream(ctx, t, l, l.Brokers[0], "orders", 1)
	waitDurable(ctx, t, l.Brokers[0], "stream/default/default/orders/0", 0) // open: the broker answers the create before
	publish(ctx, t, dial(ctx, t, l, l.Brokers[0]), "orders", "first", "second")
	readBack(ctx, t, dial(ctx, t, l, l.Brokers[0]), "orders", "first", "second")
	storage, err := os.ReadFile(filepath.Join(l.ControlPlanes[0].Dir, "storage-id"))
	if err != nil {
		t.Fatal(err)
	}
	stopAndCheck(t, c, pids)

	c, pids = start(ctx, t, cfg)
	readBack(ctx, t, dial(ctx, t, l, l.Brokers[0]), "orders", "first", "second")
	if again, err := os.ReadFile(filepath.Join(l.ControlPlanes[0].Dir, "storage-id")); err != nil || string(again) != string(storage) {
		t.Errorf("cp1's storage id after the restart: %q, %v; want %q", again, err, storage)
	}
	stopAndCheck(t, c, pids)
}

// TestThreeAndThree starts three members and three brokers, creates a replication-factor-3
// stream through broker3, publishes through a broker that does not lead the shard (it
// forwards to the leader) and reads back through the other one (it redirects the
// subscription), waits until every replica holds the records durable, and stops
// everything with SIGTERM, leaving no process.
func TestThreeAndThree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, pids := start(ctx, t, testConfig(t, 3, 3))
	l := c.Layout
	createStream(ctx, t, l, l.Brokers[2], "orders", 3)
	leader := leaderOf(ctx, t, l, "orders")
	var others []Node
	for _, b := range l.Brokers {
		if b.Name != leader.Name {
			others = append(others, b)
		}
	}
	waitDurable(ctx, t, leader, "stream/default/default/orders/0", 0) // open: the broker answers the create before
	publish(ctx, t, dial(ctx, t, l, others[0]), "orders", "a", "b", "c")
	readBack(ctx, t, dial(ctx, t, l, others[1]), "orders", "a", "b", "c")
	for _, b := range l.Brokers {
		waitDurable(ctx, t, b, "stream/default/default/orders/0", 3)
	}
	stopAndCheck(t, c, pids)
}

// waitDurable waits (≤ 30 s) until broker b's /cluster/ownership shows shard open with a
// durable_offset of at least n (0: open).
func waitDurable(ctx context.Context, t *testing.T, b Node, shard string, n uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		var v struct {
			Open []struct {
				Shard   string `json:"shard"`
				Durable uint64 `json:"durable_offset"`
			} `json:"open"`
		}
		resp, err := http.Get(b.AdminURL() + "/cluster/ownership?min_seq=0&wait=1s")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
		}
		for _, o := range v.Open {
			if o.Shard == shard && o.Durable >= n {
				return
			}
		}
		last = strings.TrimSpace(strings.Join([]string{errString(err), jsonString(v)}, " "))
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s: %s not durable to %d within 30s; last view %s", b.Name, shard, n, last)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func jsonString(v any) string { data, _ := json.Marshal(v); return string(data) }

// TestStartReportsAChildThatExits gives the brokers a bad setting: Start fails naming
// broker1 with the tail of its log, and the member already started is stopped.
func TestStartReportsAChildThatExits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := testConfig(t, 1, 1)
	cfg.Env = append(cfg.Env, "FELIX_CORE_SHARDS=lots")
	c, err := Start(ctx, cfg)
	var se *StartError
	if !errors.As(err, &se) || se.Node.Name != "broker1" || !strings.Contains(se.Reason, "exited before it was ready") ||
		!strings.Contains(se.Tail, "FELIX_CORE_SHARDS") {
		t.Fatalf("Start: %v, %v; want broker1's StartError with its log's FELIX_CORE_SHARDS line", c, err)
	}
	l, _ := cfg.Layout()
	for _, n := range l.Nodes() {
		if _, err := os.Stat(n.PIDPath); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s's pid file is left: %v", n.Name, err)
		}
	}
	if left, err := ProcessesIn(l.Dir); err != nil || len(left) != 0 {
		t.Errorf("processes left in %s: %v %v", l.Dir, left, err)
	}
	if _, err := Start(ctx, cfg); err == nil || errors.Is(err, ErrBusy) {
		t.Fatalf("second Start after a failure: %v; want the same StartError, not ErrBusy (the lock is released)", err)
	}
}

// TestLayout pins the port layout, the files and the CLI's environment.
func TestLayout(t *testing.T) {
	l, err := Config{Brokers: 2, ControlPlanes: 3, BasePort: 30000, DataDir: "/x/c"}.Layout()
	if err != nil {
		t.Fatal(err)
	}
	cp3, b2 := l.ControlPlanes[2], l.Brokers[1]
	if cp3.Name != "cp3" || cp3.REST != "127.0.0.1:30002" || cp3.Raft != "127.0.0.1:30012" || cp3.Metrics != "127.0.0.1:30022" ||
		cp3.Dir != "/x/c/cp3" || cp3.LogPath != "/x/c/cp3.log" {
		t.Errorf("cp3: %+v", cp3)
	}
	if b2.Name != "broker2" || b2.Client != "127.0.0.1:30101" || b2.Internal != "127.0.0.1:30111" || b2.ReadyURL() != "http://127.0.0.1:30101/ready" {
		t.Errorf("broker2: %+v", b2)
	}
	if l.ReplicationFactor != 2 {
		t.Errorf("default replication factor with 2 brokers: %d, want 2", l.ReplicationFactor)
	}
	env := l.ShellEnv()
	for _, want := range []string{"export FELIX_SERVER='127.0.0.1:30100,127.0.0.1:30101'\n",
		"export FELIX_CONTROLPLANE_URL='http://127.0.0.1:30000,http://127.0.0.1:30001,http://127.0.0.1:30002'\n",
		"export FELIX_TOKEN_FILE='/x/c/broker1/admin.token'\n", "export FELIX_DEV_BROKER2='127.0.0.1:30101'\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("ShellEnv lacks %q:\n%s", want, env)
		}
	}
	if got := strings.Join(l.Env(cp3), " "); !strings.Contains(got, "FELIX_CONTROLPLANE_PEERS=cp1@127.0.0.1:30010,cp2@127.0.0.1:30011,cp3@127.0.0.1:30012") {
		t.Errorf("cp3's env: %s", got)
	}
	if n := len(l.Ports()); n != 3*3+2*2 {
		t.Errorf("%d ports, want 13", n)
	}
	for _, bad := range []Config{{Brokers: 11}, {ControlPlanes: 11}, {Brokers: 2, ReplicationFactor: 3}, {BasePort: 80}, {BasePort: 65500}} {
		if _, err := bad.Layout(); err == nil {
			t.Errorf("Layout(%+v): no error", bad)
		}
	}
}

// TestStartRefusesAPortInUse: a port of the layout held by another process (here broker1's
// client port, UDP) fails Start before any child starts, naming the port.
func TestStartRefusesAPortInUse(t *testing.T) {
	cfg := testConfig(t, 1, 1)
	l, err := cfg.Layout()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", l.Brokers[0].Client)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := Start(context.Background(), cfg)
	if !errors.Is(err, ErrPortInUse) || !strings.Contains(err.Error(), l.Brokers[0].Client) {
		t.Fatalf("Start = %v, %v; want ErrPortInUse naming %s", c, err, l.Brokers[0].Client)
	}
	if _, err := os.Stat(l.ControlPlanes[0].LogPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a child was started: %v", err)
	}
}

package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"felix/client"
	"felix/internal/testmain"
)

// binDir holds felix-broker and felix-controlplane, built once by TestMain.
var binDir string

func TestMain(m *testing.M) {
	if testmain.FuzzOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "felix-devcluster-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "felix/cmd/felix-broker", "felix/cmd/felix-controlplane")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig is a cluster of brokers+members in a temp dir on a free base port.
func testConfig(t *testing.T, brokers, members int) Config {
	t.Helper()
	cfg := Config{Brokers: brokers, ControlPlanes: members, DataDir: filepath.Join(t.TempDir(), "felix-cluster"), BinDir: binDir,
		Env: []string{"FELIX_CORE_SHARDS=1"}, ReadyTimeout: 2 * time.Minute, Log: testLog{t}}
	port, err := FreeBasePort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.BasePort = port
	return cfg
}

// testLog writes Start's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// start starts cfg's cluster and, at cleanup, stops it and prints every log when the test
// failed. It returns the cluster and the pids of its children.
func start(ctx context.Context, t *testing.T, cfg Config) (*Cluster, []int) {
	t.Helper()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Stop()
		if t.Failed() {
			for _, n := range c.Layout.Nodes() {
				t.Logf("--- %s:\n%s", n.LogPath, tail(n.LogPath, 40))
			}
		}
	})
	var pids []int
	for _, n := range c.Layout.Nodes() {
		var pid int
		data, err := os.ReadFile(n.PIDPath)
		if _, serr := fmt.Sscan(string(data), &pid); err != nil || serr != nil {
			t.Fatalf("%s: pid file %s: %v %v", n.Name, n.PIDPath, err, serr)
		}
		pids = append(pids, pid)
	}
	return c, pids
}

// stopAndCheck stops c with SIGTERM and checks that no child is left and none needed SIGKILL.
func stopAndCheck(t *testing.T, c *Cluster, pids []int) {
	t.Helper()
	if err := c.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for i, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) is still there after Stop: %v", c.Layout.Nodes()[i].Name, pid, err)
		}
	}
	if len(c.Running()) != 0 {
		t.Errorf("running after Stop: %v", c.Running())
	}
	if left, err := ProcessesIn(c.Layout.Dir); err != nil || len(left) != 0 {
		t.Errorf("processes left in %s after Stop: %v %v", c.Layout.Dir, left, err)
	}
}

// createStream posts a stream with rf replicas and one shard to broker's admin API with
// the brokers' admin token.
func createStream(ctx context.Context, t *testing.T, l Layout, broker Node, name string, rf int) {
	t.Helper()
	token, err := os.ReadFile(l.AdminTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`{"stream":%q,"shards":1,"replication_factor":%d,"consistency":"Quorum"}`, name, rf)
	req, err := http.NewRequestWithContext(ctx, "POST", broker.AdminURL()+"/v1/tenants/default/namespaces/default/streams", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create %s through %s: %d %s", name, broker.Name, resp.StatusCode, out)
	}
}

// dial connects the SDK to broker with the admin token.
func dial(ctx context.Context, t *testing.T, l Layout, broker Node) *client.Client {
	t.Helper()
	token, err := os.ReadFile(l.AdminTokenFile())
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, broker.Client, client.WithToken(strings.TrimSpace(string(token))), client.WithInsecureSkipVerify(),
		client.WithTenant("default"), client.WithNamespace("default"))
	if err != nil {
		t.Fatalf("dial %s: %v", broker.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// publish publishes payloads to stream through c, each acknowledged.
func publish(ctx context.Context, t *testing.T, c *client.Client, stream string, payloads ...string) {
	t.Helper()
	pub, err := c.NewPublisher(stream, client.PublisherOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close(ctx)
	for _, p := range payloads {
		if _, err := pub.PublishSync(ctx, []byte(p)); err != nil {
			t.Fatalf("publish %q to %s: %v", p, stream, err)
		}
	}
}

// readBack subscribes to stream from the earliest offset through c and checks that the
// first records are want, in order.
func readBack(ctx context.Context, t *testing.T, c *client.Client, stream string, want ...string) {
	t.Helper()
	sub, err := c.Subscribe(ctx, stream, client.Earliest, client.SubscribeOptions{Shards: []uint32{0}})
	if err != nil {
		t.Fatalf("subscribe to %s: %v", stream, err)
	}
	defer sub.Close()
	for i, w := range want {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		r, err := sub.Next(rctx)
		cancel()
		if err != nil || string(r.Payload) != w {
			t.Fatalf("record %d of %s: %q, %v; want %q", i, stream, r.Payload, err, w)
		}
	}
}

// leaderOf is the node that leads shard 0 of stream by the control plane's snapshot.
func leaderOf(ctx context.Context, t *testing.T, l Layout, stream string) Node {
	t.Helper()
	var snap struct {
		Assignments []struct {
			Name   string `json:"name"`
			Leader string `json:"leader"`
		} `json:"assignments"`
	}
	resp, err := http.Get(l.ControlPlaneURLs()[0] + "/v1/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Assignments {
		for _, b := range l.Brokers {
			if a.Name == stream && a.Leader == b.Name {
				return b
			}
		}
	}
	t.Fatalf("no leader of %s in the snapshot %+v", stream, snap)
	return Node{}
}

package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"felix/client"
	"felix/seglog"
)

// The broker half of the tests: a real felix-broker under the supervisor, its data written
// through the SDK, the disk faults applied while it is stopped and their effect observed.

const (
	streamName    = "faults"
	payloadFiller = 300 // bytes per record beyond its "record NNNN " prefix
)

// node is one felix-broker under a supervisor, with what its ready file says.
type node struct {
	p       *Process
	dataDir string
	ready   struct {
		QUICAddr    string `json:"quic_addr"`
		HTTPAddr    string `json:"http_addr"`
		Fingerprint string `json:"fingerprint"`
	}
	token string
}

// brokerSpec runs felix-broker on 127.0.0.1 port 0 with one core, 4 KiB segments (so a few
// records make sealed segments) and its data in dir/data.
func brokerSpec(t *testing.T, dir string) Spec {
	ready := filepath.Join(dir, "ready.json")
	return Spec{Name: "broker", Path: buildBin(t, "./cmd/felix-broker"), Dir: dir,
		Env: []string{"FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
			"FELIX_DURABLE_STORAGE_DIR=" + filepath.Join(dir, "data"), "FELIX_READY_FILE=" + ready,
			"FELIX_LOG_LEVEL=warn", "FELIX_CORE_SHARDS=1", "FELIX_DURABLE_SEGMENT_BYTES=4096",
			"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS=5000"},
		Ready: Ready{File: ready, Timeout: time.Minute}}
}

// attach reads the ready file and the admin token of a ready broker run.
func attach(t *testing.T, p *Process) *node {
	t.Helper()
	n := &node{p: p, dataDir: filepath.Join(p.Spec().Dir, "data")}
	if err := p.ReadyJSON(&n.ready); err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(filepath.Join(n.dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	n.token = strings.TrimSpace(string(tok))
	return n
}

func startBroker(t *testing.T, s *Supervisor) *node {
	t.Helper()
	p, err := s.Start(testCtx(t, 2*time.Minute), brokerSpec(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return attach(t, p)
}

// restart starts the next broker run (same spec) after the previous one exited.
func (n *node) restart(t *testing.T) *node {
	t.Helper()
	p, err := n.p.Restart(testCtx(t, 2*time.Minute), nil)
	if err != nil {
		t.Fatal(err)
	}
	return attach(t, p)
}

// stop SIGTERMs the broker and requires a clean drain (exit 0).
func (n *node) stop(t *testing.T) {
	t.Helper()
	st, err := n.p.Terminate(testCtx(t, time.Minute), 30*time.Second)
	if err != nil || !st.Success() {
		t.Fatalf("broker drain: %v, %v", st, err)
	}
}

func (n *node) dial(ctx context.Context, t *testing.T) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, n.ready.QUICAddr, client.WithFingerprint(n.ready.Fingerprint), client.WithToken(n.token),
		client.WithConnPool(1), client.WithDialTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return c
}

func (n *node) createStream(ctx context.Context, t *testing.T) {
	t.Helper()
	adm, err := client.NewAdmin(n.ready.HTTPAddr, client.AdminToken(n.token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateStream(ctx, client.StreamInfo{Name: streamName, Shards: 1, Durable: true}); err != nil {
		t.Fatalf("create stream: %v", err)
	}
}

func payload(i int) string {
	return fmt.Sprintf("record %04d %s", i, strings.Repeat("x", payloadFiller))
}

// publish writes records [from, from+count) one batch each (so segments roll between them).
func (n *node) publish(ctx context.Context, t *testing.T, from, count int) {
	t.Helper()
	c := n.dial(ctx, t)
	defer c.Close()
	pub, err := c.NewPublisher(streamName, client.PublisherOptions{Linger: -1, Offsets: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+count; i++ {
		if _, err := pub.PublishSync(ctx, []byte(payload(i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// readUntil subscribes from the earliest record and returns the payload prefixes ("record
// NNNN" or the whole payload when shorter) up to and including the first payload equal to
// last. Bounded by ctx.
func (n *node) readUntil(ctx context.Context, t *testing.T, last string) []string {
	t.Helper()
	c := n.dial(ctx, t)
	defer c.Close()
	sub, err := c.Subscribe(ctx, streamName, client.Earliest, client.SubscribeOptions{})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	defer sub.Close()
	var got []string
	for {
		r, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after %d records (last %q): %v", len(got), lastOf(got), err)
		}
		p := string(r.Payload)
		got = append(got, p[:min(len(p), len("record 0000"))])
		if p == last {
			return got
		}
	}
}

func lastOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// shardDir is the record log directory of the test stream's shard 0 (newest incarnation).
func (n *node) shardDir(t *testing.T) string {
	t.Helper()
	base := seglog.ShardDir(n.dataDir, seglog.ShardKey{Kind: seglog.ShardStream, Tenant: "default", Namespace: "default", Name: streamName})
	m, _ := filepath.Glob(base + "*")
	if len(m) != 1 {
		t.Fatalf("shard dirs for %s: %q", base, m)
	}
	return m[0]
}

// prepared is a broker that wrote records 0..count-1 and stopped cleanly.
func prepared(t *testing.T, count int) (*Supervisor, *node) {
	s := NewForTest(t)
	n := startBroker(t, s)
	ctx := testCtx(t, 2*time.Minute)
	n.createStream(ctx, t)
	n.publish(ctx, t, 0, count)
	n.stop(t)
	return s, n
}

// felixCLI runs the felix CLI and returns its combined output and exit code.
func felixCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, buildBin(t, "./cmd/felix"), args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("felix %v: %v", args, err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

func segmentCount(t *testing.T, dir string) int {
	t.Helper()
	segs, err := segments(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(segs)
}

package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// round sets r's round and returns it.
func inRound(r *Result, round int) Result { r.Round = round; return *r }

// ceilingFixture is three rounds of made-up Felix and ceiling figures, peers, and each
// round's disk limits (round 2's not measured: round 1's apply).
func ceilingFixture() ([]Result, []Result, map[string]*Result, Limits) {
	felix := []Result{
		inRound(res("felix", "pubsub-1k", KindPubSub, 200000, 200e6, 0, 0), 1),
		inRound(res("felix", "pubsub-1k", KindPubSub, 100000, 100e6, 0, 0), 2),
		inRound(res("felix", "pubsub-1k", KindPubSub, 150000, 150e6, 0, 0), 3),
		inRound(res("felix", "cache-256-c50", KindCache, 50000, 1, 0, 0), 1),
		inRound(res("felix", "durable-1k-on_commit", KindDurable, 22000, 0, 400*time.Microsecond, 0), 1), // p50 200 µs
		inRound(res("felix", "durable-1k-on_commit-b64", KindDurable, 170000, 0, 0, 0), 1),
		inRound(res("felix", "durable-1k-on_commit-b64", KindDurable, 100000, 0, 0, 0), 3),
	}
	ceil := []Result{
		inRound(res("quic-relay-1k", "pubsub-1k", KindPubSub, 250000, 250e6, 0, 0), 1),
		inRound(res("quic-relay-1k", "pubsub-1k", KindPubSub, 200000, 200e6, 0, 0), 2),
		inRound(res("quic-relay-1k", "pubsub-1k", KindPubSub, 150000, 150e6, 0, 0), 3),
		inRound(res("quic-echo-c50", "cache-256-c50", KindCache, 60000, 1, 0, 0), 1),
		inRound(res("quic-rtt-1k", "durable-1k-on_commit", KindCache, 10000, 0, 180*time.Microsecond, 0), 1), // p50 90 µs
	}
	peers := map[string]*Result{
		"nats-core-1k":      res("nats", "x", KindPubSub, 500000, 500e6, 0, 0),
		"js-always-8pub-1k": res("js", "x", KindDurable, 5000, 0, 0, 0),
	}
	lim := Limits{FdatasyncPerSec: 3125, SyncWriteP50: 100 * time.Microsecond} // group commit 200 k/s
	return felix, ceil, peers, lim
}

func TestJudgeCeilings(t *testing.T) {
	felix, ceil, peers, lim := ceilingFixture()
	rows, ts := judgeCeilings(felix, ceil, peers, []Limits{lim, {Errors: []string{"round 2 not measured"}}, {FdatasyncPerSec: 1562.5}}, 3)
	byLabel := map[string]CeilingRow{}
	for _, r := range rows {
		byLabel[r.Label] = r
	}
	pub := byLabel["pub/sub 1 KiB × 64, fanout 1"]
	// rounds 0.8, 0.5, 1.0: the median is 0.8, each round divides by its own ceiling
	if len(pub.Ratios) != 3 || pub.Ratio != 0.8 || pub.Ratios[1] != 0.5 || pub.PeerIs != "nats-core-1k" || pub.PeerRatio != 0.4 {
		t.Fatalf("pub/sub row %+v", pub)
	}
	if c := byLabel["cache 256 B, 50 clients × 1 in flight"]; len(c.Ratios) != 1 || c.Ratio < 0.833 || c.Ratio > 0.834 {
		t.Fatalf("cache row %+v", c)
	}
	floor := byLabel["durable 1 KiB, 8 sync publishers, on_commit vs the durable floor"]
	if floor.CeilingValue[0] != 190 || floor.Felix[0] != 200 || floor.Ratio != 0.95 {
		t.Fatalf("floor row %+v", floor)
	}
	gc := byLabel["durable 1 KiB, 8 batching publishers × 64 in flight, on_commit vs the group-commit limit"]
	// each round divides by its own disk: 170 k / 200 k in round 1, 100 k / 100 k in round 3
	if len(gc.Ratios) != 2 || gc.Ratios[0] != 0.85 || gc.Ratios[1] != 1 || gc.Ratio != 0.925 || gc.PeerRatio != 34 {
		t.Fatalf("group-commit row %+v", gc)
	}
	got := map[string]Target{}
	for _, tg := range ts {
		got[tg.Name] = tg
	}
	check := func(name string, met bool, has string) {
		t.Helper()
		if tg := got[name]; tg.Met != met || !strings.Contains(tg.Got, has) {
			t.Fatalf("%s: %+v (want met=%v, %q)", name, tg, met, has)
		}
	}
	check("pub/sub 1 KiB vs its QUIC ceiling", true, "0.80 (rounds: 0.80, 0.50, 1.00)")
	check("cache 256 B, 50 clients × 1 vs its QUIC ceiling", true, "0.83")
	check("pub/sub 256 B vs its QUIC ceiling", false, "not measured")
	check("durable 1 KiB, 8 sync publishers, on_commit", true, "p50 1.05 × the floor (200 µs vs 190 µs); 4.4 × JetStream")
	check("durable 1 KiB, batching publishers, on_commit", true, "92.5 % of 150 k records/s; 34.0 × JetStream")
	rep := &CompareReport{Rounds: 3, CeilingRows: rows, Targets22: ts, Limits: lim, Ceilings: ceil, DiskRounds: []Limits{lim, lim}}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, "cmd", "", nil, ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Felix ÷ QUIC ceiling (issue 22)", "in 3 round(s)", "**0.80** (0.80, 0.50, 1.00)", "### Targets (issue 22)",
		"## QUIC ceilings, every round", "| quic-rtt-1k |", "round 3: 100 µs, 200 k records/s"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, md.String())
		}
	}
}

// fakeTool writes a shell script printing lines and returns its path.
func fakeTool(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool")
	script := "#!/bin/sh\n"
	for _, l := range lines {
		script += "echo '" + l + "'\n"
	}
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// A ceiling client whose books do not balance fails the run, as a Felix run does; a
// balanced one reports the server's CPU between its marks and its own CPU.
func TestCeilingClientAccounting(t *testing.T) {
	self := &PeerProc{PID: os.Getpid(), Addr: "127.0.0.1:1", Fingerprint: "00"}
	s := Settings{Duration: time.Second}
	line := `{"system":"quic-echo","shape":{"name":"x","kind":"cache","payload_bytes":256},"sent":10,"delivered":%d,` +
		`"elapsed_ns":1000000000,"records_per_sec":10,"client_cpu_cores":0.5}`
	c := &Ceilings{Bin: fakeTool(t, `{"mark":"start"}`, `{"mark":"end"}`, strings.Replace(line, "%d", "9", 1))}
	_, err := c.Client(context.Background(), "echo", s, self)
	if !errors.Is(err, ErrUnaccounted) {
		t.Fatalf("err = %v, want ErrUnaccounted", err)
	}
	c.Bin = fakeTool(t, `{"mark":"start"}`, `{"mark":"end"}`, strings.Replace(line, "%d", "10", 1))
	r, err := c.Client(context.Background(), "echo", s, self)
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientCPUCores != 0.5 || r.BrokerRSS == 0 || len(r.Warnings) != 1 {
		t.Fatalf("result %+v", r)
	}
	s.RefuseSmall = true
	if _, err := c.Client(context.Background(), "echo", s, self); !errors.Is(err, ErrTooSmall) {
		t.Fatalf("err = %v, want ErrTooSmall", err)
	}
	c.Bin = fakeTool(t, `not json`)
	if _, err := c.Client(context.Background(), "echo", s, self); err == nil || !strings.Contains(err.Error(), "no result line") {
		t.Fatalf("err = %v", err)
	}
}

// TestCeilingsSmall builds felix-ceilings and runs every ceiling at a tiny size.
func TestCeilingsSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds bench/ceilings")
	}
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := BuildCeilings(ctx, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	c := &Ceilings{Bin: bin, WorkDir: dir, Log: &syncWriter{w: &log}}
	rep := &CompareReport{}
	for _, cr := range ceilingRuns {
		cr.args = append(cr.args, "--clients", "4") // the last flag wins: fewer connections
		if cr.mode == "relay" {
			cr.args = cr.args[:len(cr.args)-2]
		}
		rep.runCeiling(ctx, c, Settings{Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond}, cr, 1)
	}
	if len(rep.Failed)+len(rep.Skipped) > 0 {
		t.Fatalf("failed %v skipped %v; servers' log:\n%s", rep.Failed, rep.Skipped, log.String())
	}
	for _, r := range rep.Ceilings {
		if r.Sent <= 0 || r.Sent != r.Delivered || r.Latency.Count == 0 || r.RecordsPerSec <= 0 || r.ClientCPUCores <= 0 || r.BrokerCPUCores <= 0 {
			t.Fatalf("%s: %+v", r.System, r)
		}
		n := int64(r.RecordsPerSec*r.Elapsed.Seconds() + 0.5)
		if small := n*int64(r.Shape.Payload+8) <= QUICSendWindow; small != (len(r.Warnings) == 1) {
			t.Errorf("%s: %d records of %d B, warnings %q: a run within the QUIC send window must warn, only it", r.System, n, r.Shape.Payload, r.Warnings)
		}
	}
}

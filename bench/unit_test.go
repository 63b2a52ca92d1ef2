package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAccount(t *testing.T) {
	if err := Account("s", "sub", 10, 7, 3); err != nil {
		t.Fatalf("balanced: %v", err)
	}
	for _, c := range []struct{ sent, got, dropped int64 }{{10, 9, 0}, {10, 11, 0}, {10, 5, 4}} {
		err := Account("s", "sub 1", c.sent, c.got, c.dropped)
		var ae *AccountingError
		if !errors.Is(err, ErrUnaccounted) || !errors.As(err, &ae) || ae.Sent != c.sent || ae.Delivered != c.got {
			t.Fatalf("%+v: err = %v", c, err)
		}
		if !strings.Contains(err.Error(), "unaccounted") {
			t.Fatalf("message %q", err)
		}
	}
}

func TestLatencySummary(t *testing.T) {
	l := NewLatency()
	for i := 1; i <= 1000; i++ {
		l.Record(time.Duration(i) * time.Microsecond)
	}
	l.Record(-time.Second)    // clamped to 1 ns
	l.Record(2 * time.Minute) // clamped to 60 s
	s := l.Summary()
	if s.Count != 1002 {
		t.Fatalf("count %d", s.Count)
	}
	near := func(got, want time.Duration) bool { return got >= want*99/100 && got <= want*101/100 }
	if !near(s.P50, 500*time.Microsecond) || !near(s.P90, 900*time.Microsecond) || !near(s.P99, 990*time.Microsecond) {
		t.Fatalf("percentiles %+v", s)
	}
	if !near(s.Max, 60*time.Second) {
		t.Fatalf("max %v", s.Max)
	}
	other := NewLatency()
	other.Record(time.Millisecond)
	l.Merge(other)
	if l.Count() != 1003 {
		t.Fatalf("merged count %d", l.Count())
	}
	if (NewLatency().Summary() != Percentiles{}) {
		t.Fatal("empty histogram has percentiles")
	}
}

func TestPercentilesJSON(t *testing.T) {
	p := Percentiles{Count: 3, P50: 125 * time.Microsecond, P90: 200 * time.Microsecond, P99: 240 * time.Microsecond,
		P999: time.Millisecond, Max: 2 * time.Millisecond}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"p99_us":240`)) {
		t.Fatalf("json %s", b)
	}
	var q Percentiles
	if err := json.Unmarshal(b, &q); err != nil || q != p {
		t.Fatalf("round trip %+v, %v", q, err)
	}
}

// A line as felix-peers prints it decodes into a Result.
func TestPeerResultDecodes(t *testing.T) {
	line := `{"system":"redis","shape":{"name":"cache-256-c50","kind":"cache","payload_bytes":256,"clients":50,"in_flight":1},` +
		`"loop":"closed","sent":10,"delivered":10,"dropped":0,"refused":0,"elapsed_ns":1000000000,"records_per_sec":86000,` +
		`"bytes_per_sec":22016000,"latency":{"count":10,"p50_us":300,"p90_us":400,"p99_us":550,"p999_us":700,"max_us":900},` +
		`"latency_from":"send → answer","peer_settings":{"clients":50}}`
	var r Result
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	if r.System != "redis" || r.Shape.Clients != 50 || r.Latency.P99 != 550*time.Microsecond || r.Elapsed != time.Second || r.PeerSettings["clients"] != 50.0 {
		t.Fatalf("%+v", r)
	}
}

func TestPacer(t *testing.T) {
	start := time.Unix(100, 0)
	p := NewPacer(start, 1000) // one ticket per ms
	for i := int64(0); i < 5; i++ {
		n, due := p.Ticket()
		if n != i || !due.Equal(start.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("ticket %d: %d at %v", i, n, due.Sub(start))
		}
	}
}

func TestSweepAndKnee(t *testing.T) {
	rates := SweepRates(8000, 4)
	if len(rates) != 4 || rates[0] != 2000 || rates[3] != 8000 {
		t.Fatalf("rates %v", rates)
	}
	slo := 2 * time.Millisecond
	pts := []PlanPoint{
		{Offered: 6000, Achieved: 5990, P99: 1900 * time.Microsecond},
		{Offered: 2000, Achieved: 2000, P99: 500 * time.Microsecond},
		{Offered: 8000, Achieved: 6000, P99: 1500 * time.Microsecond}, // falling behind: queueing
		{Offered: 7000, Achieved: 7000, P99: 3 * time.Millisecond},    // over the SLO
		{Offered: 9000, Err: "unaccounted"},
	}
	if k := FindKnee(pts, slo); k != 0 {
		t.Fatalf("knee %d", k)
	}
	if k := FindKnee(pts[2:], slo); k != -1 {
		t.Fatalf("knee without an acceptable point: %d", k)
	}
	// A lucky point above a missed one is not the knee.
	noisy := []PlanPoint{{Offered: 1000, Achieved: 1000, P99: time.Millisecond}, {Offered: 3000, Achieved: 3000, P99: time.Second},
		{Offered: 2000, Achieved: 2000, P99: time.Millisecond}, {Offered: 4000, Achieved: 4000, P99: time.Millisecond}}
	if k := FindKnee(noisy, slo); k != 2 {
		t.Fatalf("noisy knee %d, want the 2000/s point", k)
	}
	pl := Plan{Shape: Shape{Name: "pubsub-1k"}, SLOP99: slo, Points: pts, Knee: 0}
	pts[0].CPUCores, pts[0].RSS, pts[0].BytesPS = 1.5, 64<<20, 6e6
	line := pl.SizingLine(Machine{Cores: 2, CPUModel: "test cpu"})
	for _, want := range []string{"6 k records/s", "pubsub-1k", "1.50 cores", "75 %", "64 MiB", "2 cores"} {
		if !strings.Contains(line, want) {
			t.Fatalf("sizing line %q lacks %q", line, want)
		}
	}
	if (Plan{Knee: -1}).SizingLine(Machine{}) != "" {
		t.Fatal("sizing line without a knee")
	}
}

func res(system, shape string, kind Kind, rps, bps float64, p99, p999 time.Duration) *Result {
	return &Result{System: system, Shape: Shape{Name: shape, Kind: kind, Payload: 1024}, RecordsPerSec: rps, BytesPerSec: bps,
		Latency: Percentiles{Count: 1, P50: p99 / 2, P99: p99, P999: p999, Max: p999}}
}

func TestJudgeTargets(t *testing.T) {
	f := map[string]*Result{
		"durable-1k-on_commit": res("felix", "durable-1k-on_commit", KindDurable, 120000, 0, 0, 0),
		"pubsub-latency-256":   res("felix", "pubsub-latency-256", KindPubSub, 1, 1, 200*time.Microsecond, 2*time.Millisecond),
		"pubsub-1k":            res("felix", "pubsub-1k", KindPubSub, 600000, 600e6, 0, 0),
		"pubsub-1k-fanout10":   res("felix", "pubsub-1k-fanout10", KindPubSub, 1300000, 1300e6, 0, 0),
		"cache-256-c50":        res("felix", "cache-256-c50", KindCache, 90000, 1, time.Millisecond, 0),
	}
	p := map[string]*Result{
		"js-always-8pub-1k":   res("js", "durable-1k", KindDurable, 5400, 0, 0, 0),
		"js-default-1pub-256": res("js", "x", KindDurable, 7600, 0, 240*time.Microsecond, 0),
		"nats-core-1k":        res("nats", "x", KindPubSub, 523000, 535e6, 0, 0),
		"js-default-async-1k": res("js", "x", KindDurable, 124000, 127e6, 0, 0),
		"redis-c50":           res("redis", "x", KindCache, 87000, 1, 600*time.Microsecond, 0),
	}
	rows, ts := judge(f, p, Limits{FdatasyncPerSec: 3100})
	got := map[string]Target{}
	for _, tg := range ts {
		got[tg.Name] = tg
	}
	check := func(name string, met bool, has string) {
		t.Helper()
		tg, ok := got[name]
		if !ok {
			t.Fatalf("no target %q in %+v", name, ts)
		}
		if tg.Met != met || !strings.Contains(tg.Got, has) {
			t.Fatalf("%s: met=%v got %q (want met=%v, %q)", name, tg.Met, tg.Got, met, has)
		}
	}
	check("durable publish, on_commit, 1 KiB, 8 publishers", true, "22.2 ×")
	check("durable publish, on_commit, 1 KiB, 8 publishers", true, "60.5 % of the group-commit limit (198 k 1 KiB records/s)")
	check("pub/sub latency, batch 1, 256 B", false, "p99.9 2000 µs") // p99 fine, p99.9 over 1 ms
	check("pub/sub throughput 1 KiB × 64, fanout 1", true, "1.12 × core NATS")
	check("fanout 10", true, "2.17 ×")
	check("cache 256 B, 50 clients, 1 in flight", true, "1.03 ×")
	check("cache 256 B, 50 clients, 16 in flight", false, "not measured")
	if len(rows) < 5 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r.Ratio <= 0 {
			t.Fatalf("row without ratio %+v", r)
		}
	}
}

func TestReportsAndCharts(t *testing.T) {
	dir := t.TempDir()
	f := []Result{*res("felix", "pubsub-1k", KindPubSub, 600000, 600e6, time.Millisecond, 2*time.Millisecond),
		*res("felix", "durable-1k-on_commit", KindDurable, 100000, 100e6, 3*time.Millisecond, 5*time.Millisecond)}
	f[0].Warnings = []string{"small"}
	rep := &CompareReport{Machine: Machine{Cores: 2, CPUModel: "cpu", Date: time.Unix(0, 0)}, Felix: f,
		Peers:   []Result{*res("nats-core", "pubsub-1k", KindPubSub, 500000, 500e6, 2*time.Millisecond, 3*time.Millisecond)},
		Targets: []Target{{Name: "t1", Want: "w", Got: "g", Met: false}}, Skipped: []string{"redis: not installed"},
		Limits: Limits{Dir: "/work", FdatasyncPerSec: 3000, DiskBytesPerSec: 1e9, Errors: []string{"QUIC echo: refused"}}}
	files, err := rep.WriteCharts(dir, ".svg")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 { // two latency charts + throughput
		t.Fatalf("charts %v", files)
	}
	for _, fn := range files {
		st, err := os.Stat(fn)
		if err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", fn, err)
		}
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, "felix-bench compare", "note here", files, "img"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"felix-bench compare", "**missed**", "| felix | pubsub-1k |", "nats-core", "skipped: redis",
		"](img/throughput.svg)", "note here", "| durable-1k-on_commit | 52.1 % of the group-commit limit (192 k 1 KiB records/s); 10.0 % of disk bandwidth (1000.0 MB/s) |",
		"| pubsub-1k | the QUIC echo ceiling not measured |", "Not measured: QUIC echo: refused.", "⚠ small"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, md.String())
		}
	}
	pl := Plan{Shape: Shape{Name: "pubsub-1k"}, SLOP99: 2 * time.Millisecond, Knee: 0,
		Points: []PlanPoint{{Offered: 1000, Achieved: 1000, P50: time.Millisecond, P99: time.Millisecond, P999: time.Millisecond},
			{Offered: 2000, Err: "boom"}}}
	png := filepath.Join(dir, "plan.png")
	if err := PlanChart(pl, png); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(png); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("plan chart: %v", err)
	}
}

func TestJSONLine(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSONLine(&b, "result", Result{System: "felix"}); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil || m["type"] != "result" || m["system"] != "felix" {
		t.Fatalf("%s: %v", b.String(), err)
	}
	if !strings.HasSuffix(b.String(), "}\n") {
		t.Fatalf("not one line: %q", b.String())
	}
}

func TestMachineAndProc(t *testing.T) {
	root, err := RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	m := ReadMachine(root)
	if m.Cores < 1 || m.GoVersion == "" || m.Kernel == "unknown" {
		t.Fatalf("%+v", m)
	}
	u, err := ReadProcUsage(os.Getpid())
	if err != nil || u.RSS <= 0 {
		t.Fatalf("%+v %v", u, err)
	}
	if _, err := ReadProcUsage(-1); err == nil {
		t.Fatal("no error for a missing process")
	}
}

func TestShapes(t *testing.T) {
	for _, n := range ShapeNames() {
		s, err := ShapeByName(n)
		if err != nil || s.Name != n || s.FsyncMode == "" {
			t.Fatalf("%s: %+v %v", n, s, err)
		}
	}
	if _, err := ShapeByName("nope"); !errors.Is(err, ErrUnknownShape) {
		t.Fatalf("err = %v", err)
	}
	for _, n := range CompareShapes {
		if _, err := ShapeByName(n); err != nil {
			t.Fatal(err)
		}
	}
}

// The harness's own per-record work must not allocate (it shares the cores with the broker).
func BenchmarkLatencyRecord(b *testing.B) {
	l := NewLatency()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Record(time.Duration(i&0xffff) * time.Microsecond)
	}
}

func BenchmarkPacerTicket(b *testing.B) {
	p := NewPacer(time.Now(), 1e6)
	b.ReportAllocs()
	for b.Loop() {
		p.Ticket()
	}
}

func TestHotPathsDoNotAllocate(t *testing.T) {
	l := NewLatency()
	p := NewPacer(time.Now(), 1e6)
	if n := testing.AllocsPerRun(1000, func() { l.Record(time.Millisecond); p.Ticket() }); n != 0 {
		t.Fatalf("%v allocations per record", n)
	}
}

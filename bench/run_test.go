package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"felix/internal/testmain"
)

// The workload tests run every built-in shape at its small size against a real broker
// built from ./cmd/felix-broker, so the harness cannot rot.

var (
	testBin      string
	testBuildErr error
)

func TestMain(m *testing.M) {
	if testmain.FuzzOnly() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "felix-bench-test")
	if err != nil {
		panic(err)
	}
	root, err := RepoRoot(".")
	if err == nil {
		testBin, err = BuildBroker(context.Background(), root, dir)
	}
	testBuildErr = err
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func testRunner(t *testing.T) *Runner {
	t.Helper()
	if testBuildErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(testBuildErr)
		}
		t.Skipf("broker does not build: %v", testBuildErr)
	}
	r := &Runner{Binary: testBin, WorkDir: t.TempDir(), Cores: 1}
	t.Cleanup(r.Close)
	return r
}

// small is the go test size: short phases, a fraction of the preloads, and the send-window
// check reduced to a warning.
var small = Settings{Warmup: 100 * time.Millisecond, Duration: 400 * time.Millisecond, Scale: 200, Drain: 20 * time.Second,
	MinBytes: 1 << 40} // no small run moves 1 TiB: each must carry the send-window warning

func TestEveryShapeSmall(t *testing.T) {
	r := testRunner(t)
	names := ShapeNames()
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			sh, err := ShapeByName(name)
			if err != nil {
				t.Fatal(err)
			}
			shrink(&sh)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := r.Run(ctx, sh, small)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res)
		})
	}
}

// shrink lowers client counts so the race detector's slowdown stays in bounds.
func shrink(sh *Shape) {
	if sh.Clients > 4 {
		sh.Clients = 4
	}
	if sh.InFlight > 2 {
		sh.InFlight = 2
	}
	if sh.Fanout > 3 {
		sh.Fanout = 3
	}
	if sh.Publishers > 2 {
		sh.Publishers = 2
	}
}

func checkResult(t *testing.T, res Result) {
	t.Helper()
	if res.Sent <= 0 {
		t.Fatalf("nothing sent: %+v", res)
	}
	if res.Delivered <= 0 {
		t.Fatalf("nothing delivered: %+v", res)
	}
	if res.Shape.Kind != KindReplay && res.Latency.Count == 0 {
		t.Fatalf("no latency recorded: %+v", res)
	}
	// The rate counts what arrived inside the measured phase: at 0.4 s phases on a loaded
	// machine every delivery can trail the phase's end (p50 1.3 s seen at load 28), so a
	// zero rate is not a failure; a rate above what was delivered, or none where the whole
	// run is the phase (group, replay), is.
	whole := res.Shape.Kind == KindGroup || res.Shape.Kind == KindReplay
	if res.RecordsPerSec < 0 || res.RecordsPerSec*res.Elapsed.Seconds() > float64(res.Delivered)+0.5 || whole && res.RecordsPerSec <= 0 {
		t.Fatalf("throughput %v/s over %v does not fit %d delivered: %+v", res.RecordsPerSec, res.Elapsed, res.Delivered, res)
	}
	if len(res.Warnings) == 0 {
		t.Errorf("a run this small must warn about the QUIC send window")
	}
}

func TestOpenLoopPubSub(t *testing.T) {
	r := testRunner(t)
	sh, _ := ShapeByName("pubsub-latency-256")
	s := small
	s.Rate = 2000
	res, err := r.Run(context.Background(), sh, s)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	if res.Loop != "open" || res.OfferedRate != 2000 {
		t.Fatalf("loop %q rate %v", res.Loop, res.OfferedRate)
	}
	// 0.5 s at 2000/s offers about 1000 records (warm-up included), never many more.
	if res.Sent > 1100 {
		t.Fatalf("open loop sent %d records, more than offered", res.Sent)
	}
}

func TestRefuseSmallRun(t *testing.T) {
	r := testRunner(t)
	sh, _ := ShapeByName("counter-c16")
	shrink(&sh)
	s := small
	s.RefuseSmall = true
	_, err := r.Run(context.Background(), sh, s)
	if !errors.Is(err, ErrTooSmall) {
		t.Fatalf("err = %v, want ErrTooSmall", err)
	}
}

func TestBrokerStartFailure(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "no-such-broker")
	_, err := StartBroker(context.Background(), BrokerOptions{Binary: bin, DataDir: filepath.Join(t.TempDir(), "d")})
	if !errors.Is(err, ErrBroker) {
		t.Fatalf("err = %v, want ErrBroker", err)
	}
}

func TestPlanSmall(t *testing.T) {
	r := testRunner(t)
	sh, _ := ShapeByName("pubsub-1k")
	var seen int
	pl, err := RunPlan(context.Background(), r, PlanOptions{Shape: sh, SLOP99: 30 * time.Second, Steps: 2, Step: small,
		OnPoint: func(PlanPoint) { seen++ }})
	if err != nil {
		t.Fatalf("%v; points %+v", err, pl.Points)
	}
	if pl.ClosedMax <= 0 || len(pl.Points) < 2 || seen != len(pl.Points) {
		t.Fatalf("plan %+v (seen %d)", pl, seen)
	}
	if pl.Knee < 0 || !pl.Points[pl.Knee].WithinSLO {
		t.Fatalf("no knee under a 30 s SLO: %+v", pl.Points)
	}
	for i := 1; i < len(pl.Points); i++ {
		if pl.Points[i].Offered < pl.Points[i-1].Offered {
			t.Fatalf("points not in rate order: %+v", pl.Points)
		}
	}
	if pl.SizingLine(ReadMachine(".")) == "" {
		t.Fatal("no sizing line")
	}
}

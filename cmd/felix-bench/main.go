// Command felix-bench runs Felix's benchmark harness (package bench; issue 10): workloads
// against a felix-broker it starts itself, the peers side by side (compare), and capacity
// planning (plan). docs/benchmarks-harness.md is the guide.
//
//	felix-bench run --shapes pubsub-1k,cache-256-c50 [--rate 50000] [--json out.jsonl] [--charts dir]
//	felix-bench plan --shape pubsub-1k --slo-p99 2ms
//	felix-bench compare --out docs/bench/harness.md --img docs/bench/img
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"felix/bench"
	"felix/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "felix-bench:", err)
		os.Exit(1)
	}
}

// globals are the flags every subcommand shares.
type globals struct {
	brokerBin string
	workDir   string
	cores     int
	jsonOut   string
	verbose   bool
	warmup    time.Duration
	duration  time.Duration
	drain     time.Duration
	refuse    bool
	fsync     string
}

func root() *cobra.Command {
	g := &globals{}
	cmd := &cobra.Command{
		Use:           "felix-bench",
		Short:         "Felix benchmark harness: workloads, peers side by side, capacity planning",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Get().Line("felix-bench"), // --version
	}
	cmd.SetVersionTemplate("{{.Version}}\n")
	pf := cmd.PersistentFlags()
	pf.StringVar(&g.brokerBin, "broker-bin", "", "felix-broker binary (default: go build ./cmd/felix-broker into the work dir)")
	pf.StringVar(&g.workDir, "work-dir", "", "scratch directory for brokers' data (default: a temp dir, removed at exit)")
	pf.IntVar(&g.cores, "cores", 0, "broker engine cores, FELIX_CORE_SHARDS (0 = one per CPU)")
	pf.StringVar(&g.jsonOut, "json", "", "write JSON lines (machine facts, every setting, every result) to this file")
	pf.BoolVar(&g.verbose, "verbose", false, "show the brokers' and peers' output on stderr")
	pf.DurationVar(&g.warmup, "warmup", time.Second, "warm-up before each measured phase (excluded)")
	pf.DurationVar(&g.duration, "duration", 5*time.Second, "measured phase of each run")
	pf.DurationVar(&g.drain, "drain", 20*time.Second, "how long deliveries may trail the last send before a run fails as unaccounted")
	pf.BoolVar(&g.refuse, "refuse-small", false, "fail a run that moves no more than the QUIC send window (default: warn)")
	pf.StringVar(&g.fsync, "fsync", "", "override the shapes' broker fsync mode: on_commit, periodic or none (run, plan)")
	cmd.AddCommand(runCmd(g), planCmd(g), compareCmd(g), shapesCmd())
	return cmd
}

// shape returns the named shape with the --fsync override applied.
func (g *globals) shape(name string) (bench.Shape, error) {
	s, err := bench.ShapeByName(strings.TrimSpace(name))
	if err != nil {
		return s, err
	}
	switch g.fsync {
	case "":
	case "on_commit", "periodic", "none":
		s.FsyncMode = g.fsync
	default:
		return s, fmt.Errorf("--fsync %q: want on_commit, periodic or none", g.fsync)
	}
	return s, nil
}

func (g *globals) settings(rate float64) bench.Settings {
	return bench.Settings{Warmup: g.warmup, Duration: g.duration, Drain: g.drain, Rate: rate, Scale: 1, RefuseSmall: g.refuse}
}

// env is what a subcommand works with: the repository, a runner, the JSON sink.
type env struct {
	root    string
	work    string
	runner  *bench.Runner
	machine bench.Machine
	jsonW   io.Writer
	cleanup []func()
}

func (e *env) close() {
	for i := len(e.cleanup) - 1; i >= 0; i-- {
		e.cleanup[i]()
	}
}

func (g *globals) setup(ctx context.Context) (*env, error) {
	root, err := bench.RepoRoot(".")
	if err != nil {
		return nil, err
	}
	e := &env{root: root, jsonW: io.Discard}
	e.work = g.workDir
	if e.work == "" {
		if e.work, err = os.MkdirTemp("", "felix-bench"); err != nil {
			return nil, err
		}
		dir := e.work
		e.cleanup = append(e.cleanup, func() { os.RemoveAll(dir) })
	} else if err := os.MkdirAll(e.work, 0o755); err != nil {
		return nil, err
	}
	bin := g.brokerBin
	if bin == "" {
		fmt.Fprintln(os.Stderr, "building felix-broker ...")
		if bin, err = bench.BuildBroker(ctx, root, e.work); err != nil {
			e.close()
			return nil, err
		}
	}
	e.runner = &bench.Runner{Binary: bin, WorkDir: e.work, Cores: g.cores}
	if g.verbose {
		e.runner.BrokerLog = os.Stderr
	}
	e.cleanup = append(e.cleanup, e.runner.Close)
	e.machine = bench.ReadMachine(root)
	if g.jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(g.jsonOut), 0o755); err != nil {
			e.close()
			return nil, err
		}
		f, err := os.Create(g.jsonOut)
		if err != nil {
			e.close()
			return nil, err
		}
		e.jsonW = f
		e.cleanup = append(e.cleanup, func() { f.Close() })
	}
	if err := bench.WriteJSONLine(e.jsonW, "", e.machine); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// bar is a progress bar on stderr, only when stderr is a terminal.
type bar struct{ pb *progressbar.ProgressBar }

func newBar(desc string) *bar {
	fi, err := os.Stderr.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &bar{}
	}
	return &bar{pb: progressbar.NewOptions(1000, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription(desc),
		progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))}
}

func (b *bar) describe(s string) {
	if b.pb != nil {
		b.pb.Describe(s)
	}
}

func (b *bar) set(frac float64) {
	if b.pb != nil {
		_ = b.pb.Set(int(frac * 1000))
	}
}

func (b *bar) finish() {
	if b.pb != nil {
		_ = b.pb.Finish()
	}
}

func shapesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "shapes",
		Short: "list the built-in shapes",
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, n := range bench.ShapeNames() {
				s, _ := bench.ShapeByName(n)
				fmt.Fprintf(cmd.OutOrStdout(), "%-22s %-8s %6d B  %s (fsync %s)\n", n, s.Kind, s.Payload, s.Note, s.FsyncMode)
			}
			return nil
		},
	}
}

func runCmd(g *globals) *cobra.Command {
	var shapes, charts string
	var rate float64
	cmd := &cobra.Command{
		Use:   "run",
		Short: "run shapes against a broker and print a Markdown table",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			names := bench.ShapeNames()
			if shapes != "all" {
				names = strings.Split(shapes, ",")
			}
			var list []bench.Shape
			for _, n := range names {
				s, err := g.shape(n)
				if err != nil {
					return err
				}
				list = append(list, s)
			}
			e, err := g.setup(ctx)
			if err != nil {
				return err
			}
			defer e.close()
			b := newBar("")
			e.runner.Progress = b.set
			var results []bench.Result
			var failed []error
			for i, s := range list {
				b.describe(fmt.Sprintf("[%d/%d] %s", i+1, len(list), s.Name))
				res, err := e.runner.Run(ctx, s, g.settings(rate))
				if err != nil {
					failed = append(failed, err)
					fmt.Fprintln(os.Stderr, "FAILED:", err)
					continue
				}
				results = append(results, res)
				if err := bench.WriteJSONLine(e.jsonW, "result", res); err != nil {
					return err
				}
			}
			b.finish()
			if err := bench.WriteResultsTable(cmd.OutOrStdout(), results); err != nil {
				return err
			}
			if charts != "" {
				rep := &bench.CompareReport{Felix: results}
				if err := os.MkdirAll(charts, 0o755); err != nil {
					return err
				}
				files, err := rep.WriteCharts(charts, ".svg")
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "charts: %s\n", strings.Join(files, " "))
			}
			return errors.Join(failed...)
		},
	}
	cmd.Flags().StringVar(&shapes, "shapes", "all", "comma-separated shape names, or all (see felix-bench shapes)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "open loop at this many records/s in total (0 = closed loop)")
	cmd.Flags().StringVar(&charts, "charts", "", "write SVG charts into this directory")
	return cmd
}

// planFlags are the plan command's flags.
type planFlags struct {
	shape, chart string
	slo          time.Duration
	steps        int
	maxRate      float64
	stepDur      time.Duration
}

func planCmd(g *globals) *cobra.Command {
	pf := &planFlags{}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "sweep the offered rate of a shape and find the knee: the highest rate whose p99 stays under the SLO",
		RunE:  func(cmd *cobra.Command, _ []string) error { return runPlan(cmd, g, pf) },
	}
	f := cmd.Flags()
	f.StringVar(&pf.shape, "shape", "pubsub-1k", "shape to plan (felix-bench shapes)")
	f.DurationVar(&pf.slo, "slo-p99", 2*time.Millisecond, "p99 latency SLO")
	f.IntVar(&pf.steps, "steps", 8, "evenly spaced rates up to the closed-loop maximum (two bisection steps follow)")
	f.Float64Var(&pf.maxRate, "max-rate", 0, "sweep up to this rate instead of probing the closed-loop maximum")
	f.DurationVar(&pf.stepDur, "step-duration", 3*time.Second, "measured phase of each point")
	f.StringVar(&pf.chart, "chart", "", "latency-throughput chart (.svg or .png; default plan-<shape>.svg)")
	return cmd
}

func runPlan(cmd *cobra.Command, g *globals, pf *planFlags) error {
	ctx := cmd.Context()
	s, err := g.shape(pf.shape)
	if err != nil {
		return err
	}
	if pf.slo <= 0 {
		return fmt.Errorf("--slo-p99 must be positive")
	}
	e, err := g.setup(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	st := g.settings(0)
	if cmd.Flags().Changed("step-duration") || !cmd.Flags().Changed("duration") {
		st.Duration = pf.stepDur
	}
	b := newBar("plan " + pf.shape)
	n := 0
	opts := bench.PlanOptions{Shape: s, SLOP99: pf.slo, Steps: pf.steps, Step: st, MaxRate: pf.maxRate,
		OnPoint: func(p bench.PlanPoint) {
			n++
			b.describe(fmt.Sprintf("plan %s: point %d at %s/s", pf.shape, n, bench.FormatRate(p.Offered)))
			b.set(float64(n) / float64(pf.steps+3))
		}}
	pl, err := bench.RunPlan(ctx, e.runner, opts)
	b.finish()
	if pl.Points == nil && err != nil {
		return err
	}
	_ = bench.WriteJSONLine(e.jsonW, "plan", pl)
	printPlan(cmd.OutOrStdout(), pl, e.machine)
	chart := pf.chart
	if chart == "" {
		chart = "plan-" + pf.shape + ".svg"
	}
	if cerr := bench.PlanChart(pl, chart); cerr != nil {
		return errors.Join(err, cerr)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Chart: %s\n", chart)
	return err
}

// printPlan prints the points, the knee and the sizing line (or why there is none).
func printPlan(out io.Writer, pl bench.Plan, m bench.Machine) {
	fmt.Fprintf(out, "Capacity plan for %s, SLO p99 ≤ %v (closed-loop maximum %s records/s; %s)\n\n",
		pl.Shape.Name, pl.SLOP99, bench.FormatRate(pl.ClosedMax), m.CPUModel)
	fmt.Fprintln(out, "| offered/s | achieved/s | MB/s | p50 | p99 | p99.9 | broker CPU (cores) | RSS | within SLO |")
	fmt.Fprintln(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for i, p := range pl.Points {
		mark := "no"
		if p.WithinSLO {
			mark = "yes"
		}
		if i == pl.Knee {
			mark = "**knee**"
		}
		if p.Err != "" {
			mark = "failed: " + p.Err
		}
		fmt.Fprintf(out, "| %s | %s | %.1f | %s | %s | %s | %.2f | %.0f MiB | %s |\n", bench.FormatRate(p.Offered), bench.FormatRate(p.Achieved),
			p.BytesPS/1e6, bench.FormatLatency(p.P50), bench.FormatLatency(p.P99), bench.FormatLatency(p.P999), p.CPUCores,
			float64(p.RSS)/(1<<20), mark)
	}
	fmt.Fprintln(out)
	if pl.Knee >= 0 {
		k := pl.Points[pl.Knee]
		fmt.Fprintf(out, "Knee: %s records/s (%s), p99 %s, broker %.2f cores (%.0f %% per core of %d), RSS %.0f MiB\n",
			bench.FormatRate(k.Offered), bench.FormatBytes(k.BytesPS), bench.FormatLatency(k.P99), k.CPUCores,
			100*k.CPUCores/float64(m.Cores), m.Cores, float64(k.RSS)/(1<<20))
		fmt.Fprintf(out, "Sizing: %s\n", pl.SizingLine(m))
		return
	}
	fmt.Fprintf(out, "Knee: none: no rate tried kept p99 ≤ %v with its books balanced and ≥ 95 %% of the offered rate delivered.\n", pl.SLOP99)
	best := -1
	for i, p := range pl.Points {
		if p.Err == "" && p.P99 > 0 && (best < 0 || p.P99 < pl.Points[best].P99) {
			best = i
		}
	}
	if best >= 0 {
		b := pl.Points[best]
		fmt.Fprintf(out, "Sizing: none at this SLO on this machine now; the lowest p99 seen was %s at %s records/s "+
			"(load average and other processes count: %d cores shared). Retry on a quiet machine or with --slo-p99 above %s.\n",
			bench.FormatLatency(b.P99), bench.FormatRate(b.Offered), m.Cores, bench.FormatLatency(b.P99))
	}
}

// compareFlags are the compare command's flags.
type compareFlags struct {
	out, img, note      string
	noPeers, noCeilings bool
	rounds              int
}

func compareCmd(g *globals) *cobra.Command {
	cf := &compareFlags{}
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "run every comparison shape on Felix and its peers (NATS JetStream, Redis) and write the report",
		RunE:  func(cmd *cobra.Command, _ []string) error { return runCompare(cmd, g, cf) },
	}
	f := cmd.Flags()
	f.StringVar(&cf.out, "out", "", "also write the Markdown report to this file")
	f.StringVar(&cf.img, "img", "", "write SVG charts into this directory (linked from the report)")
	f.StringVar(&cf.note, "note", "", "a paragraph added under the machine line (e.g. what else ran on the machine)")
	f.BoolVar(&cf.noPeers, "no-peers", false, "no NATS or Redis runs")
	f.BoolVar(&cf.noCeilings, "no-ceilings", false, "no QUIC ceiling runs (bench/ceilings)")
	f.IntVar(&cf.rounds, "rounds", 1, "rounds of the ceiling-bound Felix shapes, each followed by its QUIC ceiling (round 1 runs every shape)")
	return cmd
}

func runCompare(cmd *cobra.Command, g *globals, cf *compareFlags) error {
	ctx := cmd.Context()
	e, err := g.setup(ctx)
	if err != nil {
		return err
	}
	defer e.close()
	opts := bench.CompareOptions{Settings: g.settings(0), Rounds: cf.rounds}
	if !cf.noCeilings {
		fmt.Fprintln(os.Stderr, "building felix-ceilings (bench/ceilings module) ...")
		if cbin, err := bench.BuildCeilings(ctx, e.root, e.work); err != nil {
			fmt.Fprintln(os.Stderr, "QUIC ceilings skipped:", err)
		} else {
			opts.Ceilings = &bench.Ceilings{Bin: cbin, WorkDir: filepath.Join(e.work, "ceilings")}
			if g.verbose {
				opts.Ceilings.Log = os.Stderr
			}
		}
	}
	if !cf.noPeers {
		fmt.Fprintln(os.Stderr, "building felix-peers (bench/peers module) ...")
		if pbin, err := bench.BuildPeers(ctx, e.root, e.work); err != nil {
			fmt.Fprintln(os.Stderr, "peers skipped:", err)
		} else {
			opts.Peers = &bench.Peers{Bin: pbin, WorkDir: filepath.Join(e.work, "peers")}
			if g.verbose {
				opts.Peers.Log = os.Stderr
			}
		}
	}
	b := newBar("compare")
	opts.OnStep = func(step string, i, total int) {
		b.describe(fmt.Sprintf("[%d/%d] %s", i, total, step))
		if b.pb == nil {
			fmt.Fprintf(os.Stderr, "[%d/%d] %s\n", i, total, step)
		}
	}
	e.runner.Progress = b.set
	rep, err := bench.Compare(ctx, e.runner, opts, e.machine)
	b.finish()
	if err != nil {
		return err
	}
	if err := writeCompare(cmd.OutOrStdout(), e, rep, cf); err != nil {
		return err
	}
	if len(rep.Failed) > 0 {
		return fmt.Errorf("%d runs failed (listed in the report)", len(rep.Failed))
	}
	return nil
}

// writeCompare writes the JSON lines, the charts, and the Markdown report to stdout and --out.
func writeCompare(stdout io.Writer, e *env, rep *bench.CompareReport, cf *compareFlags) error {
	_ = bench.WriteJSONLine(e.jsonW, "limits", rep.Limits)
	for _, r := range rep.Felix {
		_ = bench.WriteJSONLine(e.jsonW, "result", r)
	}
	for _, r := range rep.Peers {
		_ = bench.WriteJSONLine(e.jsonW, "peer_result", r)
	}
	for _, r := range rep.FelixRounds {
		_ = bench.WriteJSONLine(e.jsonW, "result", r)
	}
	for _, r := range rep.Ceilings {
		_ = bench.WriteJSONLine(e.jsonW, "ceiling_result", r)
	}
	for _, r := range rep.CeilingRows {
		_ = bench.WriteJSONLine(e.jsonW, "ceiling_row", r)
	}
	for _, t := range append(append([]bench.Target{}, rep.Targets...), rep.Targets22...) {
		_ = bench.WriteJSONLine(e.jsonW, "target", t)
	}
	var charts []string
	if cf.img != "" {
		if err := os.MkdirAll(cf.img, 0o755); err != nil {
			return err
		}
		var err error
		if charts, err = rep.WriteCharts(cf.img, ".svg"); err != nil {
			fmt.Fprintln(os.Stderr, "charts:", err)
		}
	}
	command := "felix-bench " + strings.Join(os.Args[1:], " ")
	if v := os.Getenv("FELIX_BENCH_COMMAND"); v != "" {
		command = v
	}
	if err := rep.WriteMarkdown(stdout, command, cf.note, charts, cf.img); err != nil {
		return err
	}
	if cf.out == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(cf.out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(cf.out)
	if err != nil {
		return err
	}
	rel, rerr := filepath.Rel(filepath.Dir(cf.out), cf.img)
	if rerr != nil || cf.img == "" {
		rel = cf.img
	}
	if err := rep.WriteMarkdown(f, command, cf.note, charts, rel); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "wrote", cf.out)
	return nil
}

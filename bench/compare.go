package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// CompareShapes are the Felix shapes of the comparison, in report order.
var CompareShapes = []string{
	"durable-1k-on_commit", "durable-1k-on_commit-b64", "durable-1k-periodic", "durable-1k-none",
	"pubsub-latency-256",
	"pubsub-0", "pubsub-256", "pubsub-1k", "pubsub-4k", "pubsub-16k", "pubsub-1k-fanout10",
	"cache-256-c50", "cache-256-c50-p16", "cache-256-read90", "counter-c16",
	"group-1k", "replay-1k",
}

// CompareOptions configure Compare.
type CompareOptions struct {
	// Settings size every run (Felix and peers alike).
	Settings Settings
	// Peers runs NATS and Redis; nil compares nothing (Felix figures only).
	Peers *Peers
	// Shapes overrides CompareShapes.
	Shapes []string
	// OnStep is told the name of each run before it starts (progress).
	OnStep func(step string, i, total int)
	// Ceilings runs the QUIC ceilings (felix-ceilings), each right after the Felix shape it
	// bounds; nil = none.
	Ceilings *Ceilings
	// Rounds repeats the ceiling-bound Felix shapes, each followed by its ceilings, this
	// many times in all (round 1 runs every shape): 0 = 1.
	Rounds int
	// LimitTime is spent on each limit MeasureLimits measures before the Felix rows (in
	// the Runner's WorkDir): 0 = 1 s; negative = none measured (no shares reported).
	LimitTime time.Duration
}

// Comparison is one Felix figure beside a peer's.
type Comparison struct {
	Label  string  `json:"label"`
	Metric string  `json:"metric"`
	Felix  float64 `json:"felix"`
	Peer   float64 `json:"peer"`
	PeerIs string  `json:"peer_system"`
	Ratio  float64 `json:"ratio"` // Felix ÷ peer (for latency: peer ÷ Felix, so > 1 is better)
}

// Target is one of issue 10's targets with its outcome: Met, or the size of the miss.
type Target struct {
	Name string `json:"name"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// CompareReport is everything one comparison measured.
type CompareReport struct {
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`
	// Limits were measured in this run, before the Felix rows (MeasureLimits).
	Limits  Limits       `json:"limits"`
	Felix   []Result     `json:"felix"`
	Peers   []Result     `json:"peers"`
	Rows    []Comparison `json:"rows"`
	Targets []Target     `json:"targets"`
	// Rounds is CompareOptions.Rounds; FelixRounds the Felix runs of rounds 2 and later
	// (Result.Round), Ceilings every ceiling run of every round.
	Rounds      int      `json:"rounds"`
	FelixRounds []Result `json:"felix_rounds,omitempty"`
	// DiskRounds are the disk limits (MeasureDiskLimits) taken before rounds 2, 3, ...
	DiskRounds []Limits `json:"disk_rounds,omitempty"`
	Ceilings   []Result `json:"ceilings,omitempty"`
	// CeilingRows are Felix ÷ its QUIC ceiling (or the durable floor, the group-commit
	// limit) per round; Targets22 issue 22's acceptance judged on them.
	CeilingRows []CeilingRow `json:"ceiling_rows,omitempty"`
	Targets22   []Target     `json:"targets_22,omitempty"`
	// Skipped says which peers or shapes did not run, and why.
	Skipped []string `json:"skipped,omitempty"`
	// Failed lists runs that failed (an unaccounted message, a broker error): no figure.
	Failed  []string      `json:"failed,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

type peerRun struct {
	key, server, sub string
	args             []string
}

// peerRuns are the peer workloads of the comparison (issue 10, "Targets"): server is
// "nats-always", "nats-default" or "redis".
var peerRuns = []peerRun{
	{"js-always-8pub-1k", "nats-always", "js-publish", []string{"--publishers", "8", "--size", "1024", "--sync", "always", "--shape", "durable-1k-on_commit"}},
	{"js-always-1pub-1k", "nats-always", "js-publish", []string{"--publishers", "1", "--size", "1024", "--sync", "always", "--shape", "durable-1k-on_commit"}},
	{"js-default-1pub-256", "nats-default", "js-publish", []string{"--publishers", "1", "--size", "256", "--sync", "default", "--shape", "pubsub-latency-256"}},
	{"js-default-async-1k", "nats-default", "js-async", []string{"--size", "1024", "--sync", "default", "--shape", "pubsub-1k"}},
	{"nats-core-1k", "nats-default", "nats-pubsub", []string{"--size", "1024", "--fanout", "1", "--shape", "pubsub-1k"}},
	{"nats-core-256", "nats-default", "nats-pubsub", []string{"--size", "256", "--fanout", "1", "--shape", "pubsub-256"}},
	{"nats-core-1k-fanout10", "nats-default", "nats-pubsub", []string{"--size", "1024", "--fanout", "10", "--shape", "pubsub-1k-fanout10"}},
	{"redis-c50", "redis", "redis", []string{"--clients", "50", "--inflight", "1", "--size", "256", "--get-ratio", "0.5", "--shape", "cache-256-c50"}},
	{"redis-c50-p16", "redis", "redis", []string{"--clients", "50", "--inflight", "16", "--size", "256", "--get-ratio", "0.5", "--shape", "cache-256-c50-p16"}},
}

// Compare measures this machine's limits (MeasureLimits, in r.WorkDir), runs the Felix
// shapes with r, then the peers (each server started and stopped here), and computes the
// side-by-side rows and the targets. A failed run is listed in Failed and reports no
// figure; an unavailable peer in Skipped. Errors: only ctx's.
func Compare(ctx context.Context, r *Runner, o CompareOptions, machine Machine) (*CompareReport, error) {
	t0 := time.Now()
	if len(o.Shapes) == 0 {
		o.Shapes = CompareShapes
	}
	o.Rounds = max(o.Rounds, 1)
	rep := &CompareReport{Machine: machine, Settings: o.Settings, Rounds: o.Rounds}
	st := &compareStep{o: o, total: len(o.Shapes) + 1 + roundSteps(o.Shapes, o.Rounds, o.Ceilings != nil)}
	if o.Peers != nil {
		st.total += len(peerRuns)
	}
	if o.Ceilings != nil {
		for _, s := range o.Shapes {
			st.total += len(ceilingsFor(s))
		}
	}
	st.next("limits of this machine")
	if o.LimitTime >= 0 {
		rep.Limits = MeasureLimits(ctx, r.WorkDir, cmp.Or(o.LimitTime, time.Second))
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
	}
	felix, err := rep.runFelix(ctx, r, st)
	if err != nil {
		return rep, err
	}
	r.Close() // the brokers' CPU must not compete with the peers
	peers := map[string]*Result{}
	if o.Peers != nil {
		if peers, err = rep.runPeers(ctx, st); err != nil {
			return rep, err
		}
	}
	rep.Rows, rep.Targets = judge(felix, peers, rep.Limits)
	rep.CeilingRows, rep.Targets22 = judgeCeilings(append(slices.Clone(rep.Felix), rep.FelixRounds...), rep.Ceilings, peers,
		append([]Limits{rep.Limits}, rep.DiskRounds...), o.Rounds)
	rep.Elapsed = time.Since(t0)
	return rep, nil
}

// compareStep numbers the comparison's runs for OnStep.
type compareStep struct {
	o     CompareOptions
	i     int
	total int
}

func (s *compareStep) next(name string) {
	s.i++
	if s.o.OnStep != nil {
		s.o.OnStep(name, s.i, s.total)
	}
}

// runFelix runs the Felix shapes, each followed by the ceilings it is compared with, then
// rounds 2.. of the ceiling-bound shapes; failures are listed, not returned.
func (rep *CompareReport) runFelix(ctx context.Context, r *Runner, st *compareStep) (map[string]*Result, error) {
	for round := 1; round <= st.o.Rounds; round++ {
		shapes := st.o.Shapes
		if round > 1 {
			shapes = roundShapes(shapes)
			if st.o.LimitTime >= 0 {
				rep.DiskRounds = append(rep.DiskRounds, MeasureDiskLimits(ctx, r.WorkDir, cmp.Or(st.o.LimitTime, time.Second)))
			}
		}
		for _, name := range shapes {
			if err := rep.runShape(ctx, r, st, name, round); err != nil {
				return nil, err
			}
			for _, cr := range ceilingsFor(name) {
				if st.o.Ceilings == nil {
					break
				}
				st.next(fmt.Sprintf("ceiling %s (round %d)", cr.key, round))
				rep.runCeiling(ctx, st.o.Ceilings, st.o.Settings, cr, round)
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
		}
	}
	felix := map[string]*Result{}
	for i := range rep.Felix {
		felix[rep.Felix[i].Shape.Name] = &rep.Felix[i]
	}
	return felix, nil
}

// runShape runs one Felix shape of one round: round 1 into Felix, later ones into
// FelixRounds. Only ctx's error is returned.
func (rep *CompareReport) runShape(ctx context.Context, r *Runner, st *compareStep, name string, round int) error {
	st.next(fmt.Sprintf("felix %s (round %d)", name, round))
	sh, err := ShapeByName(name)
	if err != nil {
		rep.Failed = append(rep.Failed, err.Error())
		return nil
	}
	res, err := r.Run(ctx, sh, st.o.Settings)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		rep.Failed = append(rep.Failed, fmt.Sprintf("felix (round %d) %v", round, err))
		return nil
	}
	res.Round = round
	if round == 1 {
		rep.Felix = append(rep.Felix, res)
	} else {
		rep.FelixRounds = append(rep.FelixRounds, res)
	}
	return nil
}

// runPeers runs peerRuns, one server at a time; failures are listed, not returned.
func (rep *CompareReport) runPeers(ctx context.Context, st *compareStep) (map[string]*Result, error) {
	procs := map[string]*PeerProc{}
	skip := map[string]string{}
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	for _, pr := range peerRuns {
		st.next("peer " + pr.key)
		if why, ok := skip[pr.server]; ok {
			rep.Skipped = append(rep.Skipped, pr.key+": "+why)
			continue
		}
		proc, ok := procs[pr.server]
		if !ok {
			for k, p := range procs { // one server at a time
				p.Stop()
				delete(procs, k)
			}
			var err error
			if proc, err = startPeer(ctx, st.o.Peers, pr.server); err != nil {
				skip[pr.server] = err.Error()
				rep.Skipped = append(rep.Skipped, pr.key+": "+err.Error())
				continue
			}
			procs[pr.server] = proc
		}
		addrFlag := "--url"
		if pr.server == "redis" {
			addrFlag = "--addr"
		}
		res, err := st.o.Peers.Client(ctx, pr.sub, st.o.Settings, proc, append([]string{addrFlag, proc.Addr}, pr.args...)...)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			rep.Failed = append(rep.Failed, "peer "+pr.key+": "+err.Error())
			continue
		}
		res.System = pr.key // names the peer, its mode and its size (peerRuns)
		res.Shape.Note = res.LatencyFrom
		rep.Peers = append(rep.Peers, res)
	}
	out := map[string]*Result{}
	for i := range rep.Peers {
		out[rep.Peers[i].System] = &rep.Peers[i]
	}
	return out, nil
}

func startPeer(ctx context.Context, p *Peers, server string) (*PeerProc, error) {
	if server == "redis" {
		return p.StartRedis(ctx)
	}
	return p.StartNATS(ctx, strings.TrimPrefix(server, "nats-"))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// judger builds the comparison rows and the targets from the runs that produced figures.
type judger struct {
	f, p map[string]*Result
	lim  Limits
	rows []Comparison
	ts   []Target
}

// judge builds the comparison rows and the targets. Pure: tested with made-up results.
func judge(f, p map[string]*Result, lim Limits) ([]Comparison, []Target) {
	j := &judger{f: f, p: p, lim: lim}
	j.durable()
	j.latency()
	j.throughput()
	j.fanout()
	j.cacheUnpipelined()
	j.cachePipelined()
	return j.rows, j.ts
}

func (j *judger) row(label, metric string, fv, pv float64, peer string, inverse bool) Comparison {
	c := Comparison{Label: label, Metric: metric, Felix: fv, Peer: pv, PeerIs: peer, Ratio: ratio(fv, pv)}
	if inverse {
		c.Ratio = ratio(pv, fv)
	}
	j.rows = append(j.rows, c)
	return c
}

// missing records the target as not measured when a needed run ("f:shape" or "p:peer")
// produced no figure.
func (j *judger) missing(name, want string, keys ...string) bool {
	var gone []string
	for _, k := range keys {
		if strings.HasPrefix(k, "f:") && j.f[k[2:]] == nil || strings.HasPrefix(k, "p:") && j.p[k[2:]] == nil {
			gone = append(gone, k[2:])
		}
	}
	if len(gone) > 0 {
		j.ts = append(j.ts, Target{Name: name, Want: want, Got: "not measured: no figure for " + strings.Join(gone, ", ")})
		return true
	}
	return false
}

// durable: publish with fsync covering every acknowledged record.
func (j *judger) durable() {
	name, want := "durable publish, on_commit, 1 KiB, 8 publishers", "≥ 20 × JetStream sync-always (8 publishers, 1 KiB)"
	if j.missing(name, want, "f:durable-1k-on_commit", "p:js-always-8pub-1k") {
		return
	}
	fr, pr := j.f["durable-1k-on_commit"], j.p["js-always-8pub-1k"]
	c := j.row("durable publish 1 KiB, 8 sync publishers (Felix on_commit vs JetStream sync always)", "records/s",
		fr.RecordsPerSec, pr.RecordsPerSec, pr.System, false)
	j.ts = append(j.ts, Target{Name: name, Want: want,
		Got: fmt.Sprintf("%.1f × (%s vs %s records/s); %s", c.Ratio, FormatRate(fr.RecordsPerSec), FormatRate(pr.RecordsPerSec),
			groupCommitShare(fr.RecordsPerSec, j.lim)), Met: c.Ratio >= 20})
}

func (j *judger) latency() {
	name, want := "pub/sub latency, batch 1, 256 B", "p99 ≤ JetStream default-sync synchronous publish p99; p99.9 ≤ 1 ms"
	if j.missing(name, want, "f:pubsub-latency-256", "p:js-default-1pub-256") {
		return
	}
	fr, pr := j.f["pubsub-latency-256"], j.p["js-default-1pub-256"]
	j.row("pub/sub latency 256 B batch 1 (Felix publish→delivery vs JetStream publish→ack)", "p99 µs (ratio: peer ÷ Felix)",
		us(fr.Latency.P99), us(pr.Latency.P99), pr.System, true)
	j.ts = append(j.ts, Target{Name: name, Want: want,
		Got: fmt.Sprintf("p99 %s vs %s (%.2f ×); p99.9 %s", FormatLatency(fr.Latency.P99), FormatLatency(pr.Latency.P99),
			ratio(us(fr.Latency.P99), us(pr.Latency.P99)), FormatLatency(fr.Latency.P999)),
		Met: fr.Latency.P99 <= pr.Latency.P99 && fr.Latency.P999 <= time.Millisecond})
}

func (j *judger) throughput() {
	name, want := "pub/sub throughput 1 KiB × 64, fanout 1", "delivered bytes/s ≥ core NATS and ≥ 3 × JetStream async"
	if !j.missing(name, want, "f:pubsub-1k", "p:nats-core-1k", "p:js-default-async-1k") {
		fr, nc, ja := j.f["pubsub-1k"], j.p["nats-core-1k"], j.p["js-default-async-1k"]
		c1 := j.row("pub/sub 1 KiB, fanout 1 (Felix batch 64 vs core NATS)", "delivered MB/s", fr.BytesPerSec/1e6, nc.BytesPerSec/1e6, nc.System, false)
		c2 := j.row("pub/sub 1 KiB, fanout 1 (Felix batch 64 vs JetStream async publish)", "MB/s", fr.BytesPerSec/1e6, ja.BytesPerSec/1e6, ja.System, false)
		j.ts = append(j.ts, Target{Name: name, Want: want,
			Got: fmt.Sprintf("%.2f × core NATS, %.2f × JetStream async (%s)", c1.Ratio, c2.Ratio, FormatBytes(fr.BytesPerSec)),
			Met: c1.Ratio >= 1 && c2.Ratio >= 3})
	}
	if f, p := j.f["pubsub-256"], j.p["nats-core-256"]; f != nil && p != nil {
		j.row("pub/sub 256 B, fanout 1 (Felix batch 64 vs core NATS)", "delivered records/s", f.RecordsPerSec, p.RecordsPerSec, p.System, false)
	}
	if f, p := j.f["pubsub-1k-fanout10"], j.p["nats-core-1k-fanout10"]; f != nil && p != nil {
		j.row("pub/sub 1 KiB, fanout 10 (Felix vs core NATS)", "delivered records/s", f.RecordsPerSec, p.RecordsPerSec, p.System, false)
	}
}

// fanout: fanout 10 against fanout 1, both Felix.
func (j *judger) fanout() {
	name, want := "fanout 10", "delivered records/s ≥ 2 × the fanout-1 figure"
	if j.missing(name, want, "f:pubsub-1k-fanout10", "f:pubsub-1k") {
		return
	}
	f10, f1 := j.f["pubsub-1k-fanout10"], j.f["pubsub-1k"]
	c := ratio(f10.RecordsPerSec, f1.RecordsPerSec)
	j.ts = append(j.ts, Target{Name: name, Want: want,
		Got: fmt.Sprintf("%.2f × (%s vs %s records/s)", c, FormatRate(f10.RecordsPerSec), FormatRate(f1.RecordsPerSec)), Met: c >= 2})
}

func (j *judger) cacheUnpipelined() {
	name, want := "cache 256 B, 50 clients, 1 in flight", "≥ 1 × Redis unpipelined ops/s with p99 ≤ 2 × Redis's"
	if j.missing(name, want, "f:cache-256-c50", "p:redis-c50") {
		return
	}
	fr, pr := j.f["cache-256-c50"], j.p["redis-c50"]
	label := "cache 256 B, 50 clients × 1 in flight (vs Redis unpipelined)"
	c := j.row(label, "ops/s", fr.RecordsPerSec, pr.RecordsPerSec, pr.System, false)
	j.row(label, "p99 µs (ratio: peer ÷ Felix)", us(fr.Latency.P99), us(pr.Latency.P99), pr.System, true)
	pr99 := ratio(us(fr.Latency.P99), us(pr.Latency.P99))
	j.ts = append(j.ts, Target{Name: name, Want: want,
		Got: fmt.Sprintf("%.2f × ops/s; p99 %s = %.2f × Redis's %s", c.Ratio, FormatLatency(fr.Latency.P99), pr99, FormatLatency(pr.Latency.P99)),
		Met: c.Ratio >= 1 && pr99 <= 2})
}

func (j *judger) cachePipelined() {
	name, want := "cache 256 B, 50 clients, 16 in flight", "≥ 0.5 × Redis pipelined (16 in flight per client)"
	if j.missing(name, want, "f:cache-256-c50-p16", "p:redis-c50-p16") {
		return
	}
	fr, pr := j.f["cache-256-c50-p16"], j.p["redis-c50-p16"]
	c := j.row("cache 256 B, 50 clients × 16 in flight (vs Redis pipelined)", "ops/s", fr.RecordsPerSec, pr.RecordsPerSec, pr.System, false)
	j.ts = append(j.ts, Target{Name: name, Want: want,
		Got: fmt.Sprintf("%.2f × (%s vs %s ops/s)", c.Ratio, FormatRate(fr.RecordsPerSec), FormatRate(pr.RecordsPerSec)), Met: c.Ratio >= 0.5})
}

// LimitShare says which limit measured in the same run (lim) bounds a Felix result and the
// share reached: durable shapes against the disk (and, at 1 KiB, the group-commit limit),
// the others against the QUIC echo ceiling. A limit not measured gives no share.
func LimitShare(r Result, lim Limits) string {
	if r.Shape.Kind == KindDurable {
		s := share(r.BytesPerSec, lim.DiskBytesPerSec, "disk bandwidth", FormatBytes(lim.DiskBytesPerSec))
		if r.Shape.Payload == 1024 {
			s = groupCommitShare(r.RecordsPerSec, lim) + "; " + s
		}
		return s
	}
	return share(r.BytesPerSec, lim.QUICEchoBytesPerSec, "the QUIC echo ceiling", FormatBytes(lim.QUICEchoBytesPerSec))
}

// groupCommitShare is records/s as a share of lim's group-commit limit for 1 KiB records.
func groupCommitShare(recordsPerSec float64, lim Limits) string {
	return share(recordsPerSec, lim.GroupCommit1KiB(), "the group-commit limit", FormatRate(lim.GroupCommit1KiB())+" 1 KiB records/s")
}

// share prints v as a percentage of limit ("not measured" when limit is 0).
func share(v, limit float64, what, limitText string) string {
	if limit <= 0 {
		return what + " not measured"
	}
	return fmt.Sprintf("%.1f %% of %s (%s)", 100*v/limit, what, limitText)
}

// writeMarkdown writes the limits section: what was measured in this run, and what was not.
func (l Limits) writeMarkdown(b *strings.Builder) {
	b.WriteString("\n### Share of the limit\n\nLimits measured on this machine in this run, before the Felix rows (`bench.MeasureLimits`):")
	fmt.Fprintf(b, " 64 KiB append + fdatasync %s/s (group commit of 64 × 1 KiB: %s records/s) and sequential writes %s in %s; ",
		FormatRate(l.FdatasyncPerSec), FormatRate(l.GroupCommit1KiB()), FormatBytes(l.DiskBytesPerSec), l.Dir)
	fmt.Fprintf(b, "4 KiB write + fdatasync p50 %s (O_DIRECT: %v); one QUIC stream echoing over loopback %s.",
		FormatLatency(l.SyncWriteP50), l.SyncWriteDirect, FormatBytes(l.QUICEchoBytesPerSec))
	if l.Tmpfs {
		b.WriteString(" The work directory is on tmpfs: the disk figures say nothing about a disk.")
	}
	for _, e := range l.Errors {
		fmt.Fprintf(b, " Not measured: %s.", oneLine(e))
	}
	b.WriteString("\n\n| shape | share |\n| --- | --- |\n")
}

// WriteMarkdown writes the report: command, machine, targets (met or missed with the
// size), side-by-side rows, every Felix and peer figure, the physical-limit shares, and
// the charts (imgRel is the chart directory relative to the Markdown file).
func (c *CompareReport) WriteMarkdown(w io.Writer, command, note string, charts []string, imgRel string) error {
	var b strings.Builder
	m := c.Machine
	fmt.Fprintf(&b, "# Felix benchmark harness: Felix beside its peers\n\n")
	fmt.Fprintf(&b, "Generated by `%s` on %s (took %s). Regenerate with the same command; docs/benchmarks-harness.md explains every figure.\n\n",
		command, m.Date.Format("2006-01-02 15:04 UTC"), c.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %s, %d cores, kernel %s, %s, commit %s, load average %s at the start. Every system ran on this machine over loopback, "+
		"one after another, each run %v measured after %v of warm-up; the load generator shares the cores with the server.\n\n",
		m.CPUModel, m.Cores, m.Kernel, m.GoVersion, m.GitCommit, m.LoadAvg, c.Settings.Duration, c.Settings.Warmup)
	if end := ReadLoadAvg(); end != "" {
		fmt.Fprintf(&b, "Load average at the end: %s.\n\n", end)
	}
	if note != "" {
		fmt.Fprintf(&b, "%s\n\n", note)
	}
	b.WriteString("## Targets (issue 10)\n\n| target | wanted | measured | met |\n| --- | --- | --- | --- |\n")
	for _, t := range c.Targets {
		met := "**missed**"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, met)
	}
	b.WriteString("\n## Side by side\n\nRatio is Felix ÷ peer (latency rows: peer ÷ Felix), so above 1 Felix is ahead.\n\n")
	b.WriteString("| comparison | metric | Felix | peer | peer system | ratio |\n| --- | --- | ---: | ---: | --- | ---: |\n")
	for _, r := range c.Rows {
		fmt.Fprintf(&b, "| %s | %s | %.4g | %.4g | %s | %.2f |\n", r.Label, r.Metric, r.Felix, r.Peer, r.PeerIs, r.Ratio)
	}
	c.writeCeilings(&b)
	b.WriteString("\n## Felix, every shape\n\n")
	if err := WriteResultsTable(&b, c.Felix); err != nil {
		return err
	}
	c.Limits.writeMarkdown(&b)
	for _, r := range c.Felix {
		fmt.Fprintf(&b, "| %s | %s |\n", r.Shape.Name, LimitShare(r, c.Limits))
	}
	for _, sec := range []struct {
		title string
		rs    []Result
	}{{"Felix, rounds 2 and later (the ceiling-bound shapes)", c.FelixRounds}, {"QUIC ceilings, every round", c.Ceilings}, {"Peers", c.Peers}} {
		if len(sec.rs) > 0 {
			fmt.Fprintf(&b, "\n## %s\n\n", sec.title)
			if err := WriteResultsTable(&b, sec.rs); err != nil {
				return err
			}
		}
	}
	if len(c.Skipped) > 0 || len(c.Failed) > 0 {
		b.WriteString("\n## Not measured\n\n")
		for _, s := range c.Skipped {
			fmt.Fprintf(&b, "- skipped: %s\n", oneLine(s))
		}
		for _, s := range c.Failed {
			fmt.Fprintf(&b, "- failed (no figure reported): %s\n", oneLine(s))
		}
	}
	if len(charts) > 0 {
		b.WriteString("\n## Charts\n\n")
		for _, ch := range charts {
			fmt.Fprintf(&b, "![%s](%s)\n\n", strings.TrimSuffix(filepath.Base(ch), filepath.Ext(ch)), filepath.ToSlash(filepath.Join(imgRel, filepath.Base(ch))))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// round1 is the runs of round 1 (the charts show one figure per system and shape).
func round1(rs []Result) []Result {
	var out []Result
	for _, r := range rs {
		if r.Round <= 1 {
			out = append(out, r)
		}
	}
	return out
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// WriteCharts draws, into dir, one latency chart per shape (Felix and the peers measured
// for it) and one throughput chart of every result, and returns the files written.
func (c *CompareReport) WriteCharts(dir, ext string) ([]string, error) {
	byShape := map[string][]Result{}
	var order []string
	all := append(append(append([]Result{}, c.Felix...), c.Peers...), round1(c.Ceilings)...)
	for _, r := range all {
		if _, ok := byShape[r.Shape.Name]; !ok {
			order = append(order, r.Shape.Name)
		}
		byShape[r.Shape.Name] = append(byShape[r.Shape.Name], r)
	}
	sort.Strings(order)
	var files []string
	var errs []error
	for _, name := range order {
		if name == "" {
			continue
		}
		f := filepath.Join(dir, "latency-"+name+ext)
		if err := LatencyChart("latency: "+name, byShape[name], f); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range byShape[name] {
			if r.Latency.Count > 0 {
				files = append(files, f)
				break
			}
		}
	}
	f := filepath.Join(dir, "throughput"+ext)
	if err := ThroughputChart("throughput per shape", all, f); err != nil {
		errs = append(errs, err)
	} else if len(all) > 0 {
		files = append(files, f)
	}
	return files, errors.Join(errs...)
}

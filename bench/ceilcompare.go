package bench

// Compare's QUIC ceilings (issue 22): which ceiling bounds which Felix shape, the rounds
// that interleave them, and the Felix ÷ ceiling rows and targets.

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// ceilingRun is one felix-ceilings client run and the Felix shape it bounds.
type ceilingRun struct {
	key, mode, sub string
	args           []string
	bounds         string // the Felix shape it runs after, in every round
}

// ceilingRuns are the ceilings of the comparison: the relay for pub/sub (records of the
// Felix shape's size, 64 per stream write as the publisher's batch), the echo for the
// cache shapes (256 B each way), the echo at 1 × 1 as the round-trip timer (256 B for the
// batch-1 latency shape, 1 KiB for the durable floor).
var ceilingRuns = []ceilingRun{
	{"quic-rtt-1k", "echo", "echo", []string{"--clients", "1", "--inflight", "1", "--size", "1024", "--shape", "durable-1k-on_commit"}, "durable-1k-on_commit"},
	{"quic-rtt-256", "echo", "echo", []string{"--clients", "1", "--inflight", "1", "--size", "256", "--shape", "pubsub-latency-256"}, "pubsub-latency-256"},
	{"quic-relay-256", "relay", "relay", []string{"--size", "256", "--batch", "64", "--shape", "pubsub-256"}, "pubsub-256"},
	{"quic-relay-1k", "relay", "relay", []string{"--size", "1024", "--batch", "64", "--shape", "pubsub-1k"}, "pubsub-1k"},
	{"quic-echo-c50", "echo", "echo", []string{"--clients", "50", "--inflight", "1", "--size", "256", "--shape", "cache-256-c50"}, "cache-256-c50"},
	{"quic-echo-c50-p16", "echo", "echo", []string{"--clients", "50", "--inflight", "16", "--size", "256", "--shape", "cache-256-c50-p16"}, "cache-256-c50-p16"},
}

// ceilingsFor returns the ceilings bound to a Felix shape.
func ceilingsFor(shape string) []ceilingRun {
	var out []ceilingRun
	for _, c := range ceilingRuns {
		if c.bounds == shape {
			out = append(out, c)
		}
	}
	return out
}

// runCeiling starts cr's server, runs its client and stops the server (so no idle
// server shares the cores with the next run). A failure is listed in Failed.
func (rep *CompareReport) runCeiling(ctx context.Context, c *Ceilings, s Settings, cr ceilingRun, round int) {
	srv, err := c.Start(ctx, cr.mode)
	if err != nil {
		rep.Skipped = append(rep.Skipped, cr.key+": "+err.Error())
		return
	}
	defer srv.Stop()
	res, err := c.Client(ctx, cr.sub, s, srv, cr.args...)
	if err != nil {
		if ctx.Err() == nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("ceiling %s (round %d): %v", cr.key, round, err))
		}
		return
	}
	res.System, res.Round = cr.key, round
	res.Shape.Note = res.LatencyFrom
	rep.Ceilings = append(rep.Ceilings, res)
}

// CeilingRow is one Felix figure over its QUIC ceiling, per round and as the median.
type CeilingRow struct {
	Label   string `json:"label"`
	Metric  string `json:"metric"`
	Ceiling string `json:"ceiling"` // the ceiling run (or limit) it is divided by
	// Felix and CeilingValue are the figures of each round; Ratios their quotients:
	// Felix ÷ ceiling for rates, ceiling ÷ Felix for latencies, so 1 is at the ceiling.
	Felix        []float64 `json:"felix"`
	CeilingValue []float64 `json:"ceiling_value"`
	Ratios       []float64 `json:"ratios"`
	Ratio        float64   `json:"ratio"` // median of Ratios
	// PeerRatio is the same shape's Felix ÷ peer ratio (latency: peer ÷ Felix) of round 1,
	// PeerIs the peer run (0 and "" without one).
	PeerRatio float64 `json:"peer_ratio,omitempty"`
	PeerIs    string  `json:"peer_system,omitempty"`
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// ceilingJudge builds the ceiling rows from results indexed by round and name.
type ceilingJudge struct {
	felix, ceil map[int]map[string]*Result
	peers       map[string]*Result
	lims        []Limits // the disk limits of each round (index round-1; missing: round 1's)
	rounds      int
	rows        []CeilingRow
}

func byRound(rs []Result) map[int]map[string]*Result {
	out := map[int]map[string]*Result{}
	for i := range rs {
		r := &rs[i]
		if out[r.Round] == nil {
			out[r.Round] = map[string]*Result{}
		}
		key := r.System
		if r.System == "felix" {
			key = r.Shape.Name
		}
		out[r.Round][key] = r
	}
	return out
}

// lim is round's disk limits (round 1's when that round measured none).
func (j *ceilingJudge) lim(round int) Limits {
	if round >= 1 && round <= len(j.lims) && len(j.lims[round-1].Errors) == 0 {
		return j.lims[round-1]
	}
	if len(j.lims) > 0 {
		return j.lims[0]
	}
	return Limits{}
}

// add appends a row for Felix shape fs over ceiling cs (a ceiling run, or "" with
// ceilingOf giving the value of a round) in every round both have a figure.
func (j *ceilingJudge) add(label, metric, fs, cs string, get func(*Result) float64, ceilingOf func(int, *Result) float64, inverse bool, peer string, peerGet func(*Result) float64) {
	row := CeilingRow{Label: label, Metric: metric, Ceiling: cs}
	for r := 1; r <= j.rounds; r++ {
		f, c := j.felix[r][fs], j.ceil[r][cs]
		if f == nil || (c == nil && cs != "") {
			continue
		}
		cv := 0.0
		if ceilingOf != nil {
			cv = ceilingOf(r, c)
		} else {
			cv = get(c)
		}
		if cv <= 0 {
			continue
		}
		fv := get(f)
		q := ratio(fv, cv)
		if inverse {
			q = ratio(cv, fv)
		}
		row.Felix, row.CeilingValue, row.Ratios = append(row.Felix, fv), append(row.CeilingValue, cv), append(row.Ratios, q)
	}
	if len(row.Ratios) == 0 {
		return
	}
	row.Ratio = median(row.Ratios)
	if p, f := j.peers[peer], j.felix[1][fs]; p != nil && f != nil && peerGet != nil {
		row.PeerIs, row.PeerRatio = peer, ratio(get(f), peerGet(p))
		if inverse {
			row.PeerRatio = ratio(peerGet(p), get(f))
		}
	}
	j.rows = append(j.rows, row)
}

// judgeCeilings builds the Felix ÷ ceiling rows and issue 22's targets; lims are the disk
// limits of each round (lims[0]: the limits measured before the Felix rows). Pure.
func judgeCeilings(felix, ceilings []Result, peers map[string]*Result, lims []Limits, rounds int) ([]CeilingRow, []Target) {
	j := &ceilingJudge{felix: byRound(felix), ceil: byRound(ceilings), peers: peers, lims: lims, rounds: max(rounds, 1)}
	mbs := func(r *Result) float64 { return r.BytesPerSec / 1e6 }
	rps := func(r *Result) float64 { return r.RecordsPerSec }
	p50 := func(r *Result) float64 { return us(r.Latency.P50) }
	p99 := func(r *Result) float64 { return us(r.Latency.P99) }
	j.add("pub/sub 1 KiB × 64, fanout 1", "delivered MB/s", "pubsub-1k", "quic-relay-1k", mbs, nil, false, "nats-core-1k", mbs)
	j.add("pub/sub 256 B × 64, fanout 1", "delivered records/s", "pubsub-256", "quic-relay-256", rps, nil, false, "nats-core-256", rps)
	j.add("cache 256 B, 50 clients × 1 in flight", "ops/s", "cache-256-c50", "quic-echo-c50", rps, nil, false, "redis-c50", rps)
	j.add("cache 256 B, 50 clients × 16 in flight", "ops/s", "cache-256-c50-p16", "quic-echo-c50-p16", rps, nil, false, "redis-c50-p16", rps)
	j.add("pub/sub batch 1, 256 B (publish → delivery vs one round trip)", "p50 µs (ratio: ceiling ÷ Felix)", "pubsub-latency-256", "quic-rtt-256", p50, nil, true, "js-default-1pub-256", p50)
	j.add("pub/sub batch 1, 256 B (publish → delivery vs one round trip)", "p99 µs (ratio: ceiling ÷ Felix)", "pubsub-latency-256", "quic-rtt-256", p99, nil, true, "js-default-1pub-256", p99)
	floor := func(r int, c *Result) float64 {
		if w := j.lim(r).SyncWriteP50; w > 0 {
			return us(c.Latency.P50 + w)
		}
		return 0
	}
	j.add("durable 1 KiB, 8 sync publishers, on_commit vs the durable floor", "ack p50 µs (ratio: floor ÷ Felix)", "durable-1k-on_commit", "quic-rtt-1k", p50, floor, true, "", nil)
	gc := func(r int, _ *Result) float64 { return j.lim(r).GroupCommit1KiB() }
	j.add("durable 1 KiB, 8 batching publishers × 64 in flight, on_commit vs the group-commit limit", "records/s", "durable-1k-on_commit-b64", "",
		rps, gc, false, "js-always-8pub-1k", rps)
	return j.rows, j.targets()
}

// targets are issue 22's acceptance figures, from the medians of the rows.
func (j *ceilingJudge) targets() []Target {
	get := func(label, metric string) *CeilingRow {
		for i := range j.rows {
			if strings.HasPrefix(j.rows[i].Label, label) && strings.HasPrefix(j.rows[i].Metric, metric) {
				return &j.rows[i]
			}
		}
		return nil
	}
	var ts []Target
	for _, l := range []string{"pub/sub 1 KiB", "pub/sub 256 B", "cache 256 B, 50 clients × 1", "cache 256 B, 50 clients × 16"} {
		t := Target{Name: l + " vs its QUIC ceiling", Want: "Felix ÷ ceiling ≥ 0.8", Got: "not measured"}
		if r := get(l, ""); r != nil {
			t.Got, t.Met = fmt.Sprintf("%.2f (rounds: %s)", r.Ratio, formatRatios(r.Ratios)), r.Ratio >= 0.8
		}
		ts = append(ts, t)
	}
	t := Target{Name: "durable 1 KiB, 8 sync publishers, on_commit", Want: "p50 ≤ 1.2 × (round trip + write + fdatasync); ≥ 4 × JetStream sync-always", Got: "not measured"}
	if r, f := get("durable 1 KiB, 8 sync", ""), j.felix[1]["durable-1k-on_commit"]; r != nil && f != nil {
		x, js := 0.0, "JetStream not measured"
		if p := j.peers["js-always-8pub-1k"]; p != nil {
			x = ratio(f.RecordsPerSec, p.RecordsPerSec)
			js = fmt.Sprintf("%.1f × JetStream", x)
		}
		t.Got = fmt.Sprintf("p50 %.2f × the floor (%.0f µs vs %.0f µs); %s", ratio(1, r.Ratio), median(r.Felix), median(r.CeilingValue), js)
		t.Met = ratio(1, r.Ratio) <= 1.2 && x >= 4
	}
	ts = append(ts, t)
	t = Target{Name: "durable 1 KiB, batching publishers, on_commit", Want: "≥ 80 % of the group-commit limit; ≥ 20 × JetStream sync-always", Got: "not measured"}
	if r := get("durable 1 KiB, 8 batching", ""); r != nil {
		js := "JetStream not measured"
		if r.PeerIs != "" {
			js = fmt.Sprintf("%.1f × JetStream", r.PeerRatio)
		}
		t.Got = fmt.Sprintf("%.1f %% of %s records/s; %s", 100*r.Ratio, FormatRate(median(r.CeilingValue)), js)
		t.Met = r.Ratio >= 0.8 && r.PeerRatio >= 20
	}
	return append(ts, t)
}

func formatRatios(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, ", ")
}

// writeCeilings writes the Felix ÷ ceiling section and issue 22's targets.
func (c *CompareReport) writeCeilings(b *strings.Builder) {
	if len(c.CeilingRows) == 0 && len(c.Ceilings) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Felix ÷ QUIC ceiling (issue 22)\n\nThe ceilings are minimal quic-go programs with the broker's TLS 1.3 and QUIC settings "+
		"(bench/ceilings), each run right after the Felix shape it bounds, in %d round(s). Ratio: Felix ÷ ceiling for rates, ceiling ÷ Felix for latencies, "+
		"so 1 is at the ceiling; the median over the rounds, each round's in brackets. The durable floor is the 1 KiB round trip's p50 plus "+
		"4 KiB write + fdatasync's p50; the group-commit limit is 64 KiB fdatasyncs/s × 64; both measured before each round (%s).\n\n",
		max(c.Rounds, 1), c.diskRounds())
	b.WriteString("| shape | metric | Felix | ceiling | ceiling is | Felix vs ceiling | Felix vs peer | peer |\n| --- | --- | ---: | ---: | --- | ---: | ---: | --- |\n")
	for _, r := range c.CeilingRows {
		ceil := r.Ceiling
		if ceil == "" {
			ceil = "group-commit limit"
		}
		peer := "–"
		if r.PeerIs != "" {
			peer = fmt.Sprintf("%.2f", r.PeerRatio)
		}
		fmt.Fprintf(b, "| %s | %s | %.4g | %.4g | %s | **%.2f** (%s) | %s | %s |\n", r.Label, r.Metric, median(r.Felix), median(r.CeilingValue),
			ceil, r.Ratio, formatRatios(r.Ratios), peer, r.PeerIs)
	}
	b.WriteString("\n### Targets (issue 22)\n\n| target | wanted | measured | met |\n| --- | --- | --- | --- |\n")
	for _, t := range c.Targets22 {
		met := "**missed**"
		if t.Met {
			met = "met"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", t.Name, t.Want, t.Got, met)
	}
}

// diskRounds lists each round's write + fdatasync p50 and group-commit limit.
func (c *CompareReport) diskRounds() string {
	var parts []string
	for i, l := range append([]Limits{c.Limits}, c.DiskRounds...) {
		parts = append(parts, fmt.Sprintf("round %d: %s, %s records/s", i+1, FormatLatency(l.SyncWriteP50), FormatRate(l.GroupCommit1KiB())))
	}
	return strings.Join(parts, "; ")
}

// roundShapes are the Felix shapes repeated in rounds 2 and later: those a ceiling or the
// group-commit limit bounds.
func roundShapes(shapes []string) []string {
	var out []string
	for _, s := range shapes {
		if len(ceilingsFor(s)) > 0 || s == "durable-1k-on_commit-b64" {
			out = append(out, s)
		}
	}
	return out
}

// roundSteps counts the runs of rounds 2..n (OnStep's total).
func roundSteps(shapes []string, rounds int, withCeilings bool) int {
	n := 0
	for _, s := range roundShapes(shapes) {
		n++
		if withCeilings {
			n += len(ceilingsFor(s))
		}
	}
	return n * max(rounds-1, 0)
}

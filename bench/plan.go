package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// ErrNoKnee is returned by RunPlan when no offered rate kept p99 under the SLO.
var ErrNoKnee = errors.New("bench: no rate met the SLO")

// PlanOptions configure a capacity sweep (issue 10, "Capacity planning").
type PlanOptions struct {
	Shape Shape
	// SLOP99 is the p99 latency every accepted rate must stay under.
	SLOP99 time.Duration
	// Steps is the number of evenly spaced rates swept up to the closed-loop maximum
	// (default 8); two bisection steps then refine the knee. When no step meets the SLO,
	// two lower rates (the lowest step ÷ 4 and ÷ 16) are tried first.
	Steps int
	// Step sizes each point (warm-up, duration); Rate is set per point.
	Step Settings
	// MaxRate > 0 skips the closed-loop probe and sweeps up to it.
	MaxRate float64
	// OnPoint, when set, is called after every measured point.
	OnPoint func(PlanPoint)
}

// PlanPoint is one offered rate and what the broker did at it.
type PlanPoint struct {
	Offered   float64       `json:"offered_rate"`
	Achieved  float64       `json:"records_per_sec"`
	BytesPS   float64       `json:"bytes_per_sec"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	P999      time.Duration `json:"p999_ns"`
	CPUCores  float64       `json:"broker_cpu_cores"`
	RSS       int64         `json:"broker_rss_bytes"`
	Err       string        `json:"error,omitempty"`
	WithinSLO bool          `json:"within_slo"`
}

// Plan is the outcome of a sweep: every point in offered order and the knee.
type Plan struct {
	Shape     Shape         `json:"shape"`
	SLOP99    time.Duration `json:"slo_p99_ns"`
	ClosedMax float64       `json:"closed_loop_max"`
	Points    []PlanPoint   `json:"points"`
	Knee      int           `json:"knee"` // index into Points, -1 when none
}

// accept says whether a point meets the SLO: it ran, its p99 is within slo, and it
// delivered at least 95 % of the offered rate (an open loop that falls behind is queueing).
func accept(p PlanPoint, slo time.Duration) bool {
	return p.Err == "" && p.P99 > 0 && p.P99 <= slo && p.Achieved >= 0.95*p.Offered
}

// FindKnee returns the index of the knee: walking the points up by offered rate, the last
// one that meets the SLO (accept) before the first that does not, so the p99 stays under
// the SLO at every measured rate up to it; -1 when the lowest rate already misses. A point
// that meets the SLO above a missed one (noise on a shared machine) is not the knee.
func FindKnee(points []PlanPoint, slo time.Duration) int {
	idx := make([]int, len(points))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return points[idx[a]].Offered < points[idx[b]].Offered })
	best := -1
	for _, i := range idx {
		if !accept(points[i], slo) {
			break
		}
		best = i
	}
	return best
}

// SweepRates returns steps rates evenly spaced in (0, max]: max/steps, 2·max/steps, …, max.
func SweepRates(max float64, steps int) []float64 {
	out := make([]float64, steps)
	for i := range out {
		out[i] = math.Round(max * float64(i+1) / float64(steps))
	}
	return out
}

// RunPlan sweeps the offered rate of o.Shape with r and finds the knee. Errors: a
// failed closed-loop probe, ErrNoKnee (the Plan is still returned for the report).
func RunPlan(ctx context.Context, r *Runner, o PlanOptions) (Plan, error) {
	if o.Steps <= 0 {
		o.Steps = 8
	}
	p := Plan{Shape: o.Shape, SLOP99: o.SLOP99, Knee: -1}
	max := o.MaxRate
	if max <= 0 {
		s := o.Step
		s.Rate = 0
		res, err := r.Run(ctx, o.Shape, s)
		if err != nil {
			return p, fmt.Errorf("closed-loop probe: %w", err)
		}
		max = res.RecordsPerSec / float64(fanoutOf(o.Shape)) // offered = published, delivered = × fanout
	}
	p.ClosedMax = max
	sw := sweeper{r: r, o: o}
	for _, rate := range SweepRates(max, o.Steps) {
		if ctx.Err() != nil {
			return p, ctx.Err()
		}
		p.Points = append(p.Points, sw.measure(ctx, rate))
	}
	// Nothing met the SLO: look below the lowest step (÷ 4, ÷ 16) before giving up.
	for _, div := range []float64{4, 16} {
		if FindKnee(p.Points, o.SLOP99) >= 0 || ctx.Err() != nil {
			break
		}
		if rate := math.Round(max / float64(o.Steps) / div); rate >= 1 {
			p.Points = append(p.Points, sw.measure(ctx, rate))
		}
	}
	sw.refine(ctx, &p, max)
	sort.Slice(p.Points, func(i, j int) bool { return p.Points[i].Offered < p.Points[j].Offered })
	p.Knee = FindKnee(p.Points, o.SLOP99)
	if p.Knee < 0 {
		return p, fmt.Errorf("%w: p99 ≤ %v for %s", ErrNoKnee, o.SLOP99, o.Shape.Name)
	}
	return p, nil
}

// sweeper measures plan points.
type sweeper struct {
	r *Runner
	o PlanOptions
}

// fanoutOf is the deliveries per published record of a shape (1 except pub/sub fanout).
func fanoutOf(s Shape) int {
	if s.Kind == KindPubSub {
		return max1(s.Fanout)
	}
	return 1
}

// measure runs the shape open loop at rate; a failed run is a point with Err.
func (sw sweeper) measure(ctx context.Context, rate float64) PlanPoint {
	s := sw.o.Step
	s.Rate = rate
	pt := PlanPoint{Offered: rate}
	res, err := sw.r.Run(ctx, sw.o.Shape, s)
	if err != nil {
		pt.Err = err.Error()
	} else {
		f := float64(fanoutOf(sw.o.Shape))
		pt.Achieved, pt.BytesPS = res.RecordsPerSec/f, res.BytesPerSec/f
		pt.P50, pt.P99, pt.P999 = res.Latency.P50, res.Latency.P99, res.Latency.P999
		pt.CPUCores, pt.RSS = res.BrokerCPUCores, res.BrokerRSS
	}
	pt.WithinSLO = accept(pt, sw.o.SLOP99)
	if sw.o.OnPoint != nil {
		sw.o.OnPoint(pt)
	}
	return pt
}

// refine bisects twice between the knee and the next rate up.
func (sw sweeper) refine(ctx context.Context, p *Plan, max float64) {
	for i := 0; i < 2; i++ {
		k := FindKnee(p.Points, sw.o.SLOP99)
		lo, hi := 0.0, max
		if k >= 0 {
			lo = p.Points[k].Offered
		}
		for _, pt := range p.Points {
			if pt.Offered > lo && pt.Offered < hi {
				hi = pt.Offered
			}
		}
		if hi-lo < max/float64(4*sw.o.Steps) || ctx.Err() != nil {
			return
		}
		p.Points = append(p.Points, sw.measure(ctx, math.Round((lo+hi)/2)))
	}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// SizingLine is the per-broker sizing sentence for the knee: what one broker on a machine
// like m sustains within the SLO, its CPU per core and RSS there. "" without a knee.
func (p Plan) SizingLine(m Machine) string {
	if p.Knee < 0 || p.Knee >= len(p.Points) {
		return ""
	}
	k := p.Points[p.Knee]
	perCore := 0.0
	if m.Cores > 0 {
		perCore = k.CPUCores / float64(m.Cores) * 100
	}
	return fmt.Sprintf("One broker on this machine kind (%d cores, %s) sustains %s records/s of %s (%s) with p99 %s ≤ SLO %s, "+
		"using %.2f cores (%.0f %% of each of %d cores) and %.0f MiB RSS; plan ceil(load ÷ %s/s) brokers of this kind per %s load.",
		m.Cores, m.CPUModel, FormatRate(k.Offered), p.Shape.Name, FormatBytes(k.BytesPS), FormatLatency(k.P99), p.SLOP99,
		k.CPUCores, perCore, m.Cores, float64(k.RSS)/(1<<20), FormatRate(k.Offered), p.Shape.Name)
}

package bench

import (
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Charts are drawn with gonum.org/v1/plot; the file name's extension (.svg or .png)
// picks the format.

var percentileNames = []string{"p50", "p90", "p99", "p99.9", "max"}

// LatencyChart draws grouped bars of p50, p90, p99, p99.9 and max (µs) for
// each result of one shape (Felix and its peers) into file. Results without latency are
// left out; with none left it returns nil and writes nothing.
func LatencyChart(title string, rs []Result, file string) error {
	var with []Result
	for _, r := range rs {
		if r.Latency.Count > 0 {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "latency (µs)"
	w := vg.Points(60 / float64(len(with)))
	for i, r := range with {
		l := r.Latency
		vals := plotter.Values{us(l.P50), us(l.P90), us(l.P99), us(l.P999), us(l.Max)}
		bars, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return err
		}
		bars.LineStyle.Width = 0
		bars.Color = plotutil.Color(i)
		bars.Offset = w * vg.Length(float64(i)-float64(len(with)-1)/2)
		bars.Horizontal = false
		p.Add(bars)
		p.Legend.Add(r.System, bars)
	}
	p.Y.Min = 0
	p.Legend.Top = true
	p.NominalX(percentileNames...)
	return p.Save(7*vg.Inch, 4*vg.Inch, file)
}

// ThroughputChart draws one horizontal bar per result: delivered MB/s, labelled
// "system shape (records/s)".
func ThroughputChart(title string, rs []Result, file string) error {
	if len(rs) == 0 {
		return nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "MB/s delivered (payload bytes)"
	vals := make(plotter.Values, len(rs))
	names := make([]string, len(rs))
	for i, r := range rs {
		vals[i] = r.BytesPerSec / 1e6
		names[i] = fmt.Sprintf("%s %s (%s/s)", r.System, r.Shape.Name, FormatRate(r.RecordsPerSec))
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(10))
	if err != nil {
		return err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 40, G: 110, B: 190, A: 255}
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.NominalY(names...)
	return p.Save(9*vg.Inch, vg.Length(1+0.3*float64(len(rs)))*vg.Inch, file)
}

// PlanChart draws the latency-throughput curve of a plan: p50, p99 and p99.9 (ms, log scale)
// against achieved records/s, with the SLO as a horizontal line.
func PlanChart(pl Plan, file string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: latency vs throughput (SLO p99 %v)", pl.Shape.Name, pl.SLOP99)
	p.X.Label.Text = "records/s achieved (open loop)"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	series := []struct {
		name string
		get  func(PlanPoint) time.Duration
	}{{"p50", func(x PlanPoint) time.Duration { return x.P50 }},
		{"p99", func(x PlanPoint) time.Duration { return x.P99 }},
		{"p99.9", func(x PlanPoint) time.Duration { return x.P999 }}}
	maxX := 0.0
	for i, s := range series {
		var xys plotter.XYs
		for _, pt := range pl.Points {
			if pt.Err != "" {
				continue
			}
			xys = append(xys, plotter.XY{X: pt.Achieved, Y: math.Max(float64(s.get(pt))/1e6, 0.001)})
			maxX = math.Max(maxX, pt.Achieved)
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
	}
	slo, err := plotter.NewLine(plotter.XYs{{X: 0, Y: float64(pl.SLOP99) / 1e6}, {X: math.Max(maxX, 1), Y: float64(pl.SLOP99) / 1e6}})
	if err != nil {
		return err
	}
	slo.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
	p.Add(slo)
	p.Legend.Add("SLO", slo)
	p.Legend.Top = true
	p.Legend.Left = true
	return p.Save(7*vg.Inch, 4*vg.Inch, file)
}

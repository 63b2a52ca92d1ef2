package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteJSONLine writes v as one JSON line: the machine facts ({"type":"machine",...}), a
// {"type":"result",...} line per Result (every setting included), a plan.
func WriteJSONLine(w io.Writer, kind string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if kind != "" && len(b) > 1 && b[0] == '{' {
		b = append([]byte(fmt.Sprintf(`{"type":%q,`, kind)), b[1:]...)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// FormatRate prints a rate with k/M suffixes (3 significant digits).
func FormatRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3g M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3g k", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// FormatBytes prints bytes/s in MB/s (10^6).
func FormatBytes(v float64) string { return fmt.Sprintf("%.1f MB/s", v/1e6) }

// FormatLatency prints a duration in µs below 10 ms, else ms.
func FormatLatency(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.0f µs", us(d))
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// WriteResultsTable writes one Markdown row per result: system, shape, loop, records/s,
// MB/s, p50, p90, p99, p99.9, max, server CPU (cores) and RSS, CPU per record or operation
// of the server and of the client (load generator), warnings.
func WriteResultsTable(w io.Writer, rs []Result) error {
	var b strings.Builder
	b.WriteString("| system | shape | loop | records/s | MB/s | p50 | p90 | p99 | p99.9 | max | server CPU (cores) | server RSS | CPU per op: server / client | sent / delivered / dropped | notes |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, r := range rs {
		loop := r.Loop
		if r.Loop == "open" {
			loop = "open @ " + FormatRate(r.OfferedRate) + "/s"
		}
		notes := r.Shape.Note
		if len(r.Warnings) > 0 {
			notes = strings.TrimSpace(notes + "; ⚠ " + strings.Join(r.Warnings, "; "))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %s | %.2f | %.0f MiB | %s / %s | %d / %d / %d | %s |\n",
			r.System, r.Shape.Name, loop, FormatRate(r.RecordsPerSec), r.BytesPerSec/1e6,
			FormatLatency(r.Latency.P50), FormatLatency(r.Latency.P90), FormatLatency(r.Latency.P99),
			FormatLatency(r.Latency.P999), FormatLatency(r.Latency.Max), r.BrokerCPUCores, float64(r.BrokerRSS)/(1<<20),
			formatCPUPerOp(r.BrokerCPUCores, r.RecordsPerSec), formatCPUPerOp(r.ClientCPUCores, r.RecordsPerSec), r.Sent, r.Delivered, r.Dropped, notes)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatCPUPerOp prints CPUPerOp in µs with 3 significant digits ("–" when not measured).
func formatCPUPerOp(cores, perSec float64) string {
	d := CPUPerOp(cores, perSec)
	if d == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3g µs", us(d))
}

package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// FuzzResultJSON: any line (felix-peers output, a JSON-lines file) decodes into a Result
// or fails with an error, never a panic; what decodes re-encodes.
func FuzzResultJSON(f *testing.F) {
	for _, r := range []Result{
		{System: "felix", Shape: Shape{Name: "pubsub-1k", Kind: KindPubSub, Payload: 1024}, Latency: Percentiles{Count: 2, P99: time.Millisecond}},
		{System: "redis", PeerSettings: map[string]any{"clients": 50}, Warnings: []string{"small"}},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"latency":{"p99_us":1e308}}`))
	f.Add([]byte(`{"latency":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Result
		if json.Unmarshal(b, &r) != nil {
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("decoded %q but cannot encode: %v", b, err)
		}
	})
}

// FuzzProcParsers: /proc parsing never panics and reports bad input as ErrProcFormat. On
// any bytes: an error is ErrProcFormat with no figure, a CPU time is whole 10 ms ticks and
// an RSS whole KiB. A stat line built from the fuzzed fields (any command name) gives
// exactly utime+stime, or ErrProcFormat when the ticks are negative or overflow a
// Duration; a status file's VmRSS line gives exactly its KiB in bytes (0 when negative).
func FuzzProcParsers(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b, "felix", int64(7), int64(3), int64(1234))
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b, "a) b (c", int64(0), int64(0), int64(0))
	}
	f.Add([]byte("1 (a b) S 0 0 0 0 0 0 0 0 0 0 7 3 0 0"), "", int64(-1), int64(1), int64(-5))
	f.Add([]byte("VmRSS:\t  1234 kB\n"), "x\nVmRSS: 9 kB", int64(math.MaxInt64), int64(1), int64(1)<<50)
	f.Fuzz(func(t *testing.T, b []byte, comm string, ut, st, kb int64) {
		d, err := ParseProcStatCPU(b)
		if err != nil && (!errors.Is(err, ErrProcFormat) || d != 0) {
			t.Fatalf("error %v with %v: want ErrProcFormat and no figure", err, d)
		}
		if d < 0 || d%tick != 0 {
			t.Fatalf("CPU time %v is not a count of 10 ms ticks", d)
		}
		if rss := ParseVmRSS(b); rss < 0 || rss%1024 != 0 {
			t.Fatalf("RSS %d is not a count of KiB", rss)
		}
		checkStatLine(t, comm, ut, st)
		checkVmRSSLine(t, comm, kb)
	})
}

// tick is the unit of /proc/<pid>/stat's utime and stime (USER_HZ = 100).
const tick = 10 * time.Millisecond

// plausibleTicks bounds the tick counts a stat line must be accepted with (21 years).
const plausibleTicks = 1 << 36

// checkStatLine parses a stat line with command name comm, utime ut and stime st.
func checkStatLine(t *testing.T, comm string, ut, st int64) {
	t.Helper()
	line := fmt.Sprintf("42 (%s) S 1 2 3 4 5 6 7 8 9 10 %d %d 0 0 20 0 1 0 99", comm, ut, st)
	d, err := ParseProcStatCPU([]byte(line))
	maxTicks := int64(math.MaxInt64 / tick)
	fits := ut >= 0 && st >= 0 && ut <= maxTicks && st <= maxTicks-ut
	switch {
	case err == nil && (!fits || d != time.Duration(ut+st)*tick):
		t.Fatalf("%q: %v, want (%d + %d) × 10 ms or ErrProcFormat when that overflows", line, d, ut, st)
	case err != nil && !errors.Is(err, ErrProcFormat):
		t.Fatalf("%q: untyped error %v", line, err)
	case err != nil && fits && ut <= plausibleTicks && st <= plausibleTicks:
		t.Fatalf("%q: refused a well-formed line: %v", line, err)
	}
}

// checkVmRSSLine parses a status file whose VmRSS line says kb (after a Name line of comm).
func checkVmRSSLine(t *testing.T, comm string, kb int64) {
	t.Helper()
	status := fmt.Sprintf("Name:\t%s\nVmRSS:\t  %d kB\nVmSwap:\t       0 kB\n", strings.ReplaceAll(comm, "\n", " "), kb)
	got := ParseVmRSS([]byte(status))
	switch {
	case kb < 0 || kb >= 1<<53:
		if got != 0 {
			t.Fatalf("%q: RSS %d, want 0 (negative or past int64 bytes)", status, got)
		}
	case got != kb<<10 && (got != 0 || kb < 1<<40):
		t.Fatalf("%q: RSS %d, want %d", status, got, kb<<10)
	}
}

func TestProcParsers(t *testing.T) {
	d, err := ParseProcStatCPU([]byte("42 (my (odd) cmd) S 1 2 3 4 5 6 7 8 9 10 150 50 0 0"))
	if err != nil || d != 2*time.Second {
		t.Fatalf("%v %v", d, err)
	}
	if _, err := ParseProcStatCPU([]byte("42 cmd S")); !errors.Is(err, ErrProcFormat) {
		t.Fatalf("err = %v", err)
	}
	if _, err := ParseProcStatCPU([]byte("42 (c) S 1 2 3 4 5 6 7 8 9 10 x 50 0")); !errors.Is(err, ErrProcFormat) {
		t.Fatalf("err = %v", err)
	}
	if n := ParseVmRSS([]byte("Name:\tx\nVmRSS:\t  2048 kB\n")); n != 2048<<10 {
		t.Fatalf("rss %d", n)
	}
	if n := ParseVmRSS([]byte("VmRSS: lots\n")); n != 0 {
		t.Fatalf("rss %d", n)
	}
}

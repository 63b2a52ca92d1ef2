package bench

import (
	"encoding/json"
	"errors"
	"os"
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

// FuzzProcParsers: /proc parsing never panics and reports bad input as ErrProcFormat.
func FuzzProcParsers(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		f.Add(b)
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("1 (a b) S 0 0 0 0 0 0 0 0 0 0 7 3 0 0"))
	f.Add([]byte("VmRSS:\t  1234 kB\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseProcStatCPU(b)
		if err != nil && !errors.Is(err, ErrProcFormat) {
			t.Fatalf("untyped error %v", err)
		}
		if d < 0 {
			t.Fatalf("negative CPU time %v", d)
		}
		if ParseVmRSS(b) < 0 {
			t.Fatal("negative RSS")
		}
	})
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

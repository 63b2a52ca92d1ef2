package checker

import (
	"bytes"
	"testing"
	"time"

	"felix/testbed/history"
)

// FuzzCheckAll: any history that loads is checked without a panic. Seeds:
// every selftest history, planted and clean.
func FuzzCheckAll(f *testing.F) {
	for _, c := range SelfTestCases() {
		for _, planted := range []bool{true, false} {
			var buf bytes.Buffer
			if err := history.Write(&buf, c.Build(planted)); err != nil {
				f.Fatal(err)
			}
			f.Add(buf.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := history.Load(bytes.NewReader(data))
		if err != nil || len(h.Ops) > 64 {
			return // Load's own fuzz target covers refusals; keep porcupine's search small
		}
		rep, err := CheckAll(h, Options{Linear: LinearOptions{Timeout: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings() {
			if f.Anomaly == "" || f.String() == "" {
				t.Fatalf("empty finding %+v", f)
			}
		}
	})
}

package faultproxy

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseFaults: any control request body either parses to a valid spec that survives a JSON
// round trip, or fails with a *FaultError; it never panics.
func FuzzParseFaults(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"delay":"20ms","jitter":"2ms","loss_pct":5}`, `{"blackhole":true}`, `{"loss_pct":101}`,
		`{"reorder_pct":10,"reorder_window":3,"reorder_timeout":"5ms"}`, `{"rate_bytes_per_sec":1000000}`,
		`{"max_datagram":1200,"corrupt_pct":1}`, `{"delay":5}`, `{"nope":1}`, `[]`, `{} {}`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		spec, err := ParseFaults(body)
		if err != nil {
			var fe *FaultError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidFaults) {
				t.Fatalf("error %v (%T) is not a *FaultError", err, err)
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("ParseFaults accepted an invalid spec: %v", err)
		}
		enc, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseFaults(enc)
		if err != nil || back != spec {
			t.Fatalf("round trip %s: %v, %+v != %+v", enc, err, back, spec)
		}
	})
}

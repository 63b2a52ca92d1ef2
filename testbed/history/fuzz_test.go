package history

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzLoad: Load never panics; it loads or returns a *LineError, and what
// it loads survives Write and Load unchanged.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"index":0,"process":1,"kind":"publish","invoke_ns":1,"complete_ns":2,"outcome":"ok","in":{"stream":"s","payloads":["a",{"base64":"/w=="}]},"out":{"shard":1,"offsets":[4,5]}}`))
	f.Add([]byte(`{"index":3,"kind":"subscribe-read","outcome":"info","in":{"stream":"s","subscription":"x","from":2},"out":{"records":[{"offset":2,"payload":"a"}],"skipped":[{"from":0,"to":2}]}}` + "\n\n" + `{"index":1,"kind":"cache-get","outcome":"fail","in":{"cache":"c","key":""}}`))
	f.Add([]byte("{\"index\":\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Load(bytes.NewReader(data))
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error %v is not a *LineError with a line", err)
			}
			return
		}
		var a, b bytes.Buffer
		if err := Write(&a, h); err != nil {
			t.Fatal(err)
		}
		again, err := Load(bytes.NewReader(a.Bytes()))
		if err != nil {
			t.Fatalf("reload: %v\n%s", err, a.String())
		}
		if err := Write(&b, again); err != nil || a.String() != b.String() {
			t.Fatalf("round trip changed the history (%v):\n%s\n%s", err, a.String(), b.String())
		}
	})
}

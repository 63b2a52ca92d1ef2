package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock advances 10 ns per reading, concurrency-safe.
func fakeClock() func() time.Time {
	var n atomic.Int64
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	return func() time.Time { return base.Add(time.Duration(n.Add(10))) }
}

func TestRecorderRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	r := NewRecorder(&buf, RecorderOptions{Now: fakeClock()})
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				id := fmt.Sprintf("p-%d-%d", w, i)
				p := r.Invoke(w, "c", KindPublish, Input{Stream: "s", Payloads: Payloads(id)})
				if err := p.Ok(Output{Shard: w % 2, Offsets: []uint64{uint64(i)}}); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	open := r.Invoke(99, "c", KindCachePut, Input{Cache: "c", Key: Bytes("k"), Value: Bytes{0xff, 0x00}})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := open.Ok(Output{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Complete after Close: %v, want ErrClosed", err)
	}
	var lastComplete int64
	for i, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var op Op
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			t.Fatal(err)
		}
		if op.CompleteNS < lastComplete {
			t.Fatalf("line %d completes at %d, before the previous line's %d", i+1, op.CompleteNS, lastComplete)
		}
		lastComplete = op.CompleteNS
	}
	h, err := Load(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(h.Ops); i++ {
		if h.Ops[i].InvokeNS < h.Ops[i-1].InvokeNS {
			t.Fatalf("index %d invoked at %d, before index %d at %d", i, h.Ops[i].InvokeNS, i-1, h.Ops[i-1].InvokeNS)
		}
	}
	if len(h.Ops) != workers*each+1 {
		t.Fatalf("loaded %d ops, want %d", len(h.Ops), workers*each+1)
	}
	for i, op := range h.Ops {
		if op.Index != i || op.CompleteNS < op.InvokeNS || op.InvokeWall.IsZero() {
			t.Fatalf("op %d: %+v", i, op)
		}
	}
	last := h.Ops[len(h.Ops)-1]
	if last.Outcome != Info || !bytes.Equal(last.In.Value, []byte{0xff, 0x00}) || last.Process != 99 {
		t.Fatalf("pending op at Close: %+v", last)
	}
}

func TestRecorderCompleteTwice(t *testing.T) {
	r := NewRecorder(&bytes.Buffer{}, RecorderOptions{Now: fakeClock()})
	p := r.Invoke(0, "", KindCacheGet, Input{Cache: "c", Key: Bytes("k")})
	if err := p.Info(Output{}, errors.New("timeout")); err != nil {
		t.Fatal(err)
	}
	if err := p.Ok(Output{}); !errors.Is(err, ErrCompleted) {
		t.Fatalf("second Complete: %v, want ErrCompleted", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRecorderStickyWriteError(t *testing.T) {
	r := NewRecorder(failingWriter{}, RecorderOptions{})
	err := r.Record(0, "", KindCounterGet, Input{Cache: "c", Key: Bytes("k")}, OK, Output{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Record: %v", err)
	}
	if r.Err() == nil || r.Close() == nil {
		t.Fatal("write error not sticky")
	}
}

func TestCreateRecorderAndLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	// A fake clock that moves 1 ms per reading: the operation takes time without a sleep.
	var mu sync.Mutex
	now := time.Now()
	tick := func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now }
	r, err := CreateRecorder(path, RecorderOptions{Now: tick})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Invoke(1, "n1", KindCounterAdd, Input{Cache: "c", Key: Bytes("k"), Delta: -3})
	if err := p.Ok(Output{Sum: -3}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	op := h.Ops[0]
	if op.Out.Sum != -3 || op.In.Delta != -3 || op.CompleteNS-op.InvokeNS < int64(time.Millisecond) {
		t.Fatalf("loaded %+v", op)
	}
	if !op.CompleteWall.After(op.InvokeWall) || op.InvokeWall.Before(r.Start()) {
		t.Fatalf("wall times %v .. %v, start %v", op.InvokeWall, op.CompleteWall, r.Start())
	}
}

func TestBytesJSON(t *testing.T) {
	for _, b := range []Bytes{nil, {}, Bytes("plain"), {0xff, 0xfe, 0x00}} {
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		var back Bytes
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if !bytes.Equal(back, b) || (b == nil) != (back == nil) {
			t.Fatalf("%q -> %s -> %q", b, data, back)
		}
	}
	for _, bad := range []string{`12`, `{"x":"y"}`, `{"base64":"!!"}`, `[1]`} {
		var b Bytes
		if err := json.Unmarshal([]byte(bad), &b); err == nil {
			t.Errorf("%s decoded without error", bad)
		}
	}
}

func TestLoadErrorsNameTheLine(t *testing.T) {
	good := `{"index":0,"process":0,"kind":"cache-get","invoke_ns":1,"complete_ns":2,"outcome":"ok","in":{"cache":"c"}}`
	cases := []struct {
		name, second string
		want         error
	}{
		{"not json", `{"index":`, ErrMalformed},
		{"wrong type", `{"index":"one"}`, ErrMalformed},
		{"trailing", good + ` {}`, ErrMalformed},
		{"bad bytes", strings.Replace(good, `"cache":"c"`, `"cache":"c","key":{"base64":"%"}`, 1), ErrMalformed},
		{"unknown kind", strings.Replace(good, "cache-get", "teleport", 1), ErrInvalid},
		{"bad outcome", strings.Replace(good, `"ok"`, `"maybe"`, 1), ErrInvalid},
		{"time backwards", strings.Replace(good, `"complete_ns":2`, `"complete_ns":0`, 1), ErrInvalid},
		{"missing field", strings.Replace(good, `"cache":"c"`, `"key":"k"`, 1), ErrInvalid},
		{"publish offsets", `{"index":1,"kind":"publish","outcome":"ok","in":{"stream":"s","payloads":["a","b"]},"out":{"offsets":[0]}}`, ErrInvalid},
		{"duplicate index", good, ErrDuplicateIndex},
		{"null", `null`, ErrInvalid},
	}
	for _, c := range cases {
		_, err := Load(strings.NewReader(good + "\n\n" + c.second + "\n"))
		var le *LineError
		if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want a *LineError on line 3 wrapping %v", c.name, err, c.want)
		}
	}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	b := NewBuilder()
	b.Add(Op{Kind: KindPublish, In: Input{Stream: "s", Payloads: Payloads("a", "b")},
		Out: Output{Shard: 1, Offsets: []uint64{4, 5}}})
	b.Add(Op{Kind: KindSubscribeRead, In: Input{Stream: "s", Shard: 1, Subscription: "x", From: Offset(4)},
		Out: Output{Records: []Record{{Offset: 4, Payload: Bytes("a")}}, Skipped: []OffsetRange{{0, 4}}}})
	b.Add(Op{Kind: KindCacheGet, Outcome: Info, InvokeNS: 1, CompleteNS: 50, In: Input{Cache: "c", Key: Bytes("k")}})
	h := b.History()
	var buf bytes.Buffer
	if err := Write(&buf, h); err != nil {
		t.Fatal(err)
	}
	back, err := Load(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := Write(&again, back); err != nil {
		t.Fatal(err)
	}
	if again.String() != buf.String() {
		t.Fatalf("round trip changed the history:\n%s\n%s", buf.String(), again.String())
	}
	if back.ByIndex(2) != 2 || back.ByIndex(7) != -1 || *back.Ops[1].In.From != 4 {
		t.Fatalf("ByIndex/From wrong: %+v", back.Ops[1].In)
	}
}

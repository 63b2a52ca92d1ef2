package faultproxy

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// controlBed is a bed whose proxy serves the control API on 127.0.0.1:0.
func controlBed(t *testing.T) (*bed, string) {
	t.Helper()
	b := newBed(t, Config{})
	addr, err := b.p.ServeControl("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return b, "http://" + addr.String()
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

// call sends one request and decodes a JSON answer into out (when non-nil); it returns the status.
func call(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, data)
		}
	}
	if resp.StatusCode >= 400 && !strings.Contains(string(data), `"error"`) {
		t.Errorf("%s %s: status %d without an error document: %s", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode
}

func TestControlAPI(t *testing.T) {
	b, base := controlBed(t)
	var snap Snapshot
	if st := call(t, "GET", base+"/links", "", &snap); st != 200 || snap.Seed != b.p.Seed() || len(snap.Links) != 2 {
		t.Fatalf("GET /links: %d %+v", st, snap)
	}
	var ls struct {
		Link   string    `json:"link"`
		Faults Faults    `json:"faults"`
		Stats  LinkStats `json:"stats"`
	}
	body := `{"delay":"15ms","jitter":"1ms","loss_pct":12.5,"blackhole":false,"max_datagram":1200}`
	if st := call(t, "PUT", base+"/links/to-client", body, &ls); st != 200 || ls.Link != "to-client" {
		t.Fatalf("PUT /links/to-client: %d %+v", st, ls)
	}
	want := Faults{Delay: 15 * time.Millisecond, Jitter: time.Millisecond, LossPct: 12.5, MaxDatagram: 1200}
	if got, _ := b.p.Faults(ToClient); got != want || ls.Faults != want {
		t.Fatalf("to-client faults %+v (answer %+v), want %+v", got, ls.Faults, want)
	}
	if st := call(t, "PUT", base+"/links/both", `{"blackhole":true}`, &snap); st != 200 || !snap.Links[0].Faults.Blackhole || !snap.Links[1].Faults.Blackhole {
		t.Fatalf("PUT /links/both: %d %+v", st, snap)
	}
	if st := call(t, "POST", base+"/reset", "", &snap); st != 200 || !snap.Links[0].Faults.IsZero() || !snap.Links[1].Faults.IsZero() {
		t.Fatalf("POST /reset: %d %+v", st, snap)
	}
	var changes []struct {
		Time   time.Time `json:"time"`
		Link   string    `json:"link"`
		Source string    `json:"source"`
		After  Faults    `json:"after"`
	}
	if st := call(t, "GET", base+"/changes", "", &changes); st != 200 || len(changes) != 7 {
		t.Fatalf("GET /changes: %d, %d changes (want 2 config + 1 + 2 + 2): %+v", st, len(changes), changes)
	}
	last := changes[6]
	if !strings.HasPrefix(last.Source, "http 127.0.0.1:") || !strings.HasSuffix(last.Source, " reset") || last.Time.IsZero() || last.Link != "to-client" {
		t.Fatalf("last change %+v", last)
	}
	if r := b.stream(streamOpts{n: 200}); r.unique != 200 {
		t.Fatalf("after POST /reset: %d of 200", r.unique)
	}
}

func TestControlAPIRefusesBadRequests(t *testing.T) {
	_, base := controlBed(t)
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/links/to-server", `{"loss_pct":`, 400},          // malformed JSON
		{"PUT", "/links/to-server", `{"loss":5}`, 400},            // unknown field
		{"PUT", "/links/to-server", `{"loss_pct":150}`, 400},      // out of range
		{"PUT", "/links/to-server", `{"delay":"soon"}`, 400},      // bad duration
		{"PUT", "/links/to-server", `{"delay":20}`, 400},          // a number is not a duration
		{"PUT", "/links/to-server", `{"reorder_window":65}`, 400}, // over MaxReorderWindow
		{"PUT", "/links/to-server", `{} {"blackhole":true}`, 400}, // trailing data
		{"PUT", "/links/to-server", ``, 400},                      // empty body
		{"PUT", "/links/sideways", `{}`, 400},                     // unknown link
		{"GET", "/links/sideways", ``, 400},                       // unknown link
		{"PUT", "/links/to-server", `{"x":"` + strings.Repeat("a", 70<<10) + `"}`, 413},
		{"POST", "/links", ``, 405},
		{"DELETE", "/reset", ``, 405},
	} {
		if got := call(t, c.method, base+c.path, c.body, nil); got != c.want {
			t.Errorf("%s %s %.40q: status %d, want %d", c.method, c.path, c.body, got, c.want)
		}
	}
}

func TestControlRefusesNonLoopbackHost(t *testing.T) {
	_, base := controlBed(t)
	req, _ := http.NewRequest("GET", base+"/links", nil)
	req.Host = "evil.example:80"
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("Host evil.example: status %d, want 403", resp.StatusCode)
	}
}

func TestServeControlRefusesNonLoopback(t *testing.T) {
	b := newBed(t, Config{})
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "10.0.0.1:0", "example.com:0"} {
		if _, err := b.p.ServeControl(addr); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("ServeControl(%q) = %v, want ErrNotLoopback", addr, err)
		}
	}
	if _, err := b.p.ServeControl("nonsense"); !errors.Is(err, ErrConfig) {
		t.Errorf("ServeControl(nonsense) = %v, want ErrConfig", err)
	}
}

package main

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestOpsEndpointsAndDrain(t *testing.T) {
	env := map[string]string{"FELIX_CONTROLPLANE_DATA_DIR": t.TempDir(), "FELIX_CONTROLPLANE_BIND": "127.0.0.1:0",
		"FELIX_CONTROLPLANE_RAFT_BIND": "127.0.0.1:0", "FELIX_CONTROLPLANE_METRICS_BIND": "127.0.0.1:0"}
	cfg, err := loadConfig(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	m, err := start(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	ops := m.opsHandler()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		ops.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for code, _ := get("/ready"); code != 200; code, _ = get("/ready") {
		if time.Now().After(deadline) {
			t.Fatal("no leader within 20s")
		}
		<-tick.C
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "\nfelix_meta_raft_leader 1\n") ||
		!strings.Contains(body, "\nfelix_meta_raft_voters 1\n") {
		t.Fatalf("metrics: %d\n%s", code, body)
	}
	if err := m.drain(); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/ready"); code != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("/ready after drain: %d %q", code, body)
	}
	if code, _ := get("/live"); code != 200 {
		t.Fatalf("/live after drain: %d", code)
	}
}

package broker

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"felix/auth"
)

// pprofMux is the ops mux's profiler part of a broker with FELIX_PPROF=pprof and auth on,
// and the bootstrap admin token.
func pprofMux(t *testing.T, pprof bool) (*http.ServeMux, string) {
	t.Helper()
	dir := t.TempDir()
	res, err := auth.Bootstrap(auth.BootstrapOptions{DataDir: dir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := os.ReadFile(res.AdminTokenPath)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: &Config{Pprof: pprof, Auth: true}, authRes: res, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	mux := http.NewServeMux()
	s.registerPprof(mux)
	return mux, strings.TrimSpace(string(tok))
}

func pprofGet(mux *http.ServeMux, path, token string) int {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Code
}

// /debug/pprof is not served by default (issue 23 item 7); with FELIX_PPROF it needs the
// admin token.
func TestPprofOffByDefaultAndBehindTheAdminToken(t *testing.T) {
	off, tok := pprofMux(t, false)
	if code := pprofGet(off, "/debug/pprof/cmdline", tok); code != http.StatusNotFound {
		t.Fatalf("FELIX_PPROF unset: /debug/pprof/cmdline answered %d, want 404", code)
	}
	on, tok := pprofMux(t, true)
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
		if code := pprofGet(on, p, ""); code != http.StatusUnauthorized {
			t.Fatalf("%s without a token: %d, want 401", p, code)
		}
		if code := pprofGet(on, p, "not-a-token"); code != http.StatusUnauthorized {
			t.Fatalf("%s with a bad token: %d, want 401", p, code)
		}
		if code := pprofGet(on, p, tok); code != http.StatusOK {
			t.Fatalf("%s with the admin token: %d, want 200", p, code)
		}
	}
}

// FELIX_PPROF is a boolean setting, off by default.
func TestPprofSetting(t *testing.T) {
	cfg, _, err := LoadConfig(nil, envOf(nil))
	if err != nil || cfg.Pprof {
		t.Fatalf("default: pprof=%v err=%v", cfg != nil && cfg.Pprof, err)
	}
	cfg, _, err = LoadConfig(nil, envOf(map[string]string{"FELIX_PPROF": "true"}))
	if err != nil || !cfg.Pprof {
		t.Fatalf("FELIX_PPROF=true: %v", err)
	}
	if _, _, err = LoadConfig(nil, envOf(map[string]string{"FELIX_PPROF": "maybe"})); err == nil || !strings.Contains(err.Error(), "FELIX_PPROF") {
		t.Fatalf("FELIX_PPROF=maybe: %v", err)
	}
}

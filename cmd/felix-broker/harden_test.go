package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A bad setting is a usage/config error (exit 2) found before the data dir is touched: no
// keys, admin token or run-state are written, so the next start is not "unclean".
func TestBadConfigExits2BeforeTouchingDataDir(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"FELIX_QUIC_BIND":                 "127.0.0.1:99999",
		"FELIX_IO_BACKEND":                "bogus",
		"FELIX_CORES":                     "abc",
		"FELIX_SHUTDOWN_DRAIN_TIMEOUT_MS": "0",
		"FELIX_MAX_FRAME_BYTES":           "100",
		"FELIX_READY_FILE":                filepath.Join(notDir, "ready.json"),
	}
	for env, value := range cases {
		t.Run(env, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(brokerBin)
			cmd.Env = append(os.Environ(), "FELIX_QUIC_BIND=127.0.0.1:0", "FELIX_BROKER_METRICS_BIND=127.0.0.1:0",
				"FELIX_DURABLE_STORAGE_DIR="+data, env+"="+value)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("%s=%s: exit %v, want 2\n%s", env, value, err, out)
			}
			if !strings.Contains(string(out), env) {
				t.Errorf("message does not name %s: %s", env, out)
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("data dir touched by a failed start: %v", err)
			}
		})
	}
}
